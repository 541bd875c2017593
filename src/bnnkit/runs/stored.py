"""Read any run directory back: the one path from a directory to the run it holds.

:func:`load_run` reads ``run.json`` (checked against its settings digest), checks the files it
reads against the manifest (:mod:`bnnkit.runs.manifest`: a missing, damaged, edited or
unrecorded file is refused, never silently left out) and joins every kept unit:

- a run of the driver (:func:`bnnkit.runs.run`): the problem rebuilt from its settings and
  the posterior of every kept unit, read by :func:`bnnkit.posterior.store.load` from
  ``samples/sample_<unit>.npz`` — samples joined along the sample axis, approximations (VI,
  Laplace) as the components of a :class:`~bnnkit.posterior.mixture.Mixture`
  (:func:`stored_posterior`);
- a run of :func:`bnnkit.runs.sample`: its :class:`~bnnkit.runs.chains.Chains` from
  ``samples/chunk_<iterations done>.npz`` and ``state.npz``, and their kept positions as
  :class:`~bnnkit.posterior.Samples` (:func:`load_chains` returns the chains alone).

Runs written before the one driver (no ``layout`` in ``run.json``) keep reading: their sample
files hold ``(chains, ...)`` positions.

Example:
    >>> import tempfile
    >>> from bnnkit.inference import sgd
    >>> from bnnkit.problem import ProblemConfig
    >>> from bnnkit.runs.loop import run
    >>> run_dir = tempfile.mkdtemp() + "/run"
    >>> _ = run(ProblemConfig("yacht_0", "mlp_regression_small", noise_std=0.35),
    ...         sgd.Config(init_step_size=1e-4, num_epochs=2, batch_size=64), run_dir,
    ...         progress=False)
    >>> stored = load_run(run_dir)
    >>> stored.record["status"], stored.problem.dataset.name, stored.chains
    ('finished', 'yacht_0', None)
    >>> stored.posterior.num_chains, stored.posterior.num_samples
    (1, 1)
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import numpy as np

from bnnkit import problem as problem_lib
from bnnkit import storage
from bnnkit.data import npz
from bnnkit.entry_points import check_call
from bnnkit.errors import ArgumentError, ConfigError
from bnnkit.inference import METHODS
from bnnkit.models import canonical_name, imported
from bnnkit.posterior import store
from bnnkit.posterior.mixture import Mixture
from bnnkit.posterior.samples import Samples
from bnnkit.runs import density, lifecycle, manifest
from bnnkit.runs.chains import Chains, chains_of
from bnnkit.runs.chunks import load_chunks
from bnnkit.runs.directory import RunDir
from bnnkit.types import Params


class StoredRun(NamedTuple):
    """What :func:`load_run` reads back.

    Attributes:
        record: ``run.json``.
        problem: the rebuilt problem of a run of the driver (``None`` for a run of
            :func:`bnnkit.runs.sample`, which has no data or model).
        posterior: every kept unit's posterior joined (:func:`stored_posterior`); for a
            :func:`bnnkit.runs.sample` run, its kept positions as Samples.
        chains: a :func:`bnnkit.runs.sample` run's chains (``None`` for a run of the driver).
    """

    record: dict
    problem: problem_lib.Problem | None
    posterior: Any
    chains: Chains | None


def load_run(
    run_dir: str | os.PathLike,
    *,
    like: Params | None = None,
    network: bool = False,
    problem: problem_lib.Problem | None = None,
    trust_model: str | None = None,
    rebuild: bool = True,
) -> StoredRun:
    """Read the run stored in ``run_dir`` back.

    Reading a run runs no code it names: a run whose model is a module outside bnnkit
    (``--model mymod:Net``) is rebuilt only with ``trust_model="mymod:Net"``, the user's word
    that this module may be imported (or with ``problem=`` passed back in);
    :func:`bnnkit.models.imported.check_trusted` says the rule.

    Args:
        run_dir: the run directory.
        like: for a :func:`bnnkit.runs.sample` run, a pytree of its positions' structure
            (see :func:`load_chains`).
        network: refuse a :func:`bnnkit.runs.sample` run (for readers that predict with the
            problem).
        problem: the run's problem, passed back in (a run made by
            :meth:`~bnnkit.problem.Problem.from_arrays` whose model cannot be rebuilt in
            another process); it must be the run's, settings and arrays. ``None`` rebuilds it
            from the run (:func:`bnnkit.problem.build_recorded`).
        trust_model: the model import path the user allows importing, which must be the
            one the run records (``--model`` on a reading command).
        rebuild: rebuild the problem; ``False`` reads the posterior alone, its parameter tree
            taken from the names in its files (importing no model, loading no data), and
            returns no problem.

    Raises:
        ConfigError: not a run directory, a damaged one, no kept samples yet, an unfinished
            :func:`bnnkit.runs.sample` run, or one when ``network``; a ``problem`` that is not
            the run's; a model the user did not allow, or a ``trust_model`` that is not the
            run's; stored parameters whose shapes are not those of the model the run records.
    """
    imported.check_trust_argument(trust_model)
    rundir = RunDir(run_dir)
    record = rundir.read_record()
    if record.get("chunks"):
        if network:
            raise ConfigError(
                f"{str(rundir.path)!r} is a run of bnnkit.runs.sample: chains "
                "on a log density, with no data or model to predict with; read "
                "it with bnnkit.load_chains"
            )
        chains = _chains(rundir, record, like)
        return StoredRun(record, None, Samples(chains.positions), chains)
    where = repr(str(rundir.run_file))
    given = recorded_problem(record, where, data=False)
    if trust_model is not None and canonical_name(trust_model) != canonical_name(given.model):
        # In parts: the command line names it --model, Python trust_model.
        raise ArgumentError(
            "",
            "trust_model",
            f"{trust_model!r} is not the model of the run {str(rundir.path)!r}, which records "
            f"{given.model!r}",
            repr(given.model),
            " or None",
        )
    if not rebuild:
        return StoredRun(record, None, stored_posterior(rundir, record, None), None)
    recorded = record.get("dataset") if isinstance(record.get("dataset"), dict) else {}
    if problem is not None:
        problem_lib.check_same(problem, given, recorded, f"the run {str(rundir.path)!r}")
    else:
        config = recorded_problem(record, where)
        problem = problem_lib.build_recorded(config, rundir.path, recorded, trust_model=trust_model)
        if config != given:
            # Read from where the run recorded its data, named as the run was given it.
            problem = dataclasses.replace(
                problem,
                config=given,
                dataset=dataclasses.replace(problem.dataset, name=given.dataset),
            )
    template = jax.eval_shape(problem.init_params, jax.random.PRNGKey(0))
    posterior = stored_posterior(rundir, record, template)
    check_shapes(posterior, template, f"the run {str(rundir.path)!r}", problem.config)
    return StoredRun(record, problem, posterior, None)


def check_shapes(
    posterior: Any, template: Params, where: str, config: problem_lib.ProblemConfig
) -> None:
    """Refuse stored parameters whose shapes are not the model's: a ``run.json`` edited to
    another dataset or model (its digest written anew) would otherwise fail deep inside the
    network.

    Args:
        posterior: the stored posterior (:func:`stored_posterior`).
        template: the rebuilt model's parameters (shapes).
        where: the run, for messages.
        config: the problem the model was rebuilt for, for messages.

    Raises:
        ConfigError: naming the first parameter whose shapes differ, both shapes and the
            recorded model and dataset.
    """
    components = posterior.components if isinstance(posterior, Mixture) else (posterior,)
    expected = _shapes(template)
    for component in components:
        if isinstance(component, Samples):  # (chains, samples, ...)
            stored = {k: shape[2:] for k, shape in _shapes(component.params).items()}
        else:
            position = getattr(component, "mean", None)
            stored = _shapes(component.params if position is None else position)
        for key, shape in expected.items():
            if key in stored and stored[key] != shape:
                raise ConfigError(
                    f"{where} stores {key} of shape {stored[key]}, where model "
                    f"{config.model} on dataset {config.dataset!r}, as its run.json records "
                    f"them, has {shape}: its samples were not made on that problem; "
                    "allowed: the run.json the run was made with"
                )


def _shapes(tree: Any) -> dict[str, tuple[int, ...]]:
    """Each leaf's shape, keyed by its path as :func:`bnnkit.storage.flatten_tree` names it."""
    return {
        storage.path_to_str(path): tuple(np.shape(leaf))
        for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]
    }


