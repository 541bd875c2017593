"""Convergence of Markov chains in weight space and function space, and one long chain against
several short ones (Izmailov et al. 2021, Sec. 5 and 7).

**R-hat.** For a run of n ≥ 2 chains of k ≥ 4 kept samples, split R-hat
(:func:`bnnkit.metrics.diagnostics.split_rhat`, Vehtari et al. 2021) of every parameter
(weight space) and of every test prediction: each test point's softmax probability of every
class, or regression mean, per sample (function space, as ``bnnkit evaluate`` computes it).
Weights are not identifiable (hidden-unit permutations), so weight-space R-hat can be large
where the predictions agree; the paper's figure shows both histograms. Bins are logarithmic
when the values spread over more than a factor :data:`LOG_SPREAD`; a quantity that never
changes has no R-hat and is counted as ``undefined``.

**One long chain or several short ones.** With m = ⌊k/n⌋, the model average of one chain's
first n·m samples is set against that of all n chains' first m samples each (the same number
of samples), both scored against a reference predictive, by default the run's own full model
average (all n·k samples), otherwise ``--reference RUN`` (a longer run on the same data):
agreement and total variation for classification
(:mod:`bnnkit.metrics.predictive`), the RMSE between predictive means for regression. The
one-chain scores are averaged over the n choices of chain.

:func:`convergence_report` writes ``convergence.json`` (histogram counts and edges, the
table), ``chains.md`` and the figures ``rhat_histograms.png`` and ``chains.png``;
``bnnkit convergence`` is its command line.

Example:
    >>> rng = np.random.default_rng(0)
    >>> h = histogram(np.concatenate([1 + rng.exponential(0.01, 99), [np.nan]]), bins=4)
    >>> h["log_bins"], sum(h["counts"]), h["undefined"]
    (False, 99, 1)
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from pathlib import Path
from typing import Any

import numpy as np

from bnnkit import storage
from bnnkit.errors import ConfigError
from bnnkit.settings import check_at_least, check_numbers, setting

SETTINGS_FILE = "convergence.json"
TABLE_FILE = "chains.md"
HISTOGRAM_FILE = "rhat_histograms.png"
CHAINS_FILE = "chains.png"
#: Logarithmic bins when the largest R-hat is more than this times the smallest.
LOG_SPREAD = 2.0
SPACES = ("weights", "function")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Config:
    """The histograms' bins and the test points the function space is taken on."""

    bins: int = setting(40, help="histogram bins per space")
    max_test: int | None = setting(
        None,
        help="function space and chain comparison on the first N test points only (default: all)",
        metavar="N",
        bounds=(1, None),
    )

    def __post_init__(self) -> None:
        check_numbers(self)
        check_at_least(type(self), "bins", self.bins, 1)


def histogram(rhat: np.ndarray, bins: int) -> dict[str, Any]:
    """Counts of the defined (finite) R-hat values in ``bins`` bins from their least to their
    greatest, logarithmic when they spread over more than :data:`LOG_SPREAD`.

    Returns:
        ``{"edges", "counts", "log_bins", "undefined", "summary"}``, JSON-serialisable;
        ``np.histogram(values, edges)`` gives ``counts`` back.
    """
    from bnnkit.metrics import diagnostics

    values = np.asarray(rhat, np.float64).ravel()
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        edges, log_bins = np.array([0.0, 1.0]), False
    else:
        low, high = float(finite.min()), float(finite.max())
        log_bins = bool(low > 0 and high > LOG_SPREAD * low)
        if high == low:
            low, high = low - 0.5e-3, high + 0.5e-3  # one value: a narrow bin around it
        edges = np.geomspace(low, high, bins + 1) if log_bins else np.linspace(low, high, bins + 1)
        # The ends exactly the extremes (geomspace may round them), so none falls outside.
        edges[0], edges[-1] = min(edges[0], finite.min()), max(edges[-1], finite.max())
    counts, _ = np.histogram(finite, edges)
    return {
        "edges": edges.tolist(),
        "counts": counts.tolist(),
        "log_bins": log_bins,
        "undefined": int(values.size - finite.size),
        "summary": diagnostics.summarize(finite),
    }


@dataclasses.dataclass(frozen=True)
class Convergence:
    """The analyses of one run and where they were written.

    Attributes:
        rhat: split R-hat per space (``"weights"``: one per parameter; ``"function"``: one per
            test point and class, or per test point for regression).
        histograms: :func:`histogram` of each space.
        chains: the table of the chain comparison, one row per scheme (``scheme``,
            ``num_chains``, ``samples_per_chain`` and the scores); empty when a chain holds
            fewer samples than there are chains.
        files: what was written, by kind.
    """

    rhat: dict[str, np.ndarray]
    histograms: dict[str, dict[str, Any]]
    chains: list[dict[str, Any]]
    files: dict[str, Path]


