"""How close do the cheaper methods come to HMC? The paper's central comparison, on small data.

For each setting an HMC reference run is made first; then SGD, a deep ensemble, the four
SGMCMC variants of the paper (SGLD, SGHMC, SGHMC-CLR, SGHMC-CLR-Prec) and the cheaper methods
of the later literature (MultiSWAG, MC dropout, IVON, mean-field VI) run on the same posterior
and are evaluated against it with ``bnnkit.evaluation.evaluate(run, reference=hmc_run)``:
accuracy / NLL / ECE / Brier / agreement / total variation (classification) or RMSE / NLL / RMSE
to the HMC predictive mean / Wasserstein-1 to the HMC predictive (regression; the
approximate-inference competition's "W2", computed as scipy's W₁). With ``--validation-size N``
each problem holds out the last N training examples and every method also gets split conformal
sets or intervals at ``--conformal`` α, their test coverage and mean size or width (``bnnkit
evaluate --conformal``); without it the runs train on the whole training set, as before. A
classification setting also gets a reliability diagram of every method's test predictive, HMC
first (``reliability_<setting>.png``).

Runs go to ``OUT/<setting>/<method>`` (:func:`~bnnkit.experiments.run_reuse.run_or_reuse`:
finished ones are reused, cut-off ones resumed); ``bnnkit experiment compare-methods --out OUT``
is the command line.

The methods, their settings and how their steps derive from the reference's are in
:mod:`bnnkit.experiments.compared_methods`; this module runs them, scores them against the
reference and writes the tables and figures.

Example:
    >>> Config(settings="yacht").chosen()
    ['yacht']
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from bnnkit import storage
from bnnkit.errors import ConfigError
from bnnkit.experiments import prior_choice
from bnnkit.experiments.compared_methods import (
    POINT_ESTIMATES,
    SETTINGS,
    Setting,
    method_problem,
    methods,
    skipped_methods,
)
from bnnkit.experiments.run_reuse import run_or_reuse, run_or_reuse_stable, run_seconds
from bnnkit.problem import ProblemConfig
from bnnkit.report.kinds import SETTING_RELIABILITY_FILE
from bnnkit.settings import Exclusive, check_numbers, setting

RESULTS_FILE = "results.json"
#: How the reference row's label ends (it starts with the sampler: "HMC (reference)").
REFERENCE_SUFFIX = " (reference)"
TABLE_FILE = "table.md"
FIGURE_FILE = "compare_methods.png"
#: A classification setting's reliability diagram of every method, by the setting's name.
RELIABILITY_FILE = SETTING_RELIABILITY_FILE
#: Test metrics and closeness to HMC, in the table's column order.
COLUMNS = (
    "accuracy",
    "rmse",
    "nll",
    "ece",
    "brier",
    "agreement",
    "total_variation",
    "rmse_to_reference_mean",
    "wasserstein_1",
    "conformal_coverage",
    "conformal_set_size",
    "conformal_width",
)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Config:
    """Which settings to run, and where their data are."""

    settings: str = setting(
        ",".join(SETTINGS),
        metavar="NAME,...",
        help=f"comma-separated settings to run, of: {', '.join(SETTINGS)}",
    )
    data_dir: str | None = setting(
        None, help="folder with MNIST (default: $BNNKIT_DATA_DIR or the download cache)"
    )
    validation_size: int | None = setting(
        None,
        bounds=(1, None),
        help="hold out the last N training examples of every setting for split conformal "
        "prediction at --conformal (default: none held out, no conformal columns)",
    )
    conformal: float = setting(
        0.1,
        help="α, the miscoverage level of the conformal sets or intervals, in (0, 1)",
        bounds=(Exclusive(0), Exclusive(1)),
    )

    def __post_init__(self) -> None:
        check_numbers(self)

    def chosen(self, known: Mapping[str, Setting] = SETTINGS) -> list[str]:
        """The settings' names, in order.

        Raises:
            ConfigError: none, or one not in ``known``.
        """
        names = [n.strip() for n in self.settings.split(",") if n.strip()]
        if not names:
            raise ConfigError(
                f"--settings {self.settings!r} names none; allowed: {', '.join(known)}"
            )
        for name in names:
            if name not in known:
                raise ConfigError(f"unknown --settings {name!r}; allowed: {', '.join(known)}")
        return names


@dataclasses.dataclass(frozen=True)
class Comparison:
    """The table rows per setting (``rows[name]``: one dict per method, HMC first, with the
    test metrics, the closeness to HMC, ``seconds``, a ``note`` and, for classification, the
    ``calibration`` bins of its test predictive; the reference's row also ``levels``, its
    verdict of :data:`bnnkit.metrics.levels.VERDICTS`) and each problem."""

    rows: dict[str, list[dict[str, Any]]]
    problems: dict[str, dict[str, Any]]

    def markdown(self) -> str:
        return "\n".join(
            [
                "# Cheaper methods against HMC",
                "",
                *(markdown(name, rows) for name, rows in self.rows.items()),
            ]
        )

    def write(self, out: str | os.PathLike) -> list[Path]:
        """``results.json``, ``table.md``, ``compare_methods.png`` and per classification
        setting ``reliability_<setting>.png`` (every method's curve, HMC first) into ``out``."""
        from bnnkit.report.experiment_plots import compare_methods_png
        from bnnkit.report.reliability_plots import reliability_png

        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        storage.write_json(
            out / RESULTS_FILE,
            {
                name: {"problem": self.problems[name], "rows": rows}
                for name, rows in self.rows.items()
            },
        )
        storage.atomic_write_bytes(out / TABLE_FILE, self.markdown().encode())
        storage.atomic_write_bytes(out / FIGURE_FILE, compare_methods_png(self.rows))
        written = [out / RESULTS_FILE, out / TABLE_FILE, out / FIGURE_FILE]
        for name, rows in self.rows.items():
            curves = {r["method"]: r["calibration"] for r in rows if "calibration" in r}
            if curves:  # a classification setting
                file = out / RELIABILITY_FILE.format(name)
                storage.atomic_write_bytes(file, reliability_png(curves, title=f"{name}, test set"))
                written.append(file)
        return written


def gradient_rms(hmc_dir: str | os.PathLike, batch_size: int) -> float:
    """Median over coordinates of the RMS minibatch gradient at HMC's last sample of chain 0."""
    import jax
    import jax.numpy as jnp

    from bnnkit.runs import load_run
    from bnnkit.runs.units import minibatch_indices
    from bnnkit.types import Batch

    _, problem, samples, _ = load_run(hmc_dir, network=True)
    params = jax.tree.map(lambda a: jnp.asarray(a[0, -1]), samples.params)
    train = problem.train_batch()
    idx = minibatch_indices(jax.random.PRNGKey(0), problem.dataset.num_train, batch_size)
    grad = jax.jit(jax.grad(problem.log_posterior))
    sq = None
    for i in idx:
        g = jnp.concatenate(
            [x.ravel() for x in jax.tree.leaves(grad(params, Batch(train.x[i], train.y[i])))]
        )
        sq = g**2 if sq is None else sq + g**2
    return float(jnp.median(jnp.sqrt(sq / len(idx))))


def run_setting(
    name: str, setting: Setting, root: Path, progress: bool = True, conformal: float | None = None
) -> list[dict[str, Any]]:
    """HMC, then every method of :func:`methods` against it; the table rows.

    ``conformal``: α of split conformal prediction on the problem's validation set (which
    ``setting.problem.validation_size`` must hold out), or none.
    """
    problem = setting.problem
    hmc_dir = root / name / "hmc"
    reference_row, eta = _reference_row(name, setting, hmc_dir, progress, conformal)
    rows = [reference_row]
    rms = gradient_rms(hmc_dir, setting.batch_size)
    skipped = skipped_methods(setting)
    chosen = methods(setting, eta, rms, num_train=_num_train(hmc_dir), sgd_run=root / name / "sgd")
    choice = None
    if setting.baseline_priors:
        choice = prior_choice.choose(
            problem,
            setting.baseline_priors,
            chosen["SGD"],
            root / name / "prior_choice",
            validation_size=problem.validation_size or setting.baseline_validation,
            progress=progress,
        )
    if setting.methods is not None:
        chosen = {k: v for k, v in chosen.items() if k in setting.methods}
        skipped = {k: v for k, v in skipped.items() if k in setting.methods}
    for label, config in chosen.items():
        run_dir = root / name / label.split(" ")[0].lower()
        rows.append(
            _method_row(name, label, config, problem, choice, run_dir, hmc_dir, progress, conformal)
        )
    rows.extend({"method": label, "note": why} for label, why in skipped.items())
    return rows


def _reference_row(
    name: str, setting: Setting, hmc_dir: Path, progress: bool, conformal: float | None
) -> tuple[dict[str, Any], float]:
    """Run (or reuse) the setting's reference and score it: its table row, and SGLD's step η
    from its leapfrog step ε (the setting's HMC step for an MCLMC reference)."""
    from bnnkit.evaluation import evaluate
    from bnnkit.experiments import reference

    problem = setting.problem
    if setting.reference is None:
        ran = run_or_reuse(problem, setting.hmc, hmc_dir, progress=progress)
        seconds, made, sampler_name = run_seconds(hmc_dir), "random starts", "hmc"
    else:
        ran = reference.reference_or_reuse(problem, setting.reference, hmc_dir, progress=progress)
        seconds = reference.reference_seconds(hmc_dir)
        made = f"from the {setting.reference.members} members of a deep ensemble"
        sampler_name = setting.reference.sampler
    label = sampler_name.upper() + REFERENCE_SUFFIX
    _announce(progress, name, label, ran)
    ref = evaluate(hmc_dir, conformal=conformal)
    sampler = ref["sampler"]
    step = float(np.median(sampler["step_size"]))
    eps = setting.hmc.step_size if sampler_name == "mclmc" else step
    eta = eps**2 / 2
    verdict = (ref.get("levels") or {}).get("verdict")
    row = {
        "method": label,
        **ref["test"],
        **_conformal(ref),
        **_calibration(ref),
        "seconds": seconds,
        # Its verdict (bnnkit.metrics.levels), None where none was judged.
        "levels": verdict,
        "note": f"{made}; acc. {sampler['acceptance_rate']:.2f}, step {step:.2g}, "
        f"{sampler['num_divergent']} div.; verdict {verdict or 'not judged'}",
    }
    return row, eta


def _method_row(
    name: str,
    label: str,
    config: Any,
    problem: ProblemConfig,
    choice: Any,
    run_dir: Path,
    hmc_dir: Path,
    progress: bool,
    conformal: float | None,
) -> dict[str, Any]:
    """Run (or reuse) one method in ``run_dir`` and score it against the reference: its row.

    ``choice``: the prior choice of the point-estimate methods, or ``None``.
    """
    from bnnkit.evaluation import evaluate

    on = method_problem(problem, config)
    picked = choice is not None and label in POINT_ESTIMATES
    if picked:
        on = dataclasses.replace(on, prior=choice.prior)
    given = config.init_step_size
    # η derives from HMC's ε, not from this method's own stability: a step that diverges
    # is divided by ten (and the note says so).
    config, ran = run_or_reuse_stable(on, config, run_dir, progress=progress)
    _announce(progress, name, label, ran)
    res = evaluate(run_dir, reference=hmc_dir, conformal=conformal)
    return {
        "method": label,
        **res["test"],
        **{k: v for k, v in res["reference"].items() if k not in ("run", "settings_differ")},
        **_conformal(res),
        **_calibration(res),
        "seconds": run_seconds(run_dir),
        "note": f"η₀ {config.init_step_size:.2g}"
        + (
            ""
            if config.init_step_size == given
            else f" (÷{given / config.init_step_size:.0f} after divergence)"
        )
        + f", {res['num_chains']}x{res['num_samples_per_chain']} samples"
        + ("" if on.model == problem.model else f"; {on.model}")
        + (
            ("; " + choice.note() if label == "SGD" else f"; prior {choice.prior}")
            if picked
            else ""
        ),
        **({"prior": choice.prior} if picked else {}),
        **({"prior_choice": dataclasses.asdict(choice)} if picked and label == "SGD" else {}),
    }


def _num_train(run_dir: Path) -> int:
    from bnnkit.runs import load_run

    _, problem, _, _ = load_run(run_dir, network=True)
    return int(problem.dataset.num_train)


def _conformal(evaluation: dict[str, Any]) -> dict[str, Any]:
    # One number per column: coverage, and the mean set size or interval width.
    found = evaluation.get("conformal")
    if found is None:
        return {}
    size = {k: found[k] for k in ("mean_set_size", "mean_width") if k in found}
    return {
        "conformal_coverage": found["coverage"],
        **{"conformal_" + k.removeprefix("mean_"): v for k, v in size.items()},
    }


def _calibration(evaluation: dict[str, Any]) -> dict[str, Any]:
    # Kept for the reliability diagram; the markdown table shows only COLUMNS.
    return {k: evaluation[k] for k in ("calibration",) if k in evaluation}


def _announce(progress: bool, name: str, label: str, ran: bool) -> None:
    if progress:
        print(f"[{name}] {label}: {'done' if ran else 'finished earlier, reused'}", flush=True)


def markdown(name: str, rows: list[dict[str, Any]]) -> str:
    """One setting's table: a row per method, the metrics it has."""
    keys = [k for k in COLUMNS if any(k in r for r in rows)]
    head = "| method | " + " | ".join(keys) + " | seconds | note |"
    lines = [f"### {name}", "", head, "|" + "---|" * (len(keys) + 3)]
    for r in rows:
        vals = [f"{r[k]:.4f}" if k in r else "—" for k in keys]
        seconds = f"{r['seconds']:.0f}" if "seconds" in r else "—"  # a skipped method: no run
        lines.append(f"| {r['method']} | " + " | ".join(vals) + f" | {seconds} | {r['note']} |")
    return "\n".join(lines) + "\n"


def compare_methods(
    config: Config,
    out: str | os.PathLike,
    *,
    settings: Mapping[str, Setting] | None = None,
    progress: bool = True,
) -> Comparison:
    """Run (or reuse) every chosen setting's methods in ``out`` and write the report there.

    Args:
        config: which settings.
        out: the output folder: runs in ``out/<setting>/<method>``, the report beside them
            (:meth:`Comparison.write`), rewritten after each setting.
        settings: the settings to choose from (default :data:`SETTINGS`).
        progress: progress of each run and a line per method.

    Raises:
        ConfigError: an unknown setting, or a run directory of other settings in ``out``.
    """
    known = SETTINGS if settings is None else settings
    names = config.chosen(known)
    out = Path(out)
    rows: dict[str, list[dict[str, Any]]] = {}
    problems: dict[str, dict[str, Any]] = {}
    for name in names:
        setting_ = known[name]
        if config.data_dir is not None:
            setting_ = dataclasses.replace(
                setting_, problem=dataclasses.replace(setting_.problem, data_dir=config.data_dir)
            )
        if config.validation_size is not None:
            setting_ = dataclasses.replace(
                setting_,
                problem=dataclasses.replace(
                    setting_.problem, validation_size=config.validation_size
                ),
            )
        rows[name] = run_setting(
            name,
            setting_,
            out,
            progress,
            None if config.validation_size is None else config.conformal,
        )
        problems[name] = dataclasses.asdict(setting_.problem)
        result = Comparison(rows, problems)
        result.write(out)
    return result
