"""A check of the prior against the data, before any chain runs: what the prior says about the
noise std and about the scale of the predictions, on the problem's own training inputs.

:func:`check` draws parameters from the problem's prior (a fixed key of its own, never a
run's), applies the network to a few hundred training inputs and measures

- for a Gaussian likelihood, the share of the prior mass whose noise std σ lies below a
  *floor*, :data:`FLOOR_FRACTION` times the std of the training targets in the units the
  likelihood sees (standardised for the UCI sets), with its Monte Carlo standard error;
- for regression, the scale of the prior predictive: the std over draws of the predicted mean,
  averaged over the inputs, against the std of the training targets;
- for classification, the mean largest class probability and the mean entropy of single
  prior draws and of their average, against the uniform prediction's ``1/K`` and ``log K``.

Why a floor at a thousandth of the targets' spread. The Gaussian log density of a training
point fitted to within σ is ``-log σ`` up to a constant: each point a network interpolates gains
``log(s_y / σ)`` nats over a σ at the targets' scale ``s_y``, without bound as σ → 0, and the
curvature grows as ``1/σ²``. A network with the freedom to pass through its training points
(every network of this toolkit on a UCI split) therefore finds ever sharper regions wherever
its prior leaves mass at small σ: the posterior concentrates on interpolation and no chain
becomes stationary (Wong-Toi et al. 2023, "Understanding pathologies of deep heteroskedastic
regression"). No recorded target is measured to better than a thousandth of its spread, so
a σ below that claims a precision the data cannot have, and a well-posed prior puts
essentially none of its mass there; the 1e-6 that keeps the softplus std off zero
(:data:`bnnkit.likelihoods.MIN_STD`) is no floor in this sense. The σ measured is the one the
run's likelihood computes (:meth:`~bnnkit.problem.Problem.likelihood_at`), with the floor it
adds to a network's softplus std (``--min-noise-std``): a floor at or above the check's leaves
no mass below it.

Why :data:`THRESHOLD` (20 % of the prior mass): it is measured on references, not on the
prior alone. On splits 0-4 of the five small UCI sets (docs/uci-benchmark.md, "The default
prior against the peer"), the halves of a default reference's chains disagreed (level 2 of the
verdict: the posterior still sharpening) on 12 of 25 under the paper's N(0, 1) on a
heteroscedastic MLP (28 % to 33 % of the mass below the floor), on 4 of 25 at precision 3
(6 % to 11 %) and on 1 of 25 at precision 10 (at most 0.3 %), and precision 3 predicts best of
the three. 20 % separates the first from the others by more than 4 standard errors of the
share a few hundred draws measure, on either side. Those counts are L2's before its
calibration against the ranking of cheap methods; judged by the calibrated L2 the halves
disagree on 1 of 25 under N(0, 1) and 2 of 25 at precision 3, whose "reproducible" is the one
measured to rank as a long reference does (docs/uci-benchmark.md, "Under the calibrated
verdict").

The predictive scale gets a note (not a warning) when it is off by more than
:data:`SCALE_RATIO` (10x) either way:
a prior whose functions spread ten times wider than the targets spends most of its mass on
functions the data rule out at once; ten times narrower, it cannot reach the data without
the likelihood overruling it.

Example:
    >>> from bnnkit import problem as problem_lib
    >>> problem = problem_lib.build(problem_lib.ProblemConfig(
    ...     "yacht_0", "mlp_regression_small", noise_std=0.35, prior="gaussian:scale=0.2"))
    >>> result = check(problem, num_draws=50, num_inputs=40)
    >>> result.share_below_floor, result.warning is None
    (0.0, True)
"""

from __future__ import annotations

import dataclasses
import math
import sys
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np

from bnnkit.errors import ConfigError
from bnnkit.priors.predictive import summarize_probs
from bnnkit.threefry_lowering import straight

if TYPE_CHECKING:
    from bnnkit.problem import Problem

#: The noise floor, as a fraction of the std of the training targets the likelihood sees.
FLOOR_FRACTION = 1e-3
#: The share of the prior mass below the floor above which the check warns.
THRESHOLD = 0.2
#: The factor by which the prior predictive's scale may differ from the targets' either way.
SCALE_RATIO = 10.0
#: Prior draws and training inputs of the check (fewer for a network too costly to run them).
NUM_DRAWS = 200
NUM_INPUTS = 256
#: The most floating-point operations the check spends (XLA's count for the whole batch).
MAX_FLOPS = 2e9
#: The most parameter values the draws hold at once (all draws are in memory together).
MAX_VALUES = 2e7
#: Below this many draws or inputs the check is not made (its figures would say little).
MIN_DRAWS, MIN_INPUTS = 16, 8
#: The key of the prior draws: its own, so no random stream of a run changes.
STREAM = 0x5052494F  # "PRIO"
#: The field of ``run.json`` that holds the check of the run's problem.
RECORD_KEY = "prior_check"