def _function_draws(prediction: Any) -> np.ndarray:
    draws = np.asarray(prediction.per_sample, np.float64)
    return draws.reshape((*draws.shape[:2], -1))


def _average(task: str, per_sample: np.ndarray) -> Any:
    """The model average over the samples of ``per_sample`` (samples, N[, K])."""
    from bnnkit.predict import Prediction

    if task == "classification":
        return Prediction(task, probs=per_sample.mean(axis=0))
    return Prediction(task, means=per_sample)


def compare_chains(prediction: Any, reference: Any) -> list[dict[str, Any]]:
    """One chain of n·m samples against n chains of m samples each, scored against
    ``reference`` by :func:`bnnkit.evaluation.compare` (see the module docstring).

    Args:
        prediction: the run's predictive with its per-sample values on every test point
            (chains, k, N[, K]).
        reference: the predictive to score against.

    Returns:
        Two rows, or none when k < n.
    """
    from bnnkit.evaluation import compare

    per_sample = np.asarray(prediction.per_sample)
    chains, kept = per_sample.shape[:2]
    short = kept // chains
    if short < 1:
        return []
    task = prediction.task
    one = [
        compare(_average(task, per_sample[c, : chains * short]), reference) for c in range(chains)
    ]
    several = compare(
        _average(task, per_sample[:, :short].reshape((chains * short, *per_sample.shape[2:]))),
        reference,
    )
    return [
        {
            "scheme": f"1 chain x {chains * short} samples",
            "num_chains": 1,
            "samples_per_chain": chains * short,
            **{k: float(np.mean([s[k] for s in one])) for k in one[0]},
            "per_chain": one,
        },
        {
            "scheme": f"{chains} chains x {short} samples",
            "num_chains": chains,
            "samples_per_chain": short,
            **several,
        },
    ]


def _load(run: str, reference: str | None):
    from bnnkit import problem as problem_lib
    from bnnkit.evaluation import check_reference, run_samples
    from bnnkit.posterior import Samples
    from bnnkit.runs import load_run

    if not os.path.isdir(run):
        raise ConfigError(f"run {run!r} does not exist; allowed: a run directory")
    record, problem, posterior, _ = load_run(run, network=True)
    method = record.get("method")
    if not isinstance(posterior, Samples):
        raise ConfigError(
            f"run {run!r} is a {method!r} run of independent draws; allowed: a "
            "run of Markov chains (hmc, nuts, sgmcmc)"
        )
    if posterior.num_chains < 2:
        raise ConfigError(
            f"run {run!r} has 1 chain: R-hat compares chains; allowed: a run of "
            "2 or more chains (--num-chains)"
        )
    if posterior.num_samples < 4:
        raise ConfigError(
            f"run {run!r} keeps {posterior.num_samples} samples per chain; "
            "allowed: at least 4 (split R-hat halves each chain)"
        )
    ref = None
    if reference is not None:
        check_reference(reference, problem.dataset.name)
        ref_record, ref_problem, ref_posterior, _ = load_run(reference, network=True)
        refused = problem_lib.differences(
            problem.config, ref_problem.config, problem_lib.DATA_SETTINGS, f"reference {reference}"
        )
        if refused:
            raise ConfigError(
                f"{refused[0]}: the runs predict on different data; allowed: a "
                "reference run on the same data"
            )
        ref = (ref_record, ref_problem, ref_posterior)
    return record, problem, run_samples(record, posterior), ref