def recorded_problem(record: dict, where: str, *, data: bool = True) -> problem_lib.ProblemConfig:
    """The problem a run of the driver was made on, from its ``run.json``.

    A run on a user ``.npz`` recorded the file's resolved path and sha256
    (:func:`bnnkit.data.npz.fingerprint`); the problem then reads that file, wherever the run
    is read from, once its bytes are checked to be those the run was made on.

    Args:
        record: the run's ``run.json``.
        where: the record, for messages (``"'run/run.json'"``).
        data: resolve and check the data file (else the problem as the run was given it).

    Raises:
        ConfigError: no problem or one this bnnkit cannot build; the data file is gone or
            changed.
    """
    if not isinstance(record.get("problem"), dict):
        raise ConfigError(f"{where} is damaged: it has no 'problem' object")
    try:
        config = problem_lib.ProblemConfig.from_dict(record["problem"])
    except TypeError as err:  # a run of an older layout, edited by hand
        raise ConfigError(
            f"{where} is damaged: its problem is not one this bnnkit can build ({err})"
        ) from None
    recorded = record.get("dataset")
    if data and isinstance(recorded, dict):
        file = npz.recorded_file(recorded, config.dataset)
        if file != config.dataset:
            config = dataclasses.replace(config, dataset=file)
    return config