@dataclasses.dataclass(frozen=True)
class PriorCheck:
    """What the prior says before any data, against the training targets.

    Attributes:
        task: ``"regression"`` or ``"classification"``.
        num_draws: prior draws S.
        num_inputs: training inputs the network was applied to.
        noise: where σ comes from: ``"network"`` (a softplus head), ``"inferred"`` (a noise
            prior), ``"fixed"`` (``--noise-std``); ``None`` for classification.
        target_std: std of the training targets, in the units the likelihood sees.
        noise_floor: ``FLOOR_FRACTION * target_std``.
        share_below_floor: share of the (draw, input) pairs with σ below the floor.
        share_se: its Monte Carlo standard error (from the S per-draw shares: draws are
            independent, the inputs of one draw are not).
        predictive_scale: std over draws of the predicted mean, averaged over inputs.
        scale_ratio: ``predictive_scale / target_std``.
        max_prob: mean largest class probability of single draws (classification).
        max_prob_average: the same of the average over draws.
        entropy: mean entropy of single draws, nats.
        entropy_uniform: ``log K``, the entropy of the uniform prediction.
        warning: one line saying what is wrong and what to do, or ``None``: a share of the
            prior mass above :data:`THRESHOLD` at a noise std below the floor.
        note: one line on a prior predictive scale off by more than :data:`SCALE_RATIO`
            either way, or ``None``. A note, not a warning: a wide prior on a network whose
            noise is fixed is the paper's setting, and its chains mix.
        skipped: why the check was not made (a network too costly to run on enough draws),
            or ``None``.
    """

    task: str
    num_draws: int = 0
    num_inputs: int = 0
    noise: str | None = None
    target_std: float | None = None
    noise_floor: float | None = None
    share_below_floor: float | None = None
    share_se: float | None = None
    predictive_scale: float | None = None
    scale_ratio: float | None = None
    max_prob: float | None = None
    max_prob_average: float | None = None
    entropy: float | None = None
    entropy_uniform: float | None = None
    warning: str | None = None
    note: str | None = None
    skipped: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The fields as JSON values (what ``run.json`` records)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> PriorCheck:
        """Read back :meth:`to_dict` (fields it does not know are left out)."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in names})

    def summary(self) -> str:
        """One line of the figures, as the report and the commands show them.

        Example:
            >>> line = PriorCheck("regression", 200, 100, noise="fixed", target_std=1.0,
            ...                   noise_floor=1e-3, share_below_floor=0.0, share_se=0.0,
            ...                   predictive_scale=2.0, scale_ratio=2.0).summary()
            >>> for part in line.split(": ")[1].split("; "):
            ...     print(part)
            noise std below 0.001 on 0 % of the prior mass (fixed noise)
            prior predictive sd 2 = 2x the targets sd 1
        """
        if self.skipped is not None:
            return f"prior check not made: {self.skipped}"
        head = f"prior check ({self.num_draws} draws, {self.num_inputs} training inputs): "
        if self.task == "classification":
            uniform = math.exp(-self.entropy_uniform)
            return head + (
                f"mean max class probability {self.max_prob:.3g} (prior average "
                f"{self.max_prob_average:.3g}, uniform {uniform:.3g}); "
                f"mean entropy {self.entropy:.3g} nats (uniform "
                f"{self.entropy_uniform:.3g})"
            )
        parts = []
        if self.share_below_floor is not None:
            parts.append(
                f"noise std below {self.noise_floor:.3g} on {_share(self)} of the "
                f"prior mass ({self.noise} noise)"
            )
        parts.append(
            f"prior predictive sd {self.predictive_scale:.3g} = "
            f"{self.scale_ratio:.3g}x the targets sd {self.target_std:.3g}"
        )
        return head + "; ".join(parts)

    def lines(self) -> list[str]:
        """:meth:`summary`, then the warning and the note, each on a line of its own."""
        return [
            self.summary(),
            *(
                f"{what}: {line}"
                for what, line in (("warning", self.warning), ("note", self.note))
                if line is not None
            ),
        ]


def _share(result: PriorCheck) -> str:
    share = 100 * result.share_below_floor
    if result.share_se:
        return f"{share:.3g} % (± {100 * result.share_se:.2g})"
    return f"{share:.3g} %"


def check_key() -> jax.Array:
    """The key of the check's prior draws: ``fold_in(key(0), STREAM)``, no run's.

    An ``rbg`` key: XLA compiles its draws, vectorised over hundreds of keys, in about half
    the time of threefry's, and the check's figures need no particular generator.
    """
    return jax.random.fold_in(jax.random.key(0, impl="rbg"), STREAM)


def _input_rows(num_train: int, num_inputs: int) -> np.ndarray:
    """Evenly spaced training rows, so the inputs cover the set whatever its order."""
    return np.unique(np.linspace(0, num_train - 1, min(num_inputs, num_train)).astype(int))


def _flops_per_input(problem: Problem, like: Any, x: jax.Array) -> float | None:
    """XLA's count of the floating-point operations of one network pass on one input."""
    try:
        cost = jax.jit(problem.apply).lower(like, x[:1]).cost_analysis()
    except Exception:  # a backend without the count: the check runs in full
        return None
    if isinstance(cost, (list, tuple)):
        cost = cost[0] if cost else None
    flops = (cost or {}).get("flops")
    return float(flops) if flops else None


