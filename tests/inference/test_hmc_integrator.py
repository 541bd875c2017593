"""HMC's host-driven leapfrog loop gives the in-loop integrator's samples, and auto picks it
for convolutional models on CPU only."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bnnkit import likelihoods, priors
from bnnkit.inference import hmc
from bnnkit.inference.adaptation import MEMBERS
from bnnkit.log_posterior import LogPosterior
from bnnkit.models import get
from bnnkit.types import Batch


class TinyConv(nn.Module):
    """The smallest model with what LeNet-5 has: convolution, ReLU, pooling, dense."""

    @nn.compact
    def __call__(self, x):
        x = nn.relu(nn.Conv(2, kernel_size=(3, 3), padding="VALID")(x))
        x = nn.max_pool(x, window_shape=(2, 2), strides=(2, 2))
        return nn.Dense(3)(x.reshape((x.shape[0], -1)))


def tiny_conv_problem(n: int = 16):
    # NumPy draws: each eager jax.random call would compile a kernel of its own.
    rng = np.random.default_rng(0)
    batch = Batch(
        jnp.asarray(rng.normal(size=(n, 6, 6, 1)), jnp.float32),
        jnp.asarray(rng.integers(0, 3, n), jnp.int32),
    )
    net = TinyConv()
    lp = LogPosterior(net.apply, likelihoods.Categorical(3), priors.Gaussian(1.0), n)
    return net, lp, batch


def run_members(step_all, state, keys, num_iterations):
    states, infos = [], []
    for i in range(num_iterations):
        state, info = step_all(jax.vmap(lambda k, i=i: jax.random.fold_in(k, i))(keys), state)
        states.append(state)
        infos.append(info)
    return jax.device_get((states, infos))


@pytest.mark.slow
@pytest.mark.parametrize(
    "adapt",
    [
        "none",
        pytest.param("step", marks=pytest.mark.slow),
        pytest.param("chees", marks=pytest.mark.slow),
    ],
)
def test_host_loop_gives_the_in_loop_samples_on_a_conv_model(adapt):
    net, lp, batch = tiny_conv_problem()
    # "none": two chains with step sizes apart, so their numbers of leapfrog steps differ and
    # the host loop must hold the shorter trajectory's end as the vmapped in-loop one does.
    # "step" adds the adaptation; "chees" pools statistics across the chains every iteration.
    config = hmc.Config(
        step_size=0.05,
        trajectory_len=0.3,
        num_iterations=4,
        num_burn_in=3,
        num_chains=2,
        adapt=adapt,
        integrator="host",
    )
    method = hmc.build(lp, config)
    keys = jax.random.split(jax.random.PRNGKey(1), config.num_chains)
    # Standard normal parameters of the model's shapes: cheaper than compiling its initialiser.
    rng = np.random.default_rng(1)
    params = jax.tree.map(
        lambda s: jnp.asarray(rng.normal(size=(2, *s.shape)), s.dtype),
        jax.eval_shape(net.init, keys[0], batch.x[:1]),
    )
    state = jax.jit(jax.vmap(lambda k, p: method.init(k, p, batch), axis_name=MEMBERS))(
        keys, params
    )
    if adapt == "none":  # 6 and 10 leapfrog steps
        state = state._replace(step_size=jnp.asarray([0.05, 0.03]))
    in_loop = jax.jit(jax.vmap(method.step, in_axes=(0, 0, None), axis_name=MEMBERS))
    scan_states, scan_infos = run_members(
        lambda k, s: in_loop(k, s, batch), state, keys, config.num_iterations
    )
    host_states, host_infos = run_members(
        lambda k, s: method.step_members(k, s, batch), state, keys, config.num_iterations
    )
    steps = np.array([info.num_leapfrog for info in scan_infos])
    if adapt == "none":  # the given step sizes; adapted ones need not part in 4 iterations
        assert np.any(steps[:, 0] != steps[:, 1]), steps
    # Both compute the same operations in the same order. XLA:CPU may still compile a
    # convolution's gradient differently inside the scan than as a program of its own (on an
    # AVX2-only processor one differs by an ulp), so floats are compared to a rounding bound:
    # ≤ 40 leapfrog steps, each adding an ulp or two of float32 rounding (ε = 1.2e-7) that a
    # trajectory of length 0.3 on this model grows by a factor of order one, stay far below
    # 1e-5 of each array's largest magnitude (a rounding error is relative to the numbers
    # summed, not to a component that happens to be near 0); a structural difference (a
    # momentum drawn from another key, a step too many or too few) moves positions by the
    # step size, 0.03-0.05. The discrete outcomes (steps taken, accepted, divergent) must
    # agree exactly. ChEES's criterion is a difference of squared distances from the chains'
    # mean that nearly cancel, so it hands such rounding on to ε and τ enlarged by the
    # cancellation (2.5e-4 relative in τ after 3 iterations, measured on an AVX2 processor):
    # there the bound is 1e-3, still below a structural difference, and ChEES's own Adam
    # moments (squares of that cancelling gradient, ~1e-7) are left out: the samples and every
    # diagnostic, ε and τ included, are compared.
    bound = 1e-3 if adapt == "chees" else 1e-5

    def compared(states, infos):
        if adapt == "chees":
            return [s.position for s in states], infos
        return states, infos

    for got, want in zip(
        jax.tree.leaves(compared(host_states, host_infos)),
        jax.tree.leaves(compared(scan_states, scan_infos)),
        strict=True,
    ):
        want = np.asarray(want)
        if np.issubdtype(want.dtype, np.floating):
            scale = float(np.max(np.abs(want), initial=0.0))
            np.testing.assert_allclose(got, want, rtol=0, atol=bound * scale)
        else:
            np.testing.assert_array_equal(got, want)


def test_auto_picks_the_host_loop_for_a_conv_model_on_cpu_only():
    net, lp, batch = tiny_conv_problem()
    # The choice reads only the traced computation: shapes suffice.
    params = jax.eval_shape(net.init, jax.random.PRNGKey(0), batch.x[:1])
    mlp = get("mlp_classification", num_outputs=3)
    flat = Batch(batch.x.reshape(len(batch.x), -1), batch.y)
    mlp_lp = LogPosterior(mlp.apply, likelihoods.Categorical(3), priors.Gaussian(1.0), 16)
    mlp_params = jax.eval_shape(mlp.init, jax.random.PRNGKey(0), flat.x[:1])
    auto = hmc.Config(step_size=0.1, trajectory_len=1.0)
    on_cpu = jax.default_backend() == "cpu"
    assert hmc.uses_host_loop(auto, lp, params, batch) == on_cpu
    assert not hmc.uses_host_loop(auto, mlp_lp, mlp_params, flat)
    # A forced choice holds for either model.
    for integrator, host in (("host", True), ("scan", False)):
        forced = hmc.Config(step_size=0.1, trajectory_len=1.0, integrator=integrator)
        assert hmc.uses_host_loop(forced, mlp_lp, mlp_params, flat) == host
        assert hmc.uses_host_loop(forced, lp, params, batch) == host
    assert (
        hmc.build(
            mlp_lp, hmc.Config(step_size=0.1, trajectory_len=1.0, integrator="scan")
        ).step_members
        is None
    )


def test_unknown_integrator_is_a_config_error():
    from bnnkit.errors import ConfigError

    with pytest.raises(ConfigError, match="--integrator"):
        hmc.Config(step_size=0.1, trajectory_len=1.0, integrator="loop")


@pytest.mark.slow
def test_one_chain_host_loop_gives_the_in_loop_samples_to_rounding():
    # One chain takes the unvmapped leapfrog step (faster for convolutions on XLA:CPU). XLA
    # orders that convolution's sums differently from the vmapped one inside the loop, so the
    # two agree to rounding, not to the bit. In float64 rounding is ~1e-16 per operation: 4
    # iterations of at most 6 leapfrog steps cannot amplify it to 1e-9, while any logic slip
    # (another key, a step too many or too few, a lost acceptance) moves the chain by far more.
    with jax.enable_x64(True):
        net, lp, batch = tiny_conv_problem()
        batch = Batch(batch.x.astype(jnp.float64), batch.y)
        config = hmc.Config(
            step_size=0.05,
            trajectory_len=0.3,
            num_iterations=4,
            num_burn_in=3,
            num_chains=1,
            adapt="step",
            integrator="host",
        )
        method = hmc.build(lp, config)
        keys = jax.random.split(jax.random.PRNGKey(2), 1)
        rng = np.random.default_rng(2)
        params = jax.tree.map(
            lambda s: jnp.asarray(rng.normal(size=(1, *s.shape))),
            jax.eval_shape(net.init, keys[0], batch.x[:1]),
        )
        state = jax.jit(jax.vmap(lambda k, p: method.init(k, p, batch), axis_name=MEMBERS))(
            keys, params
        )
        in_loop = jax.jit(jax.vmap(method.step, in_axes=(0, 0, None), axis_name=MEMBERS))
        scan_states, scan_infos = run_members(
            lambda k, s: in_loop(k, s, batch), state, keys, config.num_iterations
        )
        host_states, host_infos = run_members(
            lambda k, s: method.step_members(k, s, batch), state, keys, config.num_iterations
        )
    assert all(int(info.num_leapfrog[0]) > 1 for info in host_infos)
    assert [bool(i.accepted[0]) for i in host_infos] == [bool(i.accepted[0]) for i in scan_infos]
    assert host_states[-1].position["params"]["Dense_0"]["kernel"].dtype == np.float64
    for got, want in zip(
        jax.tree.leaves((host_states, host_infos)),
        jax.tree.leaves((scan_states, scan_infos)),
        strict=True,
    ):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
