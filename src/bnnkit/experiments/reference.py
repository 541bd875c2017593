"""A reference posterior in one call: a deep ensemble, then one chain from every member.

The recipe follows what the field has learned about sampling network posteriors (Sommer et al.,
"Connecting the Dots", ICML 2024; "Microcanonical Langevin Ensembles", ICLR 2025): chains
started at random initialisations spend most of their budget climbing to the typical set,
while chains started at the members of a deep ensemble are there at once. Each member's chain
is tuned on its own (nothing is pooled across chains that start in different modes), judged
on its own by the within-chain verdict (:mod:`bnnkit.metrics.convergence`), and all chains
are pooled for the model average:

1. ``ensemble/``: a deep ensemble of ``members`` MAP solutions (:mod:`bnnkit.inference.ensemble`:
   SGD with momentum and the cosine schedule on the same posterior, minibatches of
   ``ensemble_batch_size``, about ``ensemble_steps`` updates);
2. ``chains/``: the full-batch ``sampler`` with ``--init-checkpoint`` the ensemble, one chain per
   member (chain k starts at member k), ``num_tuning`` iterations of tuning and then
   ``num_samples`` kept draws per chain, each sampler at its own defaults otherwise (no knob to
   set by hand);
3. the evaluation of the pooled model average with its verdict.

The folder holds ``reference.json`` (the settings and how far the recipe got), ``ensemble/``
and ``chains/``. Every command that reads a run reads the folder as its chains
(:func:`bnnkit.runs.directory.resolve_reference`): ``bnnkit evaluate REF`` gives the pooled
model average and its verdict, ``--reference REF`` compares another method with it. Called
again with ``resume=True`` the recipe continues where it stopped, bit for bit (each stage is a
run that resumes exactly).

Example:
    >>> config = Config(sampler="nuts", members=4, num_tuning=50, num_samples=40)
    >>> config.budget()  # (tuning, kept) iterations of each chain
    (50, 40)
    >>> Config(sampler="mclmc").budget() == DEFAULT_BUDGET["mclmc"]
    True
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from pathlib import Path
from typing import Any

from bnnkit import storage
from bnnkit.errors import ConfigError
from bnnkit.experiments.run_reuse import run_or_reuse
from bnnkit.problem import ProblemConfig
from bnnkit.runs.directory import REFERENCE_CHAINS, REFERENCE_FILE, now
from bnnkit.settings import SEED_BOUNDS, Exclusive, check_numbers, parse_duration, setting

#: The full-batch samplers a reference can use.
SAMPLERS = ("mclmc", "hmc", "nuts")
ENSEMBLE_DIR = "ensemble"
#: (tuning, kept) iterations per chain when not given. MCLMC's iteration is a thinned block of
#: integrator steps and is cheap; an HMC or NUTS iteration is a whole trajectory.
DEFAULT_BUDGET = {"mclmc": (500, 200), "hmc": (200, 200), "nuts": (200, 200)}


@dataclasses.dataclass(frozen=True, kw_only=True)
class Config:
    """``bnnkit reference``'s settings: the ensemble, the sampler and its budget."""

    sampler: str = setting(
        "mclmc",
        choices=SAMPLERS,
        help="the full-batch sampler run from every member: mclmc "
        "(unadjusted, tuned per chain), hmc or nuts (their no-knob "
        "defaults)",
    )
    members: int = setting(
        8, bounds=(1, 4096), help="deep-ensemble members, and so chains (one per member)"
    )
    num_tuning: int | None = setting(
        None,
        bounds=(1, None),
        help="tuning iterations of each chain (default: 500 for mclmc, 200 for hmc and nuts)",
    )
    num_samples: int | None = setting(
        None, bounds=(8, None), help="kept draws of each chain (default: 200)"
    )
    ensemble_steps: int = setting(
        2000,
        bounds=(1, None),
        help="optimiser updates of each ensemble member (rounded up to whole epochs, at least 20)",
    )
    ensemble_batch_size: int = setting(
        32, bounds=(1, None), help="examples per ensemble update (at most the training set)"
    )
    ensemble_step_size: float = setting(
        5e-3,
        bounds=(0.0, None),
        help="the ensemble's SGD step size on the mean per-example loss (it is divided by "
        "the number of training examples, as bnnkit's step sizes multiply the gradient "
        "of the whole-data log posterior)",
    )
    until_converged: bool = setting(
        False,
        help="extend the chains in blocks until each chain mixes by the within-chain "
        "verdict, or --max-time ends (as bnnkit hmc --until-converged); needs "
        "--max-time",
    )
    max_time: float | str | None = setting(
        None,
        metavar="DURATION",
        bounds=(Exclusive(0), None),
        help="wall-time budget of the chains in this call, e.g. 90s, 30m, 2h; they stop "
        "cleanly, resumable",
    )
    seed: int = setting(0, bounds=SEED_BOUNDS, help="seed of the ensemble and of the chains")

    def __post_init__(self) -> None:
        check_numbers(self)
        if self.max_time is not None:
            object.__setattr__(self, "max_time", parse_duration(self.max_time))
        if self.until_converged and self.max_time is None:
            raise ConfigError("--until-converged needs --max-time: a time budget such as 30m or 2h")
        if self.sampler not in SAMPLERS:
            raise ConfigError(f"unknown --sampler {self.sampler!r}; allowed: {', '.join(SAMPLERS)}")
        if self.ensemble_step_size <= 0:
            raise ConfigError(f"--ensemble-step-size {self.ensemble_step_size} must be > 0")

    def budget(self) -> tuple[int, int]:
        """(tuning, kept) iterations of each chain."""
        tuning, kept = DEFAULT_BUDGET[self.sampler]
        return (self.num_tuning or tuning, self.num_samples or kept)

    def ensemble_config(self, num_train: int):
        """The deep ensemble's :class:`bnnkit.inference.ensemble.Config`."""
        from bnnkit.inference import ensemble

        batch = min(self.ensemble_batch_size, num_train)
        epochs = max(20, math.ceil(self.ensemble_steps / (num_train // batch)))
        # A heteroscedastic member whose predicted std nears zero on a badly fitted point gets
        # a huge gradient; the per-example clip keeps it from throwing the weights away.
        return ensemble.Config(
            init_step_size=self.ensemble_step_size / num_train,
            num_epochs=epochs,
            batch_size=batch,
            num_members=self.members,
            momentum_decay=0.9,
            clip_grad_norm=10.0,
            seed=self.seed,
            checkpoint_every=epochs,
        )

    def sampler_config(self, ensemble_dir: str | os.PathLike):
        """The sampler's Config: one chain per member, started from ``ensemble_dir``."""
        from bnnkit.inference import METHODS

        tuning, kept = self.budget()
        iterations = tuning + kept
        return METHODS[self.sampler].Config(
            num_iterations=iterations,
            num_burn_in=tuning,
            num_chains=self.members,
            init_checkpoint=os.fspath(Path(ensemble_dir).resolve()),
            seed=self.seed,
            checkpoint_every=max(1, iterations // 10),
            until_converged=self.until_converged,
            max_time=self.max_time,
        )


@dataclasses.dataclass(frozen=True)
class Reference:
    """What :func:`reference` returns.

    Attributes:
        folder: the reference folder.
        evaluation: ``bnnkit evaluate``'s result for the pooled chains (metrics, diagnostics,
            the convergence verdict).
        seconds: wall time of each stage (``ensemble``, ``chains``, ``evaluate``) in this call.
        stopped: how far the chains got when ``max_time`` ended them, in a sentence
            (:func:`bnnkit.runs.budget.progress`; ``resume=True`` continues them); ``None``
            when they finished. Chains stopped before any kept draw are not evaluated
            (``evaluation`` is empty).
    """

    folder: Path
    evaluation: dict[str, Any]
    seconds: dict[str, float]
    stopped: str | None = None


def check_folder(folder: Path, *, resume: bool, overwrite: bool) -> None:
    """Refuse, before anything runs, a folder the recipe may not start or resume in.

    Raises:
        ConfigError: both ``resume`` and ``overwrite``; a folder that holds something else
            than a reference without ``overwrite``; ``resume`` of a folder holding none.
    """
    if resume and overwrite:
        raise ConfigError("--resume and --overwrite exclude each other; allowed: one of them")
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"{str(folder)!r} is a file; allowed: a folder")
    entries = {e.name for e in folder.iterdir()} if folder.is_dir() else set()
    is_reference = REFERENCE_FILE in entries
    if resume and not is_reference:
        raise ConfigError(
            f"--resume: {str(folder)!r} holds no reference ({REFERENCE_FILE}); "
            "allowed: a folder made by bnnkit reference"
        )
    if entries and not resume and not overwrite:
        raise ConfigError(
            f"{str(folder)!r} is not empty; allowed: --resume (continue the "
            "reference there) or --overwrite (replace it)"
        )
    foreign = entries - {REFERENCE_FILE, ENSEMBLE_DIR, REFERENCE_CHAINS}
    if overwrite and foreign:
        raise ConfigError(
            f"--overwrite: {str(folder)!r} holds {sorted(foreign)[0]!r}, which no "
            "reference writes; allowed: a reference folder or an empty one"
        )


#: The settings a resume may change, as a single run's resume may (``resumable`` in
#: :mod:`bnnkit.inference.base`): the kept draws (the chains' ``num_iterations``) and how long
#: this call runs. Every other one changes what the ensemble or a chain's step is.
RESUMABLE = ("num_samples", "max_time", "until_converged")


def _flag(cls: type, name: str) -> str:
    from bnnkit.settings import flag

    return flag(cls, name)


def resume_refusal(stored: Any, problem: ProblemConfig, config: Config) -> str | None:
    """Why a reference stored as ``stored`` (its ``reference.json``) cannot be resumed with
    ``problem`` and ``config``, naming the first setting that differs by its flag and both
    values; ``None`` when only :data:`RESUMABLE` settings differ.

    Example:
        >>> problem = ProblemConfig("yacht_0", "mlp_regression_small")
        >>> made = Config(members=2, num_samples=40)
        >>> stored = {"kind": "reference", "problem": dataclasses.asdict(problem),
        ...           "config": dataclasses.asdict(made)}
        >>> resume_refusal(stored, problem, Config(members=2, num_samples=80, max_time=60))
        >>> resume_refusal(stored, problem, Config(members=3, num_samples=40))
        'was made with --members 2; this call gives 3'
    """
    import json

    from bnnkit.problem import shown

    if not isinstance(stored, dict) or stored.get("kind") != "reference":
        return f"holds no readable {REFERENCE_FILE}"
    # Through JSON, as reference.json holds them (tuples become lists, and so on).
    given = json.loads(
        json.dumps({"problem": dataclasses.asdict(problem), "config": dataclasses.asdict(config)})
    )
    for part, cls in (("problem", ProblemConfig), ("config", Config)):
        was, now_ = stored.get(part) or {}, given[part]
        for name in sorted(set(was) | set(now_)):
            if part == "config" and name in RESUMABLE:
                continue
            if was.get(name) != now_.get(name):
                known = name in {f.name for f in dataclasses.fields(cls)}
                label = _flag(cls, name) if known else name
                return (
                    f"was made with {label} {shown(name, was.get(name))}; this call gives "
                    f"{shown(name, now_.get(name))}"
                )
    return None


def reference(
    problem: ProblemConfig,
    config: Config,
    folder: str | os.PathLike,
    *,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
) -> Reference:
    """Make (or continue) the reference posterior of ``problem`` in ``folder``.

    Args:
        problem: data, model, prior, likelihood, temperature.
        config: the recipe's settings.
        folder: the reference folder (created).
        resume: continue the reference in ``folder``: the same settings, but for those a
            resume may change (:data:`RESUMABLE`: a larger ``num_samples`` extends a finished
            reference, bit for bit the longer one; a new ``max_time``; ``until_converged``).
        overwrite: replace what ``folder`` holds.
        progress: show each stage's progress.

    Returns:
        A :class:`Reference`.

    Raises:
        ConfigError: any bad input, named in one line, before anything is written.
    """
    from bnnkit.evaluation import evaluate
    from bnnkit.models.imported import trusting_model
    from bnnkit.problem import build

    folder = Path(folder)
    check_folder(folder, resume=resume, overwrite=overwrite)
    built = build(problem)  # the data and model exist, before anything is written
    num_train = built.dataset.num_train
    ensemble_config = config.ensemble_config(num_train)
    record = {
        "kind": "reference",
        "problem": dataclasses.asdict(problem),
        "config": dataclasses.asdict(config),
    }
    if resume:
        refusal = resume_refusal(storage.read_json(folder / REFERENCE_FILE), problem, config)
        if refusal is not None:
            raise ConfigError(
                f"--resume: the reference in {str(folder)!r} {refusal}; allowed: "
                "the same value (a resume may change only "
                f"{', '.join(_flag(Config, k) for k in RESUMABLE)}), or "
                "--overwrite"
            )
    folder.mkdir(parents=True, exist_ok=True)
    storage.write_json(folder / REFERENCE_FILE, {**record, "status": "running", "started": now()})
    seconds: dict[str, float] = {}
    t0 = time.perf_counter()
    run_or_reuse(
        problem, ensemble_config, folder / ENSEMBLE_DIR, progress=progress, overwrite=overwrite
    )
    seconds["ensemble"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    run_or_reuse(
        problem,
        config.sampler_config(folder / ENSEMBLE_DIR),
        folder / REFERENCE_CHAINS,
        progress=progress,
        overwrite=overwrite,
    )
    seconds["chains"] = time.perf_counter() - t0
    stopped, kept = _chains_stopped(folder / REFERENCE_CHAINS, config)
    evaluation: dict[str, Any] = {}
    if kept:  # chains stopped before their first kept draw have nothing to evaluate
        t0 = time.perf_counter()
        with trusting_model(problem.model):  # the model the caller named, read back
            evaluation = evaluate(folder)
        seconds["evaluate"] = time.perf_counter() - t0
    end = (
        {"status": "finished", "finished": now()}
        if stopped is None
        else {"status": "stopped", "stopped": {"stage": "chains", "progress": stopped, "at": now()}}
    )
    storage.write_json(folder / REFERENCE_FILE, {**record, **end, "seconds": seconds})
    return Reference(folder, evaluation, seconds, stopped)


def _chains_stopped(chains: Path, config: Config) -> tuple[str | None, int]:
    """How far the chains got when their time budget ended them (``None``: it did not), and
    their kept draws per chain."""
    from bnnkit.runs import RunDir
    from bnnkit.runs.budget import progress

    rundir = RunDir(chains)
    record = rundir.read_record()
    kept = len(rundir.sample_units())
    until = record.get("until_converged") if config.until_converged else None
    mixed = None if until is None else bool(until.get("holds"))
    if record.get("status") != "stopped" and mixed is not False:
        return None, kept
    return progress(record, kept, max_time=config.max_time, mixed=mixed, stage="chains"), kept


def reference_or_reuse(
    problem: ProblemConfig, config: Config, folder: str | os.PathLike, *, progress: bool = True
) -> bool:
    """Make the reference of ``config`` in ``folder`` unless it is there, finished, with the
    same settings; one cut off is continued (``resume``), bit for bit.

    Returns:
        Whether anything ran (False: a finished reference was reused).

    Raises:
        ConfigError: ``folder`` holds a reference of other settings, or anything else
            :func:`reference` refuses.
    """
    import json

    folder = Path(folder)
    file = folder / REFERENCE_FILE
    stored = storage.read_json(file) if file.is_file() else None
    if isinstance(stored, dict) and stored.get("status") == "finished":
        # Through JSON, as reference.json holds them (tuples become lists, and so on).
        given = json.loads(
            json.dumps(
                {"problem": dataclasses.asdict(problem), "config": dataclasses.asdict(config)}
            )
        )
        if {k: stored.get(k) for k in given} == given:
            return False
    reference(problem, config, folder, resume=stored is not None, progress=progress)
    return True


def reference_seconds(folder: str | os.PathLike) -> float:
    """Wall time of a reference's runs (the ensemble and the chains), summed from their logs."""
    from bnnkit.experiments.run_reuse import run_seconds

    folder = Path(folder)
    return sum(
        run_seconds(folder / name)
        for name in (ENSEMBLE_DIR, REFERENCE_CHAINS)
        if (folder / name).is_dir()
    )
