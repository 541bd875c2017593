"""Whether a stored run may be resumed with the settings given now: every check of a resume
before anything is written (:func:`resume_checks`, step 1 of :mod:`bnnkit.runs.lifecycle`).

A resume continues the run bit for bit, so it refuses a run of another method, of an older
layout or noise generator, a run that diverged (it would only diverge again), a setting the
stored state has no place for, and any setting that differs but a resumable one
(:func:`check_resume`; ``bnnkit verify`` says the same about a stored run's own settings,
:func:`resume_refusal`). It then refuses any file it would keep that is damaged, missing or
unrecorded, since it cannot recompute what precedes its last state, a state of other shapes
than the run's, and fewer units than already done (:func:`resume_point`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import numpy as np

from bnnkit import distributed, storage
from bnnkit.data import npz
from bnnkit.errors import ConfigError
from bnnkit.inference import METHODS, _noise
from bnnkit.inference.base import Loop, RunSettings
from bnnkit.runs import directory, manifest, manifest_lines, sources
from bnnkit.runs.directory import RunDir
from bnnkit.runs.divergence import divergence_advice
from bnnkit.runs.keys import UNIT_KEY


def check_resume(record: dict, config: RunSettings, problem: dict) -> None:
    """Refuse to resume ``record``'s run with ``config`` on ``problem`` unless only resumable
    settings differ.

    Raises:
        ConfigError: another method, an older layout or noise generator, a setting the stored
            run has no state for, or a setting that differs, named in one line.
    """
    if record.get("method") != config.METHOD:
        raise ConfigError(f"cannot resume a {record.get('method')!r} run as {config.METHOD!r}")
    if "layout" not in record:
        raise ConfigError(
            "the run comes from an older bnnkit layout and cannot be resumed by "
            "this version; start it again with --overwrite"
        )
    if record.get("status") == "diverged":
        # A resume repeats the same steps bit for bit, so it would only diverge again.
        where = record.get("diverged")
        unit = where.get("unit") if isinstance(where, dict) else None
        loop_record = record.get("loop")
        kind = {"iterations": "iteration", "epochs": "epoch", "chunks": "chunk"}.get(
            loop_record.get("kind") if isinstance(loop_record, dict) else None, "unit"
        )
        at = f" in {kind} {unit + 1}" if isinstance(unit, int) else ""
        raise ConfigError(
            f"the run diverged (NaN or infinite values){at}, and a resume repeats "
            "its steps bit for bit; start it again with --overwrite and "
            f"{divergence_advice(config)}"
        )
    config_dict = config.to_dict()
    stored = type(config).current_names(record["method_config"])
    spec = config.source_run()
    if sources.same_source(record, spec):
        # The run it started from, moved or copied with it: the same run under another path.
        for name in [k for k, v in config_dict.items() if v == spec]:
            config_dict[name] = stored.get(name)
    # A resumable setting (HMC's integrator) changes neither the state nor the samples, so a
    # run made before it existed resumes with it.
    newer = sorted(set(config_dict) - set(stored) - type(config).resumable())
    if newer:
        # Its state has no place for what the new setting adapts or keeps.
        raise ConfigError(
            f"the run was made by an older bnnkit without the setting(s) "
            f"{', '.join(newer)} and cannot be resumed by this version; start it "
            "again with --overwrite"
        )
    if config.draws_gaussian_noise and record.get("gaussian_noise") != _noise.GENERATOR:
        raise ConfigError(
            f"the run drew its Gaussian noise with "
            f"{record.get('gaussian_noise', 'jax.random.normal')!r}, this version "
            f"with {_noise.GENERATOR!r}, so it cannot continue the same stream; "
            "start it again with --overwrite"
        )
    check_same_settings(
        {**record["problem"], **stored}, {**problem, **config_dict}, type(config).resumable()
    )


def resume_refusal(record: Mapping[str, Any]) -> str | None:
    """Why a resume of the run that ``record`` describes is refused whatever its files hold
    (another layout, a run that diverged, settings or a noise generator this version cannot
    continue), as :func:`check_resume` says it; ``None`` when a resume with the run's own
    settings passes these checks. What ``bnnkit verify`` advises follows it.

    Example:
        >>> resume_refusal({"method": "no-such-method"})
        "this bnnkit has no method 'no-such-method'"
    """
    method = record.get("method")
    if not isinstance(method, str) or method not in METHODS:
        return f"this bnnkit has no method {method!r}"
    try:
        config = METHODS[method].Config.from_dict(record.get("method_config") or {})
        check_resume(dict(record), config, record.get("problem") or {})
    except (ConfigError, TypeError, KeyError) as err:
        return str(err)
    return None


def resume_point(rundir: RunDir, record: dict, loop: Loop, template: Any = None) -> manifest.Check:
    """Where a resume starts, after checking every file it keeps against the manifest.

    Args:
        template: the state's shapes and dtypes, checked against those the manifest records
            for the state (``None``: left to :func:`bnnkit.runs.lifecycle.load_state`, under
            the lock).

    Raises:
        ConfigError: a damaged, missing or unrecorded file that the resume would keep (it
            cannot recompute what precedes its last state), a state of other shapes than the
            run's, or fewer units than already done.
    """
    found = manifest.check(rundir, record)
    problem = manifest.first_problem(rundir, found, only_unrepairable=True)
    if problem is not None:
        raise ConfigError(f"cannot resume: {problem}")
    done = found.state_unit
    if not record.get("manifest") and rundir.state_file.is_file():
        done = int(storage.load_arrays(rundir.state_file).get(UNIT_KEY, 0))
    if loop.num_units < done:
        raise ConfigError(
            f"--resume may only extend a run: {str(rundir.path)!r} has done {done} "
            f"{loop.kind}, more than the {loop.num_units} asked for now; allowed: >= {done}"
        )
    if template is not None and found.state_sha256 is not None:
        line = manifest_lines.Manifest(rundir.manifest_file).latest_matching(
            rundir.state_file.name, found.state_sha256
        )
        if line is not None and isinstance(line.get("arrays"), dict):
            check_state_arrays(rundir, template, line["arrays"])
    return found


def check_state_arrays(rundir: RunDir, template: Any, recorded: Mapping[str, Any]) -> None:
    """Refuse a state whose recorded arrays (``[shape, dtype]`` by key, as the manifest keeps
    them) are not the run's, as :func:`bnnkit.runs.lifecycle.load_state` would once the
    state is read.

    Raises:
        ConfigError: a missing entry, or an array of another shape or dtype.
    """
    if UNIT_KEY not in recorded:
        raise ConfigError(f"{str(rundir.state_file)!r} is damaged: it records no unit")
    for path, leaf in jax.tree_util.tree_flatten_with_path(template)[0]:
        key = storage.path_to_str(path)
        if key not in recorded:
            raise ConfigError(
                f"{str(rundir.state_file)!r} holds no {key!r}, which the run as "
                f"set up now has: it was made by another model or method, or "
                f"{directory.RUN_FILE} was edited"
            )
        shape, dtype = recorded[key]
        if tuple(shape) != tuple(leaf.shape) or dtype != np.dtype(leaf.dtype).str:
            raise ConfigError(
                f"{str(rundir.state_file)!r} holds {key!r} of shape "
                f"{tuple(shape)} ({dtype}) where the run as set up now has "
                f"{tuple(leaf.shape)} ({np.dtype(leaf.dtype).str}): it was made "
                f"by another model, or {directory.RUN_FILE} was edited"
            )


def resume_checks(
    rundir: RunDir,
    config: RunSettings,
    problem: dict,
    loop: Loop,
    *,
    chunks: bool,
    data: Mapping[str, Any] | None = None,
    template: Any = None,
) -> manifest.Check | None:
    """Every check of a resume, on process 0 (the others get ``None``; every process raises
    if process 0 refused).

    Args:
        chunks: the resume is of a :func:`bnnkit.runs.sample` run (else of the driver's).
        data: the dataset's ``info`` as loaded now: a user file's fingerprint must be the one
            the run recorded (then the file may be named by another path, from another folder).
        template: the state's shapes (see :func:`resume_point`).

    Raises:
        ConfigError: a run of the other kind, or as :func:`check_resume` and
            :func:`resume_point`.
    """

    def checks() -> manifest.Check:
        record = rundir.read_record()
        if bool(record.get("chunks")) != chunks:
            made, use = (
                ("the driver (bnnkit.runs.run)", "bnnkit.runs.run")
                if chunks
                else ("bnnkit.runs.sample", "bnnkit.runs.sample")
            )
            raise ConfigError(
                f"{rundir.given!r} is a run of {made}, not of "
                f"{'sample()' if chunks else 'the driver'}; resume it with {use}"
            )
        given = problem
        recorded = record.get("dataset")
        if (
            data is not None
            and isinstance(recorded, dict)
            and isinstance(record.get("problem"), dict)
            and npz.same_data(recorded, data, "--dataset")
        ):
            given = {**problem, "dataset": record["problem"].get("dataset")}
        check_resume(record, config, given)
        return resume_point(rundir, record, loop, template)

    return distributed.first_decides(checks)


def check_same_settings(
    stored: Mapping[str, Any],
    given: Mapping[str, Any],
    may_change: frozenset[str] | set[str] = frozenset(),
) -> None:
    """Refuse a ``--resume`` whose settings differ from the stored run's, naming the first.

    Raises:
        ConfigError: a setting outside ``may_change`` differs.

    Example:
        >>> check_same_settings({"a": 1, "n": 5}, {"a": 1, "n": 9}, {"n"})
        >>> check_same_settings({"a": 1}, {"a": 2})
        Traceback (most recent call last):
        ...
        bnnkit.errors.ConfigError: --resume with a different config: a was 1 in the stored run ...
    """
    for key in sorted(set(stored) | set(given)):
        if key not in may_change and stored.get(key) != given.get(key):
            raise ConfigError(
                f"--resume with a different config: {key} was {stored.get(key)!r} in the stored "
                f"run but is {given.get(key)!r} now"
            )
