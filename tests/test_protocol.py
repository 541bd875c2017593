"""Every registered method satisfies the one method interface."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bnnkit import likelihoods, models, priors
from bnnkit.inference import METHODS
from bnnkit.log_posterior import Batch, LogPosterior

# Per method: the minimal hyperparameters to build it on a tiny problem.
SETTINGS = {
    "hmc": dict(step_size=1e-2, trajectory_len=0.05, num_burn_in=2),
    "laplace": dict(structure="last_layer", prior_precision="auto"),
    "sgd": dict(step_size=1e-3, momentum_decay=0.9),
    "sgmcmc": dict(step_size=1e-3, momentum_decay=0.9, preconditioner="rmsprop"),
    "vi": dict(step_size=1e-3, num_samples=2, kl_weighting="blundell", steps_per_epoch=4),
}


@pytest.mark.parametrize("name", sorted(METHODS))
def test_method_protocol(name):
    assert name in SETTINGS, f"add a row for {name!r} to SETTINGS"
    rng = np.random.default_rng(0)
    batch = Batch(jnp.asarray(rng.normal(size=(16, 3)), jnp.float32),
                  jnp.asarray(rng.normal(size=16), jnp.float32))
    model = models.get("linear", num_outputs=2)
    lp = LogPosterior(model.apply, likelihoods.Gaussian(), priors.Gaussian(1.0), num_data=16)
    method = METHODS[name](lp, **SETTINGS[name])
    params = model.init(jax.random.PRNGKey(0), batch.x[:1])

    state = method.init(jax.random.PRNGKey(1), params, batch)
    step = jax.jit(method.step)
    s1, info1 = step(jax.random.PRNGKey(2), state, batch)
    s2, _ = step(jax.random.PRNGKey(2), state, batch)
    # Pure: same key and state give the same result.
    for a, b in zip(jax.tree.leaves(s1), jax.tree.leaves(s2), strict=True):
        np.testing.assert_array_equal(a, b)
    # Position has the structure of the params.
    assert jax.tree.structure(method.position(s1)) == jax.tree.structure(params)
    assert info1 is not None

    kept = jax.tree.map(lambda *xs: jnp.stack(xs), s1, s2)
    posterior = method.posterior(kept)
    # Any posterior representation: n draws from sample(key, n), stacked along a leading axis.
    draws = posterior.sample(jax.random.PRNGKey(3), 5)
    assert jax.tree.leaves(draws)[0].shape[0] == 5