def convergence_report(
    run: str | os.PathLike,
    out: str | os.PathLike,
    config: Config | None = None,
    *,
    reference: str | os.PathLike | None = None,
    overwrite: bool = False,
    plots: bool = True,
) -> Convergence:
    """R-hat in weight and function space, and one long chain against several short ones, of
    a stored multi-chain run; written to ``out``.

    Writes ``convergence.json`` (settings, each space's histogram edges and counts, the chain
    table), ``chains.md`` and the figures ``rhat_histograms.png`` and ``chains.png``.
    Everything is checked before anything is written.

    Args:
        run: a run directory of Markov chains (HMC, NUTS, SGMCMC) with at least 2 chains of
            at least 4 kept samples.
        out: the output folder (new or empty, else ``overwrite``).
        config: bins and test points (default :class:`Config`'s).
        reference: a run on the same data to score the chain schemes against (default: the
            run's own full model average).
        overwrite: replace the report in ``out``.
        plots: draw the two PNGs.

    Raises:
        ConfigError: a bad output folder, a run of one chain, of independent draws or of
            fewer than 4 samples per chain, or a reference on other data.

    Example:
        (Needs a stored multi-chain run; see docs/guides/convergence.md.)

        >>> report = convergence_report("runs/hmc", "runs/convergence")  # doctest: +SKIP
    """
    from bnnkit import output_folder
    from bnnkit.evaluation import run_prediction, weight_draws
    from bnnkit.metrics import diagnostics
    from bnnkit.predict import predict

    config = Config() if config is None else config
    output_folder.check(out, SETTINGS_FILE, "convergence report", resume=False, overwrite=overwrite)
    run, reference = os.fspath(run), None if reference is None else os.fspath(reference)
    record, problem, samples, ref = _load(run, reference)

    x = np.asarray(problem.dataset.x_test)[: config.max_test]
    # Every test point's per-sample values, not only the first 1000 evaluate keeps.
    prediction = predict(problem, samples, x, max_diagnostic_points=len(x))
    rhat = {
        "weights": diagnostics.split_rhat(weight_draws(samples)),
        "function": diagnostics.split_rhat(_function_draws(prediction)),
    }
    histograms = {space: histogram(rhat[space], config.bins) for space in SPACES}
    if ref is None:
        ref_prediction, ref_name = prediction, "the run's own model average"
    else:
        ref_prediction, ref_name = run_prediction(*ref, x), reference
    chains = compare_chains(prediction, ref_prediction)

    summary = {
        "run": run,
        "method": record.get("method"),
        "dataset": problem.dataset.name,
        "num_chains": samples.num_chains,
        "num_samples_per_chain": samples.num_samples,
        "num_test_points": len(x),
        "config": dataclasses.asdict(config),
        "histograms": histograms,
        "reference": ref_name,
        "chains": chains,
    }
    title = f"{record.get('method')} on {_dataset_name(problem)}"
    files = _write(Path(out), summary, title, plots=plots)
    return Convergence(rhat=rhat, histograms=histograms, chains=chains, files=files)


def _write(path: Path, summary: dict[str, Any], title: str, *, plots: bool) -> dict[str, Path]:
    """The report into ``path``, replacing an earlier one: ``summary`` as ``convergence.json``,
    the chain table and, with ``plots``, the figures; what was written, by kind."""
    from bnnkit.runs import lock

    chains, ref_name = summary["chains"], summary["reference"]
    path.mkdir(parents=True, exist_ok=True)
    with lock.hold(path):
        for name in (SETTINGS_FILE, TABLE_FILE, HISTOGRAM_FILE, CHAINS_FILE):
            with contextlib.suppress(FileNotFoundError):
                (path / name).unlink()
        files = {"json": path / SETTINGS_FILE, "table": path / TABLE_FILE}
        storage.write_json(files["json"], summary)
        storage.atomic_write_bytes(
            files["table"], (chains_markdown(chains, ref_name) + "\n").encode()
        )
        if plots:
            from bnnkit.report.convergence_plots import chains_png, rhat_histograms_png

            files["histograms"] = path / HISTOGRAM_FILE
            storage.atomic_write_bytes(
                files["histograms"], rhat_histograms_png(summary["histograms"], title=title)
            )
            if chains:
                files["chains"] = path / CHAINS_FILE
                storage.atomic_write_bytes(files["chains"], chains_png(chains, ref_name))
    return files


def _dataset_name(problem: Any) -> str:
    name = problem.dataset.name
    return Path(name).stem if name.endswith(".npz") else name


def chains_markdown(chains: list[dict[str, Any]], reference: str) -> str:
    """The chain comparison as markdown (a note when a chain is too short to compare).

    Example:
        >>> print(chains_markdown([{"scheme": "1 chain x 4 samples", "agreement": 0.9}], "ref"))
        Scored against ref.
        <BLANKLINE>
        | scheme | agreement |
        |---|---:|
        | 1 chain x 4 samples | 0.9000 |
    """
    from bnnkit.report.tables import long_markdown

    if not chains:
        return (
            "No comparison: each chain keeps fewer samples than there are chains, so the "
            "short chains would be empty."
        )
    scores = tuple(
        k for k in chains[0] if k not in ("scheme", "num_chains", "samples_per_chain", "per_chain")
    )
    return f"Scored against {reference}.\n\n" + long_markdown(chains, ("scheme", *scores))