def check(
    problem: Problem,
    key: jax.Array | None = None,
    *,
    num_draws: int = NUM_DRAWS,
    num_inputs: int = NUM_INPUTS,
) -> PriorCheck:
    """Draw from ``problem``'s prior and measure it against the training targets.

    Compiled once (all draws at once under ``vmap``); the draws and inputs are cut, keeping
    their ratio, for a network whose pass over them would cost more than :data:`MAX_FLOPS`,
    and the check is skipped where that leaves fewer than :data:`MIN_DRAWS` draws or
    :data:`MIN_INPUTS` inputs.

    Args:
        problem: a built :class:`~bnnkit.problem.Problem`.
        key: PRNG key of the draws; ``None``: :func:`check_key`.
        num_draws: prior draws S (at least 2, for a standard error).
        num_inputs: training inputs, evenly spaced over the training set.

    Returns:
        A :class:`PriorCheck`.

    Raises:
        ConfigError: ``num_draws`` below 2 or ``num_inputs`` below 1.
    """
    if num_draws < 2:
        raise ConfigError(f"prior check: num_draws {num_draws} must be >= 2")
    if num_inputs < 1:
        raise ConfigError(f"prior check: num_inputs {num_inputs} must be >= 1")
    key = check_key() if key is None else key
    dataset = problem.dataset
    like = jax.eval_shape(problem.init_params, jax.random.PRNGKey(0))
    rows = _input_rows(dataset.num_train, num_inputs)
    x = problem.to_device(np.asarray(dataset.x_train)[rows])
    flops = _flops_per_input(problem, like, x)
    size = sum(math.prod(leaf.shape) for leaf in jax.tree.leaves(like))
    if size * num_draws > MAX_VALUES:
        num_draws = max(int(MAX_VALUES // size), 1)
        if num_draws < MIN_DRAWS:
            return PriorCheck(
                dataset.task,
                skipped=f"the network's {size} parameters are too "
                "many to draw from its prior before the run",
            )
    if flops is not None and flops * num_draws * len(rows) > MAX_FLOPS:
        shrink = math.sqrt(MAX_FLOPS / (flops * num_draws * len(rows)))
        num_draws, rows = int(num_draws * shrink), rows[: int(len(rows) * shrink)]
        x = x[: len(rows)]
        if num_draws < MIN_DRAWS or len(rows) < MIN_INPUTS:
            return PriorCheck(
                dataset.task,
                skipped=f"one pass of the network costs {flops:.3g} "
                "flops per input, too many to draw from "
                "its prior before the run",
            )
    classification = dataset.task == "classification"

    def one(k):
        position = problem.prior.sample(k, like)
        outputs = problem.apply(position, x)
        if classification:
            return jax.nn.softmax(outputs.astype(jnp.float32), axis=-1)
        mean, std = problem.likelihood_at(position).mean_std(outputs)
        return jnp.stack([mean, jnp.broadcast_to(std, mean.shape)])

    # Prior draws, then one pass each: Threefry's hash straight compiles faster than its loop.
    with straight():
        draws = np.asarray(jax.jit(jax.vmap(one))(jax.random.split(key, num_draws)), np.float64)
    if classification:
        return _classification(draws, len(rows))
    return _regression(problem, draws, len(rows))


def _classification(probs: np.ndarray, num_inputs: int) -> PriorCheck:
    summary = summarize_probs(probs)
    return PriorCheck(
        "classification",
        probs.shape[0],
        num_inputs,
        max_prob=summary["max_prob_single"],
        max_prob_average=summary["max_prob_bma"],
        entropy=summary["entropy_single"],
        entropy_uniform=math.log(probs.shape[-1]),
    )


def _regression(problem: Problem, draws: np.ndarray, num_inputs: int) -> PriorCheck:
    means, stds = draws[:, 0], draws[:, 1]
    target_std = float(np.std(np.asarray(problem.dataset.y_train, np.float64)))
    if not target_std > 0:
        target_std = 1.0  # constant targets: the units themselves
    floor = FLOOR_FRACTION * target_std
    config = problem.config
    noise = (
        "fixed"
        if config.noise_std is not None
        else "inferred"
        if config.noise_prior is not None
        else "network"
    )
    per_draw = np.mean(stds < floor, axis=1)
    share = float(per_draw.mean())
    se = float(per_draw.std(ddof=1) / math.sqrt(len(per_draw)))
    scale = float(np.mean(np.std(means, axis=0)))
    ratio = scale / target_std
    result = PriorCheck(
        "regression",
        draws.shape[0],
        num_inputs,
        noise=noise,
        target_std=target_std,
        noise_floor=floor,
        share_below_floor=share,
        share_se=se,
        predictive_scale=scale,
        scale_ratio=ratio,
    )
    return dataclasses.replace(result, warning=_warning(result), note=_note(result))


def _warning(result: PriorCheck) -> str | None:
    """The noise line: a share above :data:`THRESHOLD`, and what to do."""
    if result.share_below_floor is None or not result.share_below_floor > THRESHOLD:
        return None
    cause = {
        "network": "use a tighter prior (--weight-decay 3, the default of a registered "
        "regression network, or more, or --prior gaussian:scale=0.5), "
        "fix the noise (--noise-std, in the targets' units the model sees), infer one "
        "noise std under a prior (--noise-prior), or floor the network's std "
        "(--min-noise-std, a fraction of the targets' sd)",
        "inferred": "use a noise prior with less mass near zero (--noise-prior "
        "lognormal:loc=-1,scale=1) or fix the noise (--noise-std)",
        "fixed": f"fix the noise at or above {result.noise_floor:.3g} (--noise-std)",
    }
    return (
        f"the prior puts {_share(result)} of its mass at a noise std below "
        f"{result.noise_floor:.3g} ({FLOOR_FRACTION:g} x the training targets' sd): the "
        f"posterior can sharpen without end and chains will not mix; {cause[result.noise]}"
    )


def _note(result: PriorCheck) -> str | None:
    """The scale line: a prior predictive off by more than :data:`SCALE_RATIO` either way."""
    if result.scale_ratio is None or 1 / SCALE_RATIO <= result.scale_ratio <= SCALE_RATIO:
        return None
    side = "wider" if result.scale_ratio > 1 else "narrower"
    return (
        f"the prior predictive's sd {result.predictive_scale:.3g} is "
        f"{result.scale_ratio:.3g}x the training targets' sd {result.target_std:.3g}, "
        f"more than {SCALE_RATIO:g}x {side}; "
        f"{'a tighter' if side == 'wider' else 'a wider'} prior (--prior, --weight-decay) "
        "brings it to the data's scale"
    )


def before_run(problem: Problem, *, announce: bool = True) -> dict[str, Any]:
    """The check a run records before its chains start (:data:`RECORD_KEY` of ``run.json``),
    its warning printed once on stderr (``bnnkit: warning: ...``) when ``announce``; a second
    run on the same built problem (the next stage of a reference) records the same check and
    prints nothing again.

    Args:
        problem: the run's problem.
        announce: print the warning (the process that writes the run, only).

    Returns:
        :meth:`PriorCheck.to_dict` of :func:`check` at :func:`check_key`.
    """
    # The stages of a run made of runs share one built problem: checked and told once.
    known = _checked.get(id(problem))
    if known is not None and known[0] is problem:
        return known[1].to_dict()
    result = check(problem)
    _checked.clear()  # only the latest problem is kept (a problem holds its data)
    _checked[id(problem)] = (problem, result)
    if announce and result.warning is not None:
        print(f"bnnkit: warning: {result.warning}", file=sys.stderr, flush=True)
    return result.to_dict()


_checked: dict[int, tuple[Any, PriorCheck]] = {}


def recorded(record: dict[str, Any]) -> PriorCheck | None:
    """The check a run's ``run.json`` holds, or ``None`` (a run made before it was recorded)."""
    values = record.get(RECORD_KEY)
    if not isinstance(values, dict) or not isinstance(values.get("task"), str):
        return None
    return PriorCheck.from_dict(values)