def load_chains(run_dir: str | os.PathLike, like: Params | None = None) -> Chains:
    """The chains a finished :func:`bnnkit.runs.sample` run stored, each file checked against
    its digest (:func:`load_run` of such a run, its chains alone).

    Args:
        run_dir: the run directory.
        like: a pytree of the positions' structure (e.g. the initial positions); ``None``
            rebuilds nested dictionaries from the stored names, which fits positions that are
            dictionaries.

    Raises:
        ConfigError: not a finished :func:`bnnkit.runs.sample` run, a damaged or edited file,
            or positions that are not dictionaries without ``like``.
    """
    check_call("bnnkit.load_chains", locals())
    rundir = RunDir(run_dir)
    record = rundir.read_record()
    if not record.get("chunks"):
        raise ConfigError(f"{str(rundir.path)!r} is not a run of bnnkit.runs.sample")
    return _chains(rundir, record, like)


def _chains(rundir: RunDir, record: dict, like: Params | None) -> Chains:
    """A :func:`bnnkit.runs.sample` run's chains (see :func:`load_chains`)."""
    if record.get("method") not in METHODS:
        raise ConfigError(f"{str(rundir.path)!r} is not a run of bnnkit.runs.sample")
    if record.get("status") != "finished":
        raise ConfigError(
            f"{str(rundir.path)!r} is not finished (status "
            f"{record.get('status')!r}); resume it with sample(..., "
            "resume=True)"
        )
    config = METHODS[record["method"]].Config.from_dict(record["method_config"])
    loop = config.loop(1)
    stored = record["problem"]["initial_positions"]
    if like is None:
        like = _nested({path: 0 for path in stored})
        if str(jax.tree.structure(like)) != record["problem"]["structure"]:
            raise ConfigError(
                f"the positions stored in {str(rundir.path)!r} are a "
                f"{record['problem']['structure']}, not dictionaries; pass "
                "like= a pytree of their structure"
            )
    given = sorted(jax.tree.leaves(_paths(like)))
    if given != sorted(stored):
        raise ConfigError(
            f"like= has the leaves {given}, the positions stored in "
            f"{str(rundir.path)!r} {sorted(stored)}"
        )
    positions = jax.tree.map(
        lambda _, path: jax.ShapeDtypeStruct(tuple(stored[path][0]), np.dtype(stored[path][1])),
        like,
        _paths(like),
    )
    template, kept_template, info_template = density.shapes(config, positions)
    found = manifest.check(rundir, record, hash_samples=False)
    problem = manifest.first_problem(rundir, found)
    if problem is not None:
        raise ConfigError(f"cannot load: {problem}")
    _, state = lifecycle.load_state(rundir, template, found.state_sha256)
    kept, info = load_chunks(rundir, loop.num_units, kept_template, info_template)
    return chains_of(kept, info, state, loop, config.METHOD)


def _paths(tree: Any) -> Any:
    """``tree`` with each leaf replaced by its path as :func:`bnnkit.storage.flatten_tree`
    names it."""
    return jax.tree_util.tree_map_with_path(lambda path, _: storage.path_to_str(path), tree)


def _nested(flat: dict[str, Any]) -> dict[str, Any]:
    """``{"a/b": x}`` as ``{"a": {"b": x}}``."""
    out: dict[str, Any] = {}
    for path, value in flat.items():
        *parents, last = path.split("/")
        node = out
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return out


def kept_samples(
    rundir: RunDir, record: dict, *, hash_samples: bool = True
) -> dict[int, str | None]:
    """The kept units of a run of the driver and their files' recorded digests, after
    checking every sample file against the manifest (the state is not: only the samples
    matter to a reader).

    Args:
        rundir: the run directory.
        record: its ``run.json``.
        hash_samples: hash every sample file now (else the reader checks each digest as it
            loads the file).

    Returns:
        ``{first unit of a file: sha256}`` (``None`` for a run of an older layout without a
        manifest); empty when nothing is kept yet.

    Raises:
        ConfigError: a missing, damaged, edited or unrecorded sample file, in one line.
    """
    found = manifest.check(rundir, record, hash_samples=hash_samples)
    found = found._replace(findings=[f for f in found.findings if f.file != rundir.state_file.name])
    problem = manifest.first_problem(rundir, found)
    if problem is not None:
        raise ConfigError(problem)
    return found.samples


