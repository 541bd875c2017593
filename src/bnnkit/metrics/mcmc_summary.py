"""A per-parameter table of MCMC diagnostics for a pytree of draws, like ``arviz.summary``.

:func:`summary` gives every scalar parameter of the positions (for example those
:func:`bnnkit.sample` returns) one row: its posterior mean, standard deviation and 5 %/95 %
quantiles, the Monte Carlo standard errors of the mean and sd, the bulk and tail effective
sample sizes and the rank-normalised split R-hat of Vehtari et al. (2021), computed by
:func:`bnnkit.metrics.mcmc.diagnose` (see :mod:`bnnkit.metrics.mcmc` for the formulas).
Vehtari et al. recommend R-hat < 1.01 and a bulk and tail ESS of at least 100 per chain before
the means and quantiles (and their MCSEs) are trusted.

A row's name is the leaf's path in the tree (``storage.path_to_str``: keys joined by ``/``)
followed by the index within the leaf, as ArviZ writes it: ``mu``, ``z[3]``,
``Dense_0/kernel[0, 1]``.

Example:
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> positions = {"mu": rng.normal(size=(4, 500)), "z": rng.normal(size=(4, 500, 2))}
    >>> table = summary(positions)
    >>> [row.name for row in table]
    ['mu', 'z[0]', 'z[1]']
    >>> bool(table["z[1]"].r_hat < 1.01), bool(table["mu"].ess_bulk > 1000)
    (True, True)
    >>> print(table.to_markdown().splitlines()[0])
    | parameter | mean | sd | 5% | 95% | mcse_mean | mcse_sd | ess_bulk | ess_tail | r_hat |
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Iterator
from typing import Any, NamedTuple

import jax
import numpy as np

from bnnkit.arguments import array_argument
from bnnkit.errors import ConfigError
from bnnkit.metrics import mcmc
from bnnkit.storage import path_to_str

#: The name of a leaf that is the whole tree (a bare array of draws).
BARE_NAME = "x"


class ParameterSummary(NamedTuple):
    """One scalar parameter's row; the fields after ``name`` are :data:`mcmc.COLUMNS`."""

    name: str
    mean: float
    sd: float
    q5: float
    q95: float
    mcse_mean: float
    mcse_sd: float
    ess_bulk: float
    ess_tail: float
    r_hat: float


#: Markdown header of each column.
_HEADERS = {"name": "parameter", "q5": "5%", "q95": "95%"}
#: Columns printed as whole numbers, and the R-hat with three decimals (the 1.01 threshold).
_WHOLE = ("ess_bulk", "ess_tail")


@dataclasses.dataclass(frozen=True)
class Summary:
    """Rows of :class:`ParameterSummary`, in the tree's leaf order, then index order.

    Attributes:
        rows: one row per scalar parameter.
    """

    rows: tuple[ParameterSummary, ...]

    def __iter__(self) -> Iterator[ParameterSummary]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, name: str) -> ParameterSummary:
        for row in self.rows:
            if row.name == name:
                return row
        raise KeyError(name)

    def to_dicts(self) -> list[dict[str, Any]]:
        """The rows as dictionaries (JSON-serialisable; undefined values are NaN)."""
        return [row._asdict() for row in self.rows]

    def to_markdown(self, digits: int = 3) -> str:
        """The table in Markdown: ``digits`` significant digits, ESS as whole numbers and R-hat
        with three decimals.

        Args:
            digits: significant digits of the means, sds, quantiles and MCSEs.

        Returns:
            A header, an alignment line and one line per row, joined by newlines.
        """
        fields = ParameterSummary._fields

        def cell(field: str, value: Any) -> str:
            if field == "name":
                return str(value)
            if not math.isfinite(value):
                return "nan"
            if field in _WHOLE:
                return f"{value:.0f}"
            if field == "r_hat":
                return f"{value:.3f}"
            return f"{value:.{digits}g}"

        lines = [
            "| " + " | ".join(_HEADERS.get(f, f) for f in fields) + " |",
            "|" + "|".join(["---"] + ["---:"] * (len(fields) - 1)) + "|",
        ]
        lines += [
            "| " + " | ".join(cell(f, v) for f, v in zip(fields, row, strict=True)) + " |"
            for row in self.rows
        ]
        return "\n".join(lines)


def _names(path: str, shape: tuple[int, ...]) -> list[str]:
    """Row names of a leaf whose draws have ``shape``: ``path[i, j]`` in C order."""
    name = path or BARE_NAME
    if not shape:
        return [name]
    return [
        f"{name}[{', '.join(map(str, index))}]"
        for index in itertools.product(*(range(n) for n in shape))
    ]


def summary(positions: Any) -> Summary:
    """Posterior summary and convergence diagnostics of every scalar parameter.

    Args:
        positions: a pytree (e.g. a dict) whose leaves are draws shaped
            (chains, samples, ...), all with the same chains and samples, at least 4 samples
            per chain.

    Returns:
        A :class:`Summary`: per scalar parameter its mean, sd (ddof 1), 5 % and 95 %
        quantiles, ``mcse_mean``, ``mcse_sd``, ``ess_bulk``, ``ess_tail`` and ``r_hat``
        (rank-normalised split R-hat); a constant parameter has NaN diagnostics.

    Raises:
        ConfigError: no leaves, leaves with different (chains, samples), or fewer than 4
            samples per chain.

    Example:
        >>> import numpy as np
        >>> rng = np.random.default_rng(1)
        >>> stuck = {"theta": rng.normal(size=(4, 300)) + np.arange(4)[:, None]}
        >>> row = summary(stuck)["theta"]
        >>> row.r_hat > 1.1  # the chains disagree
        True
    """
    leaves = jax.tree_util.tree_flatten_with_path(positions)[0]
    if not leaves:
        raise ConfigError(
            "summary needs a pytree of draws shaped (chains, samples, ...), got no arrays"
        )
    arrays = [
        array_argument(
            leaf, f"positions[{path_to_str(path)!r}]", where="summary", kinds="biuf"
        ).astype(np.float64)
        for path, leaf in leaves
    ]
    paths = [path_to_str(path) for path, _ in leaves]
    heads = {a.shape[:2] for a in arrays}
    if any(a.ndim < 2 for a in arrays) or len(heads) != 1:
        raise ConfigError(
            f"summary needs every leaf shaped (chains, samples, ...) with the "
            f"same chains and samples, got shapes "
            f"{dict(zip(paths, (a.shape for a in arrays), strict=True))}"
        )
    ((chains, samples),) = heads
    draws = np.concatenate(
        [a.reshape(chains, samples, math.prod(a.shape[2:])) for a in arrays], axis=2
    )
    table = mcmc.diagnose(draws)
    names = [
        name for path, a in zip(paths, arrays, strict=True) for name in _names(path, a.shape[2:])
    ]
    columns = [table[c].tolist() for c in mcmc.COLUMNS]
    return Summary(
        tuple(
            ParameterSummary(name, *values) for name, *values in zip(names, *columns, strict=True)
        )
    )
