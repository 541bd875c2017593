"""``bnnkit prior-predictive``: draws from the prior predictive, as a PNG.

Regression models draw functions on a 1-D input grid; ``--widths 10,100,1000`` draws from MLPs
of those widths instead, the picture of a fan-in scaled prior tending to a Gaussian process.
Classifiers (with ``--dataset``) show the distribution of prior predictive class probabilities
on the dataset's test inputs.
"""

from __future__ import annotations

import argparse

from bnnkit.commands.common import add_prior_arguments, prior_fields


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default=None,
                   help="registered model (default mlp_regression_small, or the MLPs of "
                        "--widths)")
    p.add_argument("--dataset", default=None,
                   help="classification dataset whose test inputs a classifier sees")
    p.add_argument("--data-dir", default=None,
                   help="folder with dataset files (default: $BNNKIT_DATA_DIR or the cache)")
    g = p.add_argument_group("prior")
    g.add_argument("--weight-decay", type=float, default=1.0,
                   help="precision λ of the Gaussian prior N(0, 1/λ)")
    add_prior_arguments(g)
    d = p.add_argument_group("draws")
    d.add_argument("--widths", default=None, metavar="H1,H2,...",
                   help="regression: one panel per MLP hidden width, e.g. 10,100,1000")
    d.add_argument("--depth", type=int, default=1, help="hidden layers of the --widths MLPs")
    d.add_argument("--num-draws", type=int, default=500, help="prior draws S")
    d.add_argument("--x-range", default="-3,3", metavar="LOW,HIGH",
                   help="regression: the input grid")
    d.add_argument("--num-points", type=int, default=200, help="regression: grid points")
    d.add_argument("--num-inputs", type=int, default=500,
                   help="classification: the first N test inputs")
    d.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True, help="PNG path")


def _widths(text: str) -> list[int]:
    from bnnkit.errors import ConfigError

    try:
        widths = [int(w) for w in text.split(",") if w.strip()]
    except ValueError:
        widths = []
    if not widths or min(widths) < 1:
        raise ConfigError(f"--widths {text!r}; allowed: comma-separated integers >= 1, "
                          "e.g. 10,100,1000")
    return widths


def _grid(args: argparse.Namespace):
    import numpy as np

    from bnnkit.errors import ConfigError

    try:
        low, high = (float(v) for v in args.x_range.split(","))
    except ValueError:
        low = high = float("nan")
    if not low < high:
        raise ConfigError(f"--x-range {args.x_range!r}; allowed: LOW,HIGH with LOW < HIGH")
    if args.num_points < 2:
        raise ConfigError(f"--num-points {args.num_points} must be >= 2")
    return np.linspace(low, high, args.num_points)


def _regression(args: argparse.Namespace, fields: dict) -> int:
    import jax
    import jax.numpy as jnp

    from bnnkit import models, priors
    from bnnkit.errors import ConfigError
    from bnnkit.models.mlp import MLP
    from bnnkit.priors import predictive

    if fields["noise_prior"] is not None:
        raise ConfigError("prior-predictive draws functions f(x); allowed: no noise prior")
    grid = _grid(args)
    x = jnp.asarray(grid[:, None], jnp.float32)
    nets = []
    if args.widths is not None:
        if args.model is not None:
            raise ConfigError("--widths draws from MLPs of those widths; allowed: it or "
                              f"--model {args.model}, not both")
        if args.depth < 1:
            raise ConfigError(f"--depth {args.depth} must be >= 1")
        for width in _widths(args.widths):
            module = MLP(hidden=(width,) * args.depth, num_outputs=1)
            layers = "1 hidden layer" if args.depth == 1 else f"{args.depth} hidden layers"
            nets.append((f"width {width} ({layers})", module.init, module.apply))
    else:
        name = args.model or "mlp_regression_small"
        if name in models.MODELS and "regression" not in models.MODELS[name].tasks:
            raise ConfigError(f"model {name!r} is a classifier; allowed: give --dataset with "
                              "its classification data")
        models.check_compatible(name, "regression", (1,), "1-D input grid")
        model = models.get(name, num_outputs=1)
        nets.append((name, model.init, model.apply))
    key = jax.random.PRNGKey(args.seed)
    panels = []
    for i, (label, init, apply) in enumerate(nets):
        # Shapes are all a prior draw needs.
        like = jax.eval_shape(init, jax.random.PRNGKey(0), x[:1])
        prior = priors.make(fields["prior"], bias=fields["bias_prior"],
                            layers=fields["layer_priors"], weight_decay=args.weight_decay,
                            like=like)
        values = predictive.draw_outputs(jax.random.fold_in(key, i), apply, prior, like, x,
                                         args.num_draws)[..., 0]
        panels.append(predictive.FunctionDraws(label, grid, values))
    prior_text = str(prior)
    predictive.plot_functions(panels, f"prior predictive functions, prior {prior_text}",
                              args.out)
    for panel in panels:
        sd = float(panel.values.std(axis=0).mean())
        print(f"{panel.label}: mean sd of f(x) {sd:.3g}, excess kurtosis of f(1) "
              f"{panel.excess_kurtosis():.3g}")
    print(f"wrote {args.out}")
    return 0


def _classification(args: argparse.Namespace, fields: dict) -> int:
    import jax
    import numpy as np

    from bnnkit import problem as problem_lib
    from bnnkit.errors import ConfigError
    from bnnkit.priors import predictive

    if args.widths is not None:
        raise ConfigError("--widths draws regression functions; allowed: without --dataset")
    if args.model is None:
        raise ConfigError("--dataset needs --model, the classifier to draw from")
    if args.num_inputs < 1:
        raise ConfigError(f"--num-inputs {args.num_inputs} must be >= 1")
    problem = problem_lib.build(problem_lib.ProblemConfig(
        dataset=args.dataset, model=args.model, weight_decay=args.weight_decay,
        data_dir=args.data_dir, **fields,
    ))
    if problem.dataset.task != "classification":
        raise ConfigError(f"--dataset {args.dataset!r} is {problem.dataset.task}; allowed: a "
                          "classification dataset (regression draws functions on a 1-D grid "
                          "without --dataset)")
    key = jax.random.PRNGKey(args.seed)
    like = jax.eval_shape(problem.init_params, jax.random.PRNGKey(0))
    x = problem.to_device(problem.dataset.x_test[: args.num_inputs])
    logits = predictive.draw_outputs(key, problem.apply, problem.prior, like, x, args.num_draws)
    probs = np.asarray(jax.nn.softmax(logits.astype(np.float32), axis=-1))
    predictive.plot_class_probabilities(
        probs, f"prior predictive of {args.model} on {problem.dataset.name} "
        f"({probs.shape[1]} test inputs, {probs.shape[0]} draws), prior {problem.prior}",
        args.out,
    )
    summary = predictive.summarize_probs(probs)
    print("mean max class probability: single draw {max_prob_single:.3f}, prior BMA "
          "{max_prob_bma:.3f}; mean entropy: single draw {entropy_single:.3f}, prior BMA "
          "{entropy_bma:.3f}".format(**summary))
    print(f"wrote {args.out}")
    return 0


def run(args: argparse.Namespace) -> int:
    from bnnkit.priors import predictive

    predictive.check_out(args.out)
    fields = prior_fields(args)
    if args.dataset is None:
        return _regression(args, fields)
    return _classification(args, fields)


from bnnkit.commands import Command  # noqa: E402  (after the functions it names)

COMMAND = Command(help="draw functions or class probabilities from the prior",
                  add_arguments=add_arguments, run=run)
