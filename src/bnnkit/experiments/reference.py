"""A reference posterior in one call: a deep ensemble, then one chain from every member.

The recipe follows what the field has learned about sampling network posteriors (Sommer et al.,
"Connecting the Dots", ICML 2024; "Microcanonical Langevin Ensembles", ICLR 2025): chains
started at random initialisations spend most of their budget climbing to the typical set,
while chains started at the members of a deep ensemble are there at once. Each member's chain
is tuned on its own (nothing is pooled across chains that start in different modes), and all
chains are pooled for the model average, which the verdict judges (:mod:`bnnkit.metrics.levels`;
``until`` extends the chains until it reaches a level):

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
(:func:`bnnkit.runs.directory.resolve`): ``bnnkit evaluate REF`` gives the pooled
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
from bnnkit.inference.base import check_until, max_time_setting, until_setting
from bnnkit.problem import ProblemConfig
from bnnkit.runs import composite, composite_folder
from bnnkit.runs.directory import RunDir, composite_record_name
from bnnkit.settings import (
    SEED_BOUNDS,
    UNITS,
    check_numbers,
    parse_duration,
    resumable_settings,
    setting,
)

#: The full-batch samplers a reference can use.
SAMPLERS = ("mclmc", "hmc", "nuts")
#: A reference's kind of composite run (:mod:`bnnkit.runs.composite`), its parent record
#: (``reference.json``) and its stages' folders: the deep ensemble, then the chains, whose
#: run the folder reads as (a composite reads as its last stage).
KIND = "reference"
REFERENCE_FILE = composite_record_name(KIND)
ENSEMBLE_DIR = "ensemble"
CHAINS_DIR = "chains"
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
    # A resume may change what this call does (the kept draws, the time budget and the level
    # it extends until), never what the ensemble or a chain's step is.
    num_samples: int | None = setting(
        None, bounds=(8, None), resumable=True, help="kept draws of each chain (default: 200)"
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
    until: str | None = until_setting()
    max_time: float | str | None = max_time_setting()
    seed: int = setting(0, bounds=SEED_BOUNDS, help="seed of the ensemble and of the chains")

    def __post_init__(self) -> None:
        check_numbers(self)
        if self.max_time is not None:
            object.__setattr__(self, "max_time", parse_duration(self.max_time))
        check_until(self)
        if self.sampler not in SAMPLERS:
            raise ConfigError(f"unknown --sampler {self.sampler!r}; allowed: {', '.join(SAMPLERS)}")
        if self.ensemble_step_size <= 0:
            raise ConfigError(f"--ensemble-step-size {self.ensemble_step_size} must be > 0")
        tuning, kept = self.budget()
        if tuning + kept > UNITS[1]:
            raise ConfigError(
                f"--num-tuning {tuning} and --num-samples {kept} make {tuning + kept} iterations "
                f"of each chain; allowed: at most {UNITS[1]} together"
            )

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

    def sampler_config(self, ensemble_dir: str | os.PathLike | None = None):
        """The sampler's Config: one chain per member, started from ``ensemble_dir`` (the
        composite run gives its own ensemble stage when ``None``)."""
        from bnnkit.inference import METHODS

        tuning, kept = self.budget()
        iterations = tuning + kept
        source = None if ensemble_dir is None else os.fspath(Path(ensemble_dir).resolve())
        return METHODS[self.sampler].Config(
            num_iterations=iterations,
            num_burn_in=tuning,
            num_chains=self.members,
            init_checkpoint=source,
            seed=self.seed,
            until=self.until,
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


def recipe(problem: ProblemConfig, config: Config, num_train: int) -> composite.Recipe:
    """The reference as a composite run (:mod:`bnnkit.runs.composite`): the ensemble, then the
    chains started from it, on ``num_train`` training examples.

    Example:
        >>> made = recipe(ProblemConfig("yacht_0", "linear"), Config(members=2), 277)
        >>> [(s.name, s.config.METHOD, s.starts_from) for s in made.stages]
        [('ensemble', 'ensemble', None), ('chains', 'mclmc', 'ensemble')]
    """
    return composite.Recipe(
        KIND,
        problem,
        config,
        (
            composite.Stage(
                ENSEMBLE_DIR,
                config.ensemble_config(num_train),
                settings={"init_step_size": "ensemble_step_size"},
            ),
            composite.Stage(CHAINS_DIR, config.sampler_config(), starts_from=ENSEMBLE_DIR),
        ),
        resumable_settings(Config),
    )


def resume_refusal(stored: Any, problem: ProblemConfig, config: Config) -> str | None:
    """Why a reference stored as ``stored`` (its ``reference.json``) cannot be resumed with
    ``problem`` and ``config``, naming the first setting that differs by its flag and both
    values; ``None`` when only the settings declared resumable differ.

    Example:
        >>> problem = ProblemConfig("yacht_0", "mlp_regression_small")
        >>> made = Config(members=2, num_samples=40)
        >>> stored = {"kind": "reference", "problem": dataclasses.asdict(problem),
        ...           "config": dataclasses.asdict(made)}
        >>> resume_refusal(stored, problem, Config(members=2, num_samples=80, max_time=60))
        >>> resume_refusal(stored, problem, Config(members=3, num_samples=40))
        'was made with --members 2; this call gives 3'
    """
    shell = composite.Recipe(KIND, problem, config, (), resumable_settings(Config))
    return composite.resume_refusal(stored, shell)


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
            resume may change (declared resumable: a larger ``num_samples`` extends a
            finished reference, bit for bit the longer one; a new ``max_time``; ``until``).
        overwrite: replace what ``folder`` holds.
        progress: show each stage's progress.

    Returns:
        A :class:`Reference`.

    Raises:
        ConfigError: any bad input, named in one line, before anything is written.
    """
    from bnnkit.evaluation import evaluate
    from bnnkit.problem import build

    folder = Path(folder)
    names = (ENSEMBLE_DIR, CHAINS_DIR)
    composite_folder.check_folder(folder, KIND, names, resume=resume, overwrite=overwrite)
    built = build(problem)  # once, for every stage: the data and model exist before a write
    result = composite.run(
        recipe(problem, config, built.dataset.num_train),
        folder,
        built=built,
        resume=resume,
        overwrite=overwrite,
        progress=progress,
        describe_stop=lambda name, record: _progress(folder / name, record, config),
    )
    seconds = {name: o.seconds for name, o in result.outcomes.items()}
    stopped = None
    if result.status == "stopped":
        stopped = storage.read_json(folder / REFERENCE_FILE)["stopped"]["progress"]
    evaluation: dict[str, Any] = {}
    if RunDir(folder / CHAINS_DIR).sample_units():  # nothing to evaluate before a draw
        t0 = time.perf_counter()
        evaluation = evaluate(folder, problem=built)  # the problem the chains ran on
        seconds["evaluate"] = time.perf_counter() - t0
    return Reference(folder, evaluation, seconds, stopped)


def _progress(chains: Path, record: dict[str, Any], config: Config) -> str:
    """How far the chains got when their time budget ended them, in a sentence."""
    from bnnkit.runs.budget import progress

    kept = len(RunDir(chains).sample_units())
    until = record.get("until_converged") if config.until else None
    mixed = None if not isinstance(until, dict) else bool(until.get("holds"))
    return progress(record, kept, max_time=config.max_time, mixed=mixed, stage="chains")


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
    folder = Path(folder)
    file = folder / REFERENCE_FILE
    stored = storage.read_json(file) if file.is_file() else None
    if isinstance(stored, dict) and stored.get("status") == "finished":
        given = composite.Recipe(KIND, problem, config, ()).record()
        if all(stored.get(k) == given[k] for k in ("kind", "problem", "config")):
            return False
    reference(problem, config, folder, resume=stored is not None, progress=progress)
    return True


def reference_seconds(folder: str | os.PathLike) -> float:
    """Wall time of a reference's runs (the ensemble and the chains), summed from their logs."""
    from bnnkit.experiments.run_reuse import run_seconds

    folder = Path(folder)
    return sum(
        run_seconds(folder / name)
        for name in (ENSEMBLE_DIR, CHAINS_DIR)
        if (folder / name).is_dir()
    )