def stored_posterior(rundir: RunDir, record: dict, template: Params | None) -> Any:
    """The posterior a run of the driver stores, over all its kept units (see :func:`combine`).

    Args:
        rundir: the run directory.
        record: its ``run.json``.
        template: a position with the parameter tree structure; ``None`` takes it from the
            names in the run's first sample file (:func:`stored_template`), for readers that
            need no model.

    Raises:
        ConfigError: no kept unit yet, a damaged file, or a run of an older layout whose
            posterior this version cannot read.
    """
    if "layout" not in record:
        units = rundir.sample_units()
        if not units:
            raise ConfigError(f"run {str(rundir.path)!r} has no kept samples yet")
        if template is None:
            template = _nested({k: 0 for k in storage.load_arrays(rundir.sample_file(units[0]))})
        return _load_legacy(rundir, record, template, units)
    samples = kept_samples(rundir, record, hash_samples=False)
    if not samples:
        diverged = record.get("diverged")
        if record.get("status") == "diverged" and isinstance(diverged, dict):
            raise ConfigError(
                f"run {str(rundir.path)!r} diverged (NaN or infinite values) in "
                f"unit {diverged.get('unit', 0) + 1} before it kept a sample; "
                "allowed: a run with kept samples"
            )
        raise ConfigError(f"run {str(rundir.path)!r} has no kept samples yet")
    files = rundir.sample_files()
    if template is None:
        first = min(samples)
        template = stored_template(files[first], samples[first])
    return combine(
        [store.load(files[u], template, sha256=digest) for u, digest in sorted(samples.items())]
    )


def stored_template(path: str | os.PathLike, sha256: str | None = None) -> Params:
    """The parameter tree a sample file of :func:`bnnkit.posterior.store.save` holds, from
    its arrays' names alone: nested dictionaries, as a flax model's parameters are.

    Args:
        path: the file.
        sha256: the digest it must have (from the run's manifest).

    Raises:
        ConfigError: a damaged or edited file.

    Example:
        >>> import tempfile, pathlib
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "sample_0000000.npz"
        >>> _ = store.save(path, [Samples({"params": {"w": np.zeros((1, 1, 3))}})])
        >>> stored_template(path)
        {'params': {'w': 0}}
    """
    arrays = storage.load_arrays(path, sha256=sha256)
    kind = str(arrays.get(store.KIND_KEY, Samples.kind))
    names = [k for k in arrays if k not in (store.KIND_KEY, store.META_KEY)]
    if kind != Samples.kind:
        # Each member's arrays under "<member>/", its position under "mean/" or "params/".
        own = [k[2:] for k in names if k.startswith("0/")]
        part = "mean/" if any(k.startswith("mean/") for k in own) else "params/"
        names = [k[len(part) :] for k in own if k.startswith(part)]
    return _nested({name: 0 for name in names})


def combine(units: Sequence[list[Any]]) -> Any:
    """One posterior from those of several kept units (each a list per
    :func:`bnnkit.posterior.store.load`).

    Samples are joined along the sample axis; approximations become components of a
    :class:`~bnnkit.posterior.mixture.Mixture` (a single one is returned as itself).

    Example:
        >>> one = [Samples({"w": np.zeros((2, 1, 3))})]
        >>> combine([one, one, one]).num_samples
        3
    """
    if not units:
        raise ValueError("nothing to combine")
    if isinstance(units[0][0], Samples):
        return Samples.concatenate([unit[0] for unit in units], axis=1)
    components = tuple(c for unit in units for c in unit)
    return components[0] if len(components) == 1 else Mixture(components)


def _load_legacy(rundir: RunDir, record: dict, template: Params, units: list[int]) -> Samples:
    """Runs written before the one driver: sample files hold ``(chains, ...)`` positions."""
    kind = record.get("posterior", "samples")
    if kind != "samples":
        raise ConfigError(
            f"run {str(rundir.path)!r} comes from an older bnnkit layout whose {kind!r} "
            "posterior this version does not read; run it again with this version"
        )
    parts = []
    for u in units:
        tree = storage.unflatten_tree(template, storage.load_arrays(rundir.sample_file(u)))
        parts.append(Samples(jax.tree.map(lambda a: np.asarray(a)[:, None], tree)))
    return Samples.concatenate(parts, axis=1)
