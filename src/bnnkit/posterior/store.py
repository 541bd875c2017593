"""The one save/load path of any posterior a method returns.

The run driver stores, after every kept unit (iteration or epoch), what ``method.posterior``
returned for each member, in one file ``samples/sample_<unit>.npz``:

- :class:`~bnnkit.posterior.Samples` of all members are joined along the chain axis, so the
  file holds each parameter as ``(chains, 1, ...)`` under its tree path
  (``params/Dense_0/kernel``);
- any other kind (a VI member's :class:`~bnnkit.posterior.diag_gaussian.DiagGaussian`, a
  Laplace approximation) is stored per member under ``<member>/...``.

Two more entries name the kind and hold each member's JSON metadata (``__kind__``,
``__meta__``); both are plain unicode arrays, so nothing is pickled. :func:`load_run` reads a
run back as one posterior: the samples of every kept unit joined along the sample axis, or the
stored approximations as one component each of a :class:`~bnnkit.posterior.mixture.Mixture`.

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
from bnnkit.posterior.mixture import Mixture
from bnnkit.posterior.samples import Samples
from bnnkit.types import Params

#: Every storable posterior class by its ``kind``: a new kind of posterior is its class (a
#: :class:`~bnnkit.posterior.base.Posterior`) and one entry here.
KINDS: dict[str, type[Posterior]] = {
    cls.kind: cls
    for cls in (Samples, DiagGaussian, DiagLaplace, LastLayerLaplace, KFACLaplace)
}
KIND_KEY = "__kind__"
META_KEY = "__meta__"


def save(path: str | os.PathLike, members: Sequence[Posterior], *,
         before_rename: Callable[[storage.Written], None] | None = None) -> storage.Written:
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
        arrays = {f"{m}/{k}": v for m, member in enumerate(members)
                  for k, v in member.arrays().items()}
        metas = [member.meta() for member in members]
    arrays[KIND_KEY] = np.asarray(kind)
    arrays[META_KEY] = np.asarray(json.dumps(metas))
    return storage.save_arrays(path, arrays, before_rename=before_rename)


def load(path: str | os.PathLike, template: Params, *,
         sha256: str | None = None) -> list[Posterior]:
    """The posteriors stored by :func:`save`: one joined Samples, or one object per member.

    Args:
        path: the file.
        template: a position with the parameter tree structure (shapes do not matter).
        sha256: the digest the file must have (from the run's manifest).

    Raises:
        ConfigError: a damaged file, an unknown kind, or parameters of another model.
    """
    arrays = storage.load_arrays(path, sha256=sha256)
    if KIND_KEY not in arrays or META_KEY not in arrays:
        raise ConfigError(f"{str(path)!r} is damaged or not a stored posterior (no {KIND_KEY})")
    kind = str(arrays.pop(KIND_KEY))
    metas = json.loads(str(arrays.pop(META_KEY)))
    if kind not in KINDS:
        raise ConfigError(f"{str(path)!r} holds an unknown posterior kind {kind!r}; known: "
                          f"{', '.join(KINDS)}")
    if kind == Samples.kind:
        return [Samples.from_arrays(template, arrays, {})]
    members = []
    for m, meta in enumerate(metas):
        prefix = f"{m}/"
        own = {k[len(prefix):]: v for k, v in arrays.items() if k.startswith(prefix)}
        members.append(KINDS[kind].from_arrays(template, own, meta))
    return members


def combine(units: Sequence[list[Posterior]]) -> Posterior | Mixture:
    """One posterior from those of several kept units (each a list per :func:`load`).

    Samples are joined along the sample axis; approximations become components of a
    :class:`Mixture` (a single one is returned as itself).
    """
    if not units:
        raise ValueError("nothing to combine")
    if isinstance(units[0][0], Samples):
        return Samples.concatenate([unit[0] for unit in units], axis=1)
    components = tuple(c for unit in units for c in unit)
    return components[0] if len(components) == 1 else Mixture(components)


def load_run(rundir, record: dict, template: Params) -> Posterior | Mixture:
    """The posterior a run directory stores, over all its kept units.

    Args:
        rundir: a :class:`bnnkit.runs.RunDir`.
        record: its ``run.json``.
        template: a position with the parameter tree structure.

    Every sample file is checked against the run's manifest as it is read: a missing,
    damaged, edited or unrecorded one is refused, never silently left out.

    Raises:
        ConfigError: no kept unit yet, a damaged file, or a run of an older layout whose
            posterior this version cannot read.
    """
    from bnnkit.runs import manifest  # the run driver imports this module

    if "layout" not in record:
        units = rundir.sample_units()
        if not units:
            raise ConfigError(f"run {str(rundir.path)!r} has no kept samples yet")
        return _load_legacy(rundir, record, template, units)
    found = manifest.check(rundir, record, hash_samples=False)
    # The state is not read here: only the samples' files matter.
    found = found._replace(findings=[f for f in found.findings if f.file != rundir.state_file.name])
    problem = manifest.first_problem(rundir, found)
    if problem is not None:
        raise ConfigError(problem)
    if not found.samples:
        raise ConfigError(f"run {str(rundir.path)!r} has no kept samples yet")
    return combine([load(rundir.sample_file(u), template, sha256=digest)
                    for u, digest in sorted(found.samples.items())])


def _load_legacy(rundir, record: dict, template: Params, units: list[int]) -> Samples:
    """Runs written before the one driver: sample files hold ``(chains, ...)`` positions."""
    kind = record.get("posterior", "samples")
    if kind != "samples":
        raise ConfigError(
            f"run {str(rundir.path)!r} comes from an older bnnkit layout whose {kind!r} "
            "posterior this version does not read; run it again with this version")
    parts = []
    for u in units:
        arrays = storage.load_arrays(rundir.sample_file(u))
        tree = storage.unflatten_tree(template, arrays)
        parts.append(Samples(_add_sample_axis(tree)))
    return Samples.concatenate(parts, axis=1)


def _add_sample_axis(tree: Params) -> Params:
    import jax

    return jax.tree.map(lambda a: np.asarray(a)[:, None], tree)
