"""Every registered method satisfies the one method interface, and the run driver can use it."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bnnkit import likelihoods, models, priors
from bnnkit.inference import METHODS
from bnnkit.inference.base import Loop
from bnnkit.log_posterior import LogPosterior
from bnnkit.posterior import store
from bnnkit.types import Batch

# One row per method: the Config of a tiny run, and whether the step draws randomness (its
# result must then depend on the key; otherwise it must not).
ROWS = {
    "hmc": (dict(step_size=1e-2, trajectory_len=0.05, num_iterations=4, num_burn_in=2), True),
    "laplace": (dict(structure="last_layer", prior_precision="auto"), False),
    "sgd": (dict(init_step_size=1e-3, num_epochs=2, batch_size=16), False),
    "ensemble": (dict(init_step_size=1e-3, num_epochs=2, batch_size=16, num_members=2), False),
    "sgmcmc": (dict(init_step_size=1e-3, num_epochs=2, batch_size=16, momentum_decay=0.9,
                    preconditioner="rmsprop"), True),
    "vi": (dict(init_step_size=1e-3, num_epochs=2, batch_size=4, vi_num_samples=2,
                kl_weighting="blundell"), True),
}


def tiny_problem():
    rng = np.random.default_rng(0)
    batch = Batch(jnp.asarray(rng.normal(size=(16, 3)), jnp.float32),
                  jnp.asarray(rng.normal(size=16), jnp.float32))
    model = models.get("linear", num_outputs=2)
    lp = LogPosterior(model.apply, likelihoods.Gaussian(), priors.Gaussian(1.0), num_data=16)
    return model, lp, batch


def leaves_equal(a, b) -> bool:
    return all(np.array_equal(x, y) for x, y in
               zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True))


def test_every_method_has_a_row():
    assert sorted(METHODS) == sorted(ROWS), "add a row for every method to ROWS"


@pytest.mark.parametrize("name", sorted(METHODS))
def test_method_protocol(name, tmp_path):
    module = METHODS[name]
    settings, stochastic = ROWS[name]
    config = module.Config(**settings)
    assert name == config.METHOD
    # The Config is what run.json stores: it round-trips through JSON unchanged.
    assert module.Config.from_dict(json.loads(json.dumps(config.to_dict()))) == config
    assert isinstance(config.loop(16), Loop)

    model, lp, batch = tiny_problem()
    method = module.build(lp, config)
    params = model.init(jax.random.PRNGKey(0), batch.x[:1])
    state = method.init(jax.random.PRNGKey(1), params, batch)

    # Pure: the eager step, called twice on the same inputs, gives the same state (no hidden
    # Python state such as counters or a global generator); the compiled step agrees with it.
    eager1, info = method.step(jax.random.PRNGKey(2), state, batch)
    eager2, _ = method.step(jax.random.PRNGKey(2), state, batch)
    assert leaves_equal(eager1, eager2)
    jitted, _ = jax.jit(method.step)(jax.random.PRNGKey(2), state, batch)
    for a, b in zip(jax.tree.leaves(eager1), jax.tree.leaves(jitted), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    # Randomness only through the key.
    other, _ = method.step(jax.random.PRNGKey(3), state, batch)
    assert leaves_equal(eager1, other) != stochastic
    # The state moved (or, for Laplace, gathered curvature) and the input state is untouched.
    assert not leaves_equal(eager1, state)
    assert leaves_equal(method.init(jax.random.PRNGKey(1), params, batch), state)

    # Info: a NamedTuple of finite numbers, which the driver logs under its field names.
    assert hasattr(info, "_fields") and info._fields
    for field, value in info._asdict().items():
        assert np.all(np.isfinite(np.asarray(value, np.float64))), field

    # Position has the structure of the params.
    assert jax.tree.structure(method.position(eager1)) == jax.tree.structure(params)

    # The posterior of kept states (stacked along a leading axis) draws n samples, and goes
    # through the one store unchanged.
    kept = jax.tree.map(lambda *xs: jnp.stack(xs), eager1, eager2)
    posterior = method.posterior(kept)
    draws = posterior.sample(jax.random.PRNGKey(4), 5)
    assert jax.tree.structure(draws) == jax.tree.structure(params)
    assert all(leaf.shape[0] == 5 for leaf in jax.tree.leaves(draws))
    store.save(tmp_path / "p.npz", [posterior, posterior])
    loaded = store.combine([store.load(tmp_path / "p.npz", params)])
    again = loaded.draws(jax.random.PRNGKey(5))
    first = posterior.draws(jax.random.PRNGKey(5))
    assert again.num_chains == 2 * first.num_chains
    assert again.num_samples == first.num_samples >= 1
