"""Draws from the prior predictive: what a prior says about functions before any data.

Regression models draw functions on a 1-D input grid; ``widths="10,100,1000"`` draws from MLPs
of those widths instead, the picture of a fan-in scaled prior tending to a Gaussian process as
the width grows. Classifiers (with ``dataset``) show the distribution of prior predictive class
probabilities on the dataset's test inputs. :func:`draw` writes the PNG and returns the
numbers behind it; ``bnnkit prior-predictive`` is its command line.

Example:
    >>> import tempfile
    >>> out = tempfile.mkdtemp() + "/gp.png"
    >>> result = draw(Config(out=out, widths="10,1000", prior="fanin_gaussian:scale=1",
    ...                      num_draws=50, num_points=20))
    >>> [line.split(":")[0] for line in result.lines]
    ['width 10 (1 hidden layer)', 'width 1000 (1 hidden layer)']
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import numpy as np

from bnnkit.errors import ConfigError
from bnnkit.settings import SEED_BOUNDS, check_at_least, check_numbers, setting

if TYPE_CHECKING:  # imported when a problem is built, not with the experiment
    from bnnkit.problem import ProblemConfig


@dataclasses.dataclass(frozen=True, kw_only=True)
class Config:
    """What to draw, from which prior, and where to write the picture."""

    out: str = setting(help="PNG path")
    model: str | None = setting(
        None, help="registered model (default mlp_regression_small, or the MLPs of --widths)"
    )
    dataset: str | None = setting(
        None, help="classification dataset whose test inputs a classifier sees"
    )
    data_dir: str | None = setting(
        None, help="folder with dataset files (default: $BNNKIT_DATA_DIR or the download cache)"
    )
    weight_decay: float = setting(1.0, help="precision λ of the Gaussian prior N(0, 1/λ)")
    prior: str | None = None
    bias_prior: str | None = None
    layer_priors: str | tuple[str, ...] | None = None
    noise_prior: str | None = None
    widths: str | None = setting(
        None,
        metavar="H1,H2,...",
        help="regression: one panel per MLP hidden width, e.g. 10,100,1000",
    )
    depth: int = setting(1, help="hidden layers of the --widths MLPs")
    num_draws: int = setting(500, help="prior draws S")
    x_range: str = setting("-3,3", metavar="LOW,HIGH", help="regression: the input grid")
    num_points: int = setting(200, help="regression: grid points")
    num_inputs: int = setting(500, help="classification: the first N test inputs")
    seed: int = setting(0, help="seed of the prior draws", bounds=SEED_BOUNDS)

    def __post_init__(self) -> None:
        cls = type(self)
        check_numbers(self)
        check_at_least(cls, "num_draws", self.num_draws, 1)
        check_at_least(cls, "num_inputs", self.num_inputs, 1)
        check_at_least(cls, "depth", self.depth, 1)


@dataclasses.dataclass(frozen=True)
class Result:
    """Where the picture is, and one summary line per panel."""

    out: str
    lines: list[str]


def widths(text: str) -> list[int]:
    """``"10,100"`` as ``[10, 100]``.

    Raises:
        ConfigError: anything but comma-separated integers >= 1.
    """
    try:
        values = [int(w) for w in text.split(",") if w.strip()]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise ConfigError(
            f"--widths {text!r}; allowed: comma-separated integers >= 1, e.g. 10,100,1000"
        )
    return values


def grid(config: Config) -> np.ndarray:
    """The 1-D input grid of the regression picture.

    Raises:
        ConfigError: a range that is not ``LOW,HIGH`` with LOW < HIGH, or fewer than 2 points.
    """
    try:
        low, high = (float(v) for v in config.x_range.split(","))
    except ValueError:
        low = high = float("nan")
    if not low < high:
        raise ConfigError(f"--x-range {config.x_range!r}; allowed: LOW,HIGH with LOW < HIGH")
    if config.num_points < 2:
        raise ConfigError(f"--num-points {config.num_points} must be >= 2")
    return np.linspace(low, high, config.num_points)


def _regression(config: Config) -> Result:
    import jax
    import jax.numpy as jnp

    from bnnkit import models, priors
    from bnnkit.models.mlp import MLP
    from bnnkit.priors import predictive

    if config.noise_prior is not None:
        raise ConfigError("prior-predictive draws functions f(x); allowed: no noise prior")
    xs = grid(config)
    x = jnp.asarray(xs[:, None], jnp.float32)
    nets = []
    if config.widths is not None:
        if config.model is not None:
            raise ConfigError(
                "--widths draws from MLPs of those widths; allowed: it or "
                f"--model {config.model}, not both"
            )
        for width in widths(config.widths):
            module = MLP(hidden=(width,) * config.depth, num_outputs=1)
            layers = "1 hidden layer" if config.depth == 1 else f"{config.depth} hidden layers"
            nets.append((f"width {width} ({layers})", module.init, module.apply))
    else:
        name = config.model or "mlp_regression_small"
        if name in models.MODELS and "regression" not in models.MODELS[name].tasks:
            raise ConfigError(
                f"model {name!r} is a classifier; allowed: give --dataset with "
                "its classification data"
            )
        models.check_compatible(name, "regression", (1,), "1-D input grid")
        model = models.get(name, num_outputs=1)
        nets.append((name, model.init, model.apply))
    key = jax.random.PRNGKey(config.seed)
    panels, prior = [], None
    for i, (label, init, apply) in enumerate(nets):
        # Shapes are all a prior draw needs.
        like = jax.eval_shape(init, jax.random.PRNGKey(0), x[:1])
        prior = priors.make(
            config.prior,
            bias=config.bias_prior,
            layers=config.layer_priors,
            weight_decay=config.weight_decay,
            like=like,
        )
        values = predictive.draw_outputs(
            jax.random.fold_in(key, i), apply, prior, like, x, config.num_draws
        )[..., 0]
        panels.append(predictive.FunctionDraws(label, xs, values))
    predictive.plot_functions(panels, f"prior predictive functions, prior {prior}", config.out)
    lines = [
        f"{panel.label}: mean sd of f(x) {float(panel.values.std(axis=0).mean()):.3g}, "
        f"excess kurtosis of f(1) {panel.excess_kurtosis():.3g}"
        for panel in panels
    ]
    return Result(config.out, lines)


def problem_config(config: Config, noise_std: float | None = None) -> ProblemConfig:
    """The :class:`~bnnkit.problem.ProblemConfig` of ``--dataset`` with ``--model`` under the
    prior ``config`` names (and ``noise_std``, where given)."""
    from bnnkit import problem as problem_lib

    return problem_lib.ProblemConfig(
        dataset=config.dataset,
        model=config.model,
        weight_decay=config.weight_decay,
        data_dir=config.data_dir,
        prior=config.prior,
        bias_prior=config.bias_prior,
        layer_priors=config.layer_priors,
        noise_prior=config.noise_prior,
        noise_std=noise_std,
    )


def _classification(config: Config) -> Result:
    import jax

    from bnnkit import problem as problem_lib
    from bnnkit.priors import predictive

    if config.widths is not None:
        raise ConfigError("--widths draws regression functions; allowed: without --dataset")
    if config.model is None:
        raise ConfigError("--dataset needs --model, the classifier to draw from")
    problem = problem_lib.build(problem_config(config))
    if problem.dataset.task != "classification":
        raise ConfigError(
            f"--dataset {config.dataset!r} is {problem.dataset.task}; allowed: a "
            "classification dataset (regression draws functions on a 1-D grid "
            "without --dataset)"
        )
    key = jax.random.PRNGKey(config.seed)
    like = jax.eval_shape(problem.init_params, jax.random.PRNGKey(0))
    x = problem.to_device(problem.dataset.x_test[: config.num_inputs])
    logits = predictive.draw_outputs(key, problem.apply, problem.prior, like, x, config.num_draws)
    probs = np.asarray(jax.nn.softmax(logits.astype(np.float32), axis=-1))
    predictive.plot_class_probabilities(
        probs,
        f"prior predictive of {config.model} on {problem.dataset.name} "
        f"({probs.shape[1]} test inputs, {probs.shape[0]} draws), prior {problem.prior}",
        config.out,
    )
    summary = predictive.summarize_probs(probs)
    line = (
        "mean max class probability: single draw {max_prob_single:.3f}, prior BMA "
        "{max_prob_bma:.3f}; mean entropy: single draw {entropy_single:.3f}, prior BMA "
        "{entropy_bma:.3f}".format(**summary)
    )
    return Result(config.out, [line])


def draw(config: Config) -> Result:
    """Draw from the prior predictive and write the PNG to ``config.out``.

    Raises:
        ConfigError: bad settings or an output path that cannot be written, named in one line.
    """
    from bnnkit.priors import predictive

    predictive.check_out(config.out)
    if config.dataset is None:
        return _regression(config)
    return _classification(config)
