"""SGD, ensembles and the minibatch epoch: unbiased gradients, the exact MAP, vmapped members."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bnnkit import likelihoods, models, priors, runs
from bnnkit.errors import ConfigError
from bnnkit.inference import ensemble, sgd, sgmcmc
from bnnkit.log_posterior import LogPosterior
from bnnkit.problem import ProblemConfig
from bnnkit.runs.units import make_epoch, minibatch_indices
from bnnkit.types import Batch


def linear_problem(n=48, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3))
    y = x @ np.array([1.0, -2.0, 0.5]) - 0.7 + 0.4 * rng.normal(size=n)
    model = models.get("linear", num_outputs=1)
    lp = LogPosterior(model.apply, likelihoods.Gaussian(noise_std=0.4), priors.Gaussian(3.0), n)
    return model, lp, Batch(jnp.asarray(x), jnp.asarray(y))


def f64(tree):
    return jax.tree.map(lambda a: jnp.asarray(a, jnp.float64), tree)


@pytest.mark.slow
def test_minibatch_gradient_is_unbiased_over_an_epoch():
    # The N/|B| scaling makes each minibatch log posterior an unbiased estimate; over an epoch
    # that partitions the data (|B| divides N) the average gradient equals the full one exactly.
    with jax.enable_x64(True):
        model, lp, batch = linear_problem(n=48)
        params = f64(model.init(jax.random.PRNGKey(0), batch.x[:1]))
        idx = minibatch_indices(jax.random.PRNGKey(1), 48, 8)
        assert sorted(np.asarray(idx).ravel().tolist()) == list(range(48))
        grads = [jax.grad(lp)(params, Batch(batch.x[i], batch.y[i])) for i in idx]
        mean_grad = jax.tree.map(lambda *g: sum(g) / len(g), *grads)
        full = jax.grad(lp)(params, batch)
        for a, b in zip(jax.tree.leaves(mean_grad), jax.tree.leaves(full), strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def run_sgd(lp, model, batch, batch_size, num_epochs, eta, clip=None):
    # The paper's cosine schedule over num_epochs * (N // batch_size) steps.
    config = sgd.Config(
        init_step_size=eta,
        num_epochs=num_epochs,
        batch_size=batch_size,
        momentum_decay=0.5,
        clip_grad_norm=clip,
    )
    method = sgd.build(lp, config)
    epoch = jax.jit(make_epoch(method, batch_size))
    state = method.init(None, f64(model.init(jax.random.PRNGKey(0), batch.x[:1])), None)
    key = jax.random.PRNGKey(2)
    for e in range(num_epochs):
        state, _ = epoch(state, key, key, e, batch)
    dense = state.position["params"]["Dense_0"]
    return np.concatenate([np.asarray(dense["kernel"])[:, 0], np.asarray(dense["bias"])])


def test_clipped_first_step_has_the_bounded_length_and_clipping_keeps_the_map():
    # The first heavy-ball step moves by η₀ · clip(g): exactly η₀ c N when ‖g‖ > c N. Near the
    # MAP the gradient is small, clipping stops acting, and full-batch descent still converges
    # to the exact MAP.
    with jax.enable_x64(True):
        model, lp, batch = linear_problem(n=48)
        params = f64(model.init(jax.random.PRNGKey(0), batch.x[:1]))
        params = jax.tree.map(lambda a: a + 10.0, params)  # far from the MAP: a large gradient
        grad_norm = float(
            jnp.sqrt(sum(jnp.sum(g**2) for g in jax.tree.leaves(jax.grad(lp)(params, batch))))
        )
        clip, eta = 0.01 * grad_norm / 48, 1e-4
        method = sgd.build(
            lp,
            sgd.Config(
                init_step_size=eta,
                num_epochs=1,
                batch_size=48,
                momentum_decay=0.5,
                clip_grad_norm=clip,
            ),
        )
        state, _ = method.step(None, method.init(None, params, None), batch)
        moved = float(
            jnp.sqrt(
                sum(
                    jnp.sum((a - b) ** 2)
                    for a, b in zip(
                        jax.tree.leaves(state.position), jax.tree.leaves(params), strict=True
                    )
                )
            )
        )
        np.testing.assert_allclose(moved, eta * clip * 48, rtol=1e-12)

        xa = np.concatenate([np.asarray(batch.x), np.ones((48, 1))], axis=1)
        precision = 3.0 * np.eye(4) + xa.T @ xa / 0.4**2
        exact_map = np.linalg.solve(precision, xa.T @ np.asarray(batch.y) / 0.4**2)
        eta = 0.5 / np.linalg.eigvalsh(precision).max()
        np.testing.assert_allclose(
            run_sgd(lp, model, batch, 48, 400, eta, clip=1.0), exact_map, rtol=1e-8, atol=1e-10
        )


@pytest.mark.parametrize("clip", [0.0, -1.0, float("nan")])
def test_clip_grad_norm_must_be_positive(clip):
    with pytest.raises(ConfigError, match="--clip-grad-norm"):
        sgd.Config(init_step_size=1e-3, num_epochs=1, batch_size=8, clip_grad_norm=clip)


def test_sgd_reaches_the_conjugate_map():
    with jax.enable_x64(True):
        model, lp, batch = linear_problem(n=48)
        xa = np.concatenate([np.asarray(batch.x), np.ones((48, 1))], axis=1)
        precision = 3.0 * np.eye(4) + xa.T @ xa / 0.4**2
        exact_map = np.linalg.solve(precision, xa.T @ np.asarray(batch.y) / 0.4**2)
        # A step below 2/λ_max of the Hessian, so that gradient descent contracts.
        eta = 0.5 / np.linalg.eigvalsh(precision).max()
        # Full batch: heavy-ball gradient descent converges to the MAP itself.
        np.testing.assert_allclose(
            run_sgd(lp, model, batch, 48, 400, eta), exact_map, rtol=1e-8, atol=1e-10
        )
        # Minibatches: the gradient noise of the last steps leaves the iterate a small fraction
        # of a posterior standard deviation away from the MAP.
        post_sd = np.sqrt(np.diag(np.linalg.inv(precision)))
        err = np.abs(run_sgd(lp, model, batch, 16, 300, eta) - exact_map) / post_sd
        assert err.max() < 0.05, err


def small_config(**kw):
    return ProblemConfig(dataset="yacht_0", model="mlp_regression_small", noise_std=0.35, **kw)


def final_sample(run_dir):
    from bnnkit.runs import load_run

    return load_run(run_dir)[2].params


def test_ensemble_of_identical_members_equals_one_member(tmp_path):
    # Same keys for every member: K vmapped members must each equal the single-member run.
    problem_cfg = small_config(float64=True)
    from bnnkit import problem as problem_lib

    problem = problem_lib.build(problem_cfg)
    method = sgd.build(
        problem.log_posterior, sgd.Config(init_step_size=1e-4, num_epochs=3, batch_size=32)
    )
    epoch = make_epoch(method, 32)
    params = problem.init_params(jax.random.PRNGKey(0))
    state = method.init(None, params, None)
    train = problem.train_batch()
    key = jax.random.PRNGKey(5)
    one = state
    for e in range(3):
        one, _ = jax.jit(epoch)(one, key, key, e, train)
    k = 3
    many = jax.tree.map(lambda a: jnp.stack([a] * k), state)
    keys = jnp.stack([key] * k)
    vepoch = jax.jit(jax.vmap(epoch, in_axes=(0, 0, 0, None, None)))
    for e in range(3):
        many, _ = vepoch(many, keys, keys, e, train)
    for a, b in zip(jax.tree.leaves(one.position), jax.tree.leaves(many.position), strict=True):
        for m in range(k):
            np.testing.assert_allclose(b[m], a, rtol=1e-12, atol=1e-14)


@pytest.mark.slow
def test_vmapped_ensemble_equals_sequential(tmp_path):
    def config(sequential):
        return ensemble.Config(
            init_step_size=1e-4,
            num_epochs=4,
            batch_size=32,
            num_members=3,
            momentum_decay=0.9,
            sequential=sequential,
        )

    runs.run(small_config(float64=True), config(False), tmp_path / "v", progress=False)
    runs.run(small_config(float64=True), config(True), tmp_path / "s", progress=False)
    v, s = final_sample(tmp_path / "v"), final_sample(tmp_path / "s")
    for a, b in zip(jax.tree.leaves(v), jax.tree.leaves(s), strict=True):
        assert a.shape[:2] == (3, 1)
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    # Members differ from each other (own initialisation and data order).
    leaf = jax.tree.leaves(v)[0]
    assert not np.allclose(leaf[0], leaf[1])


def test_kept_epochs():
    # Counted from 0: epochs 7 and 10 after a 4-epoch burn-in, every 3rd.
    cfg = sgmcmc.Config(
        init_step_size=1e-5, num_epochs=10, batch_size=4, num_burn_in=4, ensemble_freq=3
    )
    assert cfg.loop(277).kept_units() == [6, 9]
    # SGD keeps its last epoch only.
    assert sgd.Config(init_step_size=1e-3, num_epochs=5, batch_size=4).loop(277).kept_units() == [4]


@pytest.mark.parametrize(
    "kw, message",
    [
        (dict(batch_size=1000), "larger than the 277 training examples"),
        (dict(batch_size=0), "--batch-size 0"),
        (dict(num_epochs=0), "--num-epochs 0"),
        (dict(num_burn_in=4, ensemble_freq=5), "--ensemble-freq 5"),
    ],
)
def test_epoch_settings_refuse(kw, message):
    from bnnkit.errors import ConfigError

    values = dict(init_step_size=1e-5, num_epochs=5, batch_size=16)
    values.update(kw)
    with pytest.raises(ConfigError, match=message.replace("-", "\\-")):
        sgmcmc.Config(**values).loop(277)
