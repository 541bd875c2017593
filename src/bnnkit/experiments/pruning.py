"""Weight pruning by signal-to-noise ratio (Blundell et al. 2015, Sec. 5.1) or by magnitude.

For a mean-field posterior ``q(w_j) = N(μ_j, σ_j²)`` the signal-to-noise ratio of a weight is
``|μ_j| / σ_j``. Pruning a fraction p removes the ``round(p · n)`` weights (of the n prunable
ones, ranked over the whole network) with the lowest score, setting their mean to 0; the test
error is that of the pruned *mean* network, as in Blundell et al.'s Table 2. The naive baseline
ranks by ``|μ_j|`` alone.

Only weights are pruned, as Blundell does: leaves of rank ≥ 2 (dense and convolution kernels).
Biases (rank-1 leaves) are kept unless ``include_biases=True``.

:func:`prune_run` does it for a stored VI run and writes the table and figures
(``bnnkit prune RUN_DIR``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from bnnkit import storage
from bnnkit.errors import ConfigError
from bnnkit.posterior import DiagGaussian, Mixture
from bnnkit.types import Params

CRITERIA = ("snr", "magnitude")
DEFAULT_FRACTIONS = (0.0, 0.25, 0.5, 0.75, 0.95, 0.98)


def check_fractions(fractions: Sequence[float]) -> list[float]:
    """The fractions as floats, each in [0, 1).

    Raises:
        ConfigError: a fraction outside [0, 1), or none given.
    """
    if not len(fractions):
        raise ConfigError("no pruning fraction given; allowed: numbers in [0, 1)")
    out = []
    for f in fractions:
        f = float(f)
        if not 0.0 <= f < 1.0:
            raise ConfigError(f"pruning fraction {f} out of range; allowed: 0 <= fraction < 1")
        out.append(f)
    return out


def prunable(params: Params, include_biases: bool = False) -> Params:
    """Per leaf, whether its entries may be pruned (kernels; biases too if asked)."""
    return jax.tree.map(lambda a: bool(np.ndim(a) >= 2 or include_biases), params)


def scores(q: DiagGaussian, criterion: str) -> Params:
    """``|μ|/σ`` (``"snr"``) or ``|μ|`` (``"magnitude"``) per parameter."""
    if criterion == "snr":
        return q.signal_to_noise
    if criterion == "magnitude":
        return jax.tree.map(jnp.abs, q.mean)
    raise ConfigError(f"unknown pruning criterion {criterion!r}; allowed: {', '.join(CRITERIA)}")


def _flat_prunable(tree: Params, which: Params) -> np.ndarray:
    parts = [
        np.asarray(a, np.float64).ravel()
        for a, keep in zip(jax.tree.leaves(tree), jax.tree.leaves(which), strict=True)
        if keep
    ]
    return np.concatenate(parts) if parts else np.zeros(0)


def keep_mask(
    q: DiagGaussian, fraction: float, criterion: str = "snr", include_biases: bool = False
) -> Params:
    """Boolean pytree, False at the ``round(fraction · n)`` lowest-scoring prunable parameters.

    Ties are broken by position (a stable sort), so exactly that many entries are pruned.

    Example:
        >>> q = DiagGaussian({"k": jnp.array([[0.1, -2.0], [0.5, 1.0]]), "b": jnp.ones(2)},
        ...                  {"k": jnp.ones((2, 2)), "b": jnp.ones(2)})
        >>> keep_mask(q, 0.5)["k"].tolist(), keep_mask(q, 0.5)["b"].tolist()
        ([[False, True], [False, True]], [True, True])
    """
    (fraction,) = check_fractions([fraction])
    which = prunable(q.mean, include_biases)
    flat = _flat_prunable(scores(q, criterion), which)
    num_pruned = round(fraction * flat.size)
    keep = np.ones(flat.size, bool)
    keep[np.argsort(flat, kind="stable")[:num_pruned]] = False
    leaves, treedef = jax.tree.flatten(q.mean)
    masks, start = [], 0
    for leaf, prune_it in zip(leaves, jax.tree.leaves(which), strict=True):
        if prune_it:
            size = int(np.prod(leaf.shape))
            masks.append(keep[start : start + size].reshape(leaf.shape))
            start += size
        else:
            masks.append(np.ones(leaf.shape, bool))
    return treedef.unflatten(masks)


def apply_mask(params: Params, mask: Params) -> Params:
    """Parameters with the masked-out entries set to 0."""
    return jax.tree.map(lambda p, m: jnp.where(jnp.asarray(m), p, jnp.zeros_like(p)), params, mask)


def pruned_fraction(mask: Params, which: Params) -> float:
    """Share of the prunable entries that the mask removes."""
    flat = _flat_prunable(jax.tree.map(lambda m: np.asarray(m, float), mask), which)
    return float(1.0 - flat.mean()) if flat.size else 0.0


def log_snr_db(q: DiagGaussian, include_biases: bool = False) -> np.ndarray:
    """``10 log10(|μ|/σ)`` of every prunable parameter (Blundell et al.'s Fig. 4, in dB)."""
    flat = _flat_prunable(q.signal_to_noise, prunable(q.mean, include_biases))
    return 10.0 * np.log10(np.maximum(flat, np.finfo(np.float64).tiny))


def mean_metrics(problem, params: Params) -> dict[str, float]:
    """Test metrics of one parameter setting (the pruned mean network)."""
    from bnnkit.metrics.predictive import metrics_for
    from bnnkit.posterior import Samples
    from bnnkit.predict import predict

    samples = Samples(jax.tree.map(lambda a: jnp.asarray(a)[None, None], params))
    prediction = predict(problem, samples, problem.dataset.x_test, max_diagnostic_points=1)
    metrics = metrics_for(prediction, problem.dataset.y_test_original)
    if "accuracy" in metrics:
        metrics["error"] = 1.0 - metrics["accuracy"]
    return metrics


def pruning_table(
    problem,
    q: DiagGaussian,
    fractions: Sequence[float] = DEFAULT_FRACTIONS,
    include_biases: bool = False,
) -> list[dict[str, Any]]:
    """Test metrics of the pruned mean network for every fraction and both criteria.

    Returns:
        One row per fraction: ``fraction``, ``num_pruned``, ``num_prunable``, and per criterion
        (``"snr"``, ``"magnitude"``) the metrics of
        :func:`bnnkit.metrics.predictive.metrics_for` (plus ``error`` = 1 − accuracy for
        classification).

    Example:
        >>> from bnnkit.problem import ProblemConfig, build
        >>> problem = build(ProblemConfig("yacht_0", "mlp_regression_small", noise_std=0.35))
        >>> mean = problem.init_params(jax.random.PRNGKey(0))
        >>> q = DiagGaussian(mean, jax.tree.map(lambda m: jnp.full_like(m, 0.1), mean))
        >>> rows = pruning_table(problem, q, [0.0, 0.95])
        >>> rows[1]["num_pruned"], rows[1]["num_prunable"]  # 95 % of the 6·50 + 50·1 kernel weights
        (332, 350)
        >>> rows[1]["snr"] == rows[1]["magnitude"]  # one σ for all: both rank by |μ|
        True
    """
    fractions = check_fractions(fractions)
    which = prunable(q.mean, include_biases)
    n = _flat_prunable(q.mean, which).size
    rows = []
    for fraction in fractions:
        row: dict[str, Any] = {
            "fraction": fraction,
            "num_pruned": round(fraction * n),
            "num_prunable": n,
        }
        for criterion in CRITERIA:
            mask = keep_mask(q, fraction, criterion, include_biases)
            row[criterion] = mean_metrics(problem, apply_mask(q.mean, mask))
        rows.append(row)
    return rows


def markdown(rows: list[dict[str, Any]], task: str) -> str:
    """The table as markdown: test error (%) or RMSE per fraction and criterion."""
    key, label, scale, fmt = (
        ("error", "test error (%)", 100.0, "{:.2f}")
        if task == "classification"
        else ("rmse", "test RMSE", 1.0, "{:.4f}")
    )
    lines = [
        f"| pruned | weights removed | {label}, by \\|μ\\|/σ | {label}, by \\|μ\\| |",
        "|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {100 * r['fraction']:.0f} % | {r['num_pruned']} / {r['num_prunable']} "
            f"| {fmt.format(scale * r['snr'][key])} "
            f"| {fmt.format(scale * r['magnitude'][key])} |"
        )
    return "\n".join(lines)


def vi_members(posterior: Any, run_dir: str | os.PathLike, method: str | None) -> list:
    """The mean-field Gaussians of a stored VI run, one per member.

    Raises:
        ConfigError: the run's posterior is not mean-field Gaussian.
    """
    components = posterior.components if isinstance(posterior, Mixture) else (posterior,)
    if not all(isinstance(c, DiagGaussian) for c in components):
        raise ConfigError(
            f"run {str(run_dir)!r} is a {method!r} run; allowed: a `bnnkit vi` "
            "run (pruning ranks weights by their posterior std)"
        )
    return list(components)


def prune_run(
    run_dir: str | os.PathLike,
    out: str | os.PathLike | None = None,
    fractions: Sequence[float] | None = None,
    include_biases: bool = False,
    member: int = 0,
) -> list[dict]:
    """Prune a stored VI run and write the table and figures; returns the table rows.

    Writes to ``out`` (default ``RUN_DIR/pruning``, the one folder inside a run directory
    that is not the run's own; another ``out`` inside a run directory is refused):
    ``pruning.json`` (every metric), ``pruning.md`` (the table), ``pruning.png`` (error
    against the share removed) and ``snr_histogram.png`` (Blundell et al.'s Fig. 4).

    Raises:
        ConfigError: not a VI run, a fraction outside [0, 1), a member that does not exist,
            or an output path that is a file.

    Example:
        (Needs a stored VI run, which takes too long to train in a doctest.)

        >>> rows = prune_run("runs/bbb_mnist", fractions=[0.0, 0.95])  # doctest: +SKIP
    """
    from bnnkit.report import pruning_plots
    from bnnkit.runs import RunDir, load_run
    from bnnkit.runs.directory import PRUNING_DIR
    from bnnkit.runs.placement import check_outside_runs

    fractions = check_fractions(DEFAULT_FRACTIONS if fractions is None else fractions)
    own = Path(run_dir) / PRUNING_DIR
    out_dir = Path(out) if out is not None else own
    if out_dir.exists() and not out_dir.is_dir():
        raise ConfigError(f"--out {str(out_dir)!r} is a file; allowed: a folder")
    if os.path.realpath(out_dir) == os.path.realpath(own):
        RunDir(run_dir).check_links()  # the run's own pruning/ folder: no link out of it
    else:
        check_outside_runs(out_dir, "out")
    for name in ("pruning.json", "pruning.md", "pruning.png", "snr_histogram.png"):
        storage.refuse_link(out_dir / name)
    record, problem, posterior, _ = load_run(run_dir, network=True)
    members = vi_members(posterior, run_dir, record.get("method"))
    if not 0 <= member < len(members):
        raise ConfigError(f"--member {member} out of range; allowed: 0..{len(members) - 1}")
    q = members[member]
    rows = pruning_table(problem, q, fractions, include_biases)

    task = problem.dataset.task
    name = problem.dataset.name
    title = f"{problem.config.model} on {Path(name).stem if name.endswith('.npz') else name}"
    # Everything is computed before the first byte is written: a failure leaves no half.
    files = {
        "pruning.md": (markdown(rows, task) + "\n").encode(),
        "pruning.png": pruning_plots.pruning_curve_png(rows, task, title=title),
        "snr_histogram.png": pruning_plots.snr_histogram_png(
            log_snr_db(q, include_biases), fractions, title=title
        ),
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    for file, data in files.items():
        storage.atomic_write_bytes(out_dir / file, data)
    storage.write_json(
        out_dir / "pruning.json",
        {
            "run": str(run_dir),
            "dataset": problem.dataset.name,
            "model": problem.config.model,
            "include_biases": include_biases,
            "member": member,
            "rows": rows,
        },
    )
    return rows
