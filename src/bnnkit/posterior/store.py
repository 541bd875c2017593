"""The one save/load of a file of the posteriors a method returns.

The run driver stores, after every kept unit (iteration or epoch), what ``method.posterior``
returned for each member, in one file ``samples/sample_<unit>.npz`` (:func:`save`):

- :class:`~bnnkit.posterior.Samples` of all members are joined along the chain axis, so the
  file holds each parameter as ``(chains, 1, ...)`` under its tree path
  (``params/Dense_0/kernel``);
- any other kind (a VI member's :class:`~bnnkit.posterior.diag_gaussian.DiagGaussian`, a
  Laplace approximation) is stored per member under ``<member>/...``.

Two more entries name the kind and hold each member's JSON metadata (``__kind__``,
``__meta__``); both are plain unicode arrays, so nothing is pickled. :func:`load` reads one
file back; reading a whole run, every kept unit joined, is :mod:`bnnkit.runs.stored`'s.

Example:
    >>> import tempfile, pathlib, numpy as np
    >>> from bnnkit.posterior import Samples
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "sample_0000000.npz"
    >>> member = Samples({"w": np.zeros((1, 1, 3))})
    >>> _ = save(path, [member, member])
    >>> [p.num_chains for p in load(path, {"w": 0})]
    [2]
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence

import numpy as np

from bnnkit import storage
from bnnkit.errors import ConfigError
from bnnkit.posterior.base import Posterior
from bnnkit.posterior.diag_gaussian import DiagGaussian
from bnnkit.posterior.laplace import DiagLaplace, KFACLaplace, LastLayerLaplace
from bnnkit.posterior.low_rank_gaussian import LowRankGaussian
from bnnkit.posterior.mc_dropout import MCDropout
from bnnkit.posterior.samples import Samples
from bnnkit.types import Params

#: Every storable posterior class by its ``kind``: a new kind of posterior is its class (a
#: :class:`~bnnkit.posterior.base.Posterior`) and one entry here.
KINDS: dict[str, type[Posterior]] = {
    cls.kind: cls
    for cls in (
        Samples,
        DiagGaussian,
        DiagLaplace,
        LastLayerLaplace,
        KFACLaplace,
        LowRankGaussian,
        MCDropout,
    )
}
KIND_KEY = "__kind__"
META_KEY = "__meta__"


def save(
    path: str | os.PathLike,
    members: Sequence[Posterior],
    *,
    before_rename: Callable[[storage.Written], None] | None = None,
) -> storage.Written:
    """Write the posteriors of every member at one kept unit (atomic, no pickle).

    Returns:
        The file's digest (``before_rename`` as in :func:`bnnkit.storage.atomic_write_bytes`).
    """
    kinds = {m.kind for m in members}
    if len(kinds) != 1:
        raise ValueError(f"members of one run return one kind of posterior, got {kinds}")
    kind = kinds.pop()
    if kind not in KINDS:
        raise ValueError(f"unknown posterior kind {kind!r}; storable: {', '.join(KINDS)}")
    if kind == Samples.kind:
        arrays = Samples.concatenate(members, axis=0).arrays()
        metas: list[dict] = [{}]
    else:
        arrays = {
            f"{m}/{k}": v for m, member in enumerate(members) for k, v in member.arrays().items()
        }
        metas = [member.meta() for member in members]
    arrays[KIND_KEY] = np.asarray(kind)
    arrays[META_KEY] = np.asarray(json.dumps(metas))
    return storage.save_arrays(path, arrays, before_rename=before_rename)


def load(
    path: str | os.PathLike, template: Params, *, sha256: str | None = None
) -> list[Posterior]:
    """The posteriors stored by :func:`save`: one joined Samples, or one object per member.

    Args:
        path: the file.
        template: a position with the parameter tree structure (shapes do not matter).
        sha256: the digest the file must have (from the run's manifest).

    Raises:
        ConfigError: a damaged file, an unknown kind, parameters of another model, or NaN or
            infinite values (a run that diverged before runs were stopped for it: every
            reader, from ``evaluate`` to ``prune`` and ``surface``, refuses it here).
    """
    arrays = storage.load_arrays(path, sha256=sha256)
    if KIND_KEY not in arrays or META_KEY not in arrays:
        raise ConfigError(f"{str(path)!r} is damaged or not a stored posterior (no {KIND_KEY})")
    for key, value in arrays.items():
        if np.issubdtype(value.dtype, np.floating) and not np.isfinite(value).all():
            raise ConfigError(
                f"{str(path)!r} holds NaN or infinite values ({key}): the run diverged, and a "
                "posterior that is not finite predicts nothing; allowed: a run whose posterior "
                "is finite (make it again with a smaller step size)"
            )
    kind = str(arrays.pop(KIND_KEY))
    metas = json.loads(str(arrays.pop(META_KEY)))
    if kind not in KINDS:
        raise ConfigError(
            f"{str(path)!r} holds an unknown posterior kind {kind!r}; known: {', '.join(KINDS)}"
        )
    if kind == Samples.kind:
        return [Samples.from_arrays(template, arrays, {})]
    members = []
    for m, meta in enumerate(metas):
        prefix = f"{m}/"
        own = {k[len(prefix) :]: v for k, v in arrays.items() if k.startswith(prefix)}
        members.append(KINDS[kind].from_arrays(template, own, meta))
    return members
