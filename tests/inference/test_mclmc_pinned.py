"""MCLMC's samples are pinned bit for bit: its tuning (every part of it: step size, variance,
readjustment, autocorrelation) and its sampling, unadjusted and adjusted, with each
preconditioner, on one chain and on two.

The expected digests were produced by running :func:`pinned_digest` of this file with the
interpreter of the version that made them::

    cd <checkout of that version> && .venv/bin/python -c "import sys; \\
        sys.path[:0] = ['<this worktree>/tests', '<this worktree>/tests/inference']; \\
        import test_mclmc_pinned as t; \\
        [print(name, t.pinned_digest(**case)) for name, case in t.CASES.items()]"

The unadjusted cases' (``default``, ``default-one-chain``, ``variance``, ``none``,
``no-retries``) by the MCLMC whose transitions move one flat vector of the parameters and
take a step's first try and its shorter retries (``Config.step_retries``) in one loop, which
compiles the step once (the commit that made them, with these digests: the floating-point
operations are grouped otherwise, so the bits moved; docs/performance.md measures the compile
and shows the reference's verdict and test LL before and after). The adjusted cases', which
neither change touches, by the MCLMC of ``main`` before its kernel and its tuner were split
into modules of their own; every later version reproduces them.

A digest is the sha256 of the bytes of every iteration's positions and diagnostics (the info
fields of :data:`PINNED_INFO`, in that order) and of the last full state (every leaf, in the
state's field order, the tuning's included), so any change of a sample, of a tuned ε, L or
preconditioner, or of the stored state's layout changes it. As HMC's
(``tests/inference/test_hmc_pinned.py``), the digests are the CPU backend's floating-point
results, kept per processor maker and vector set (``tests/processors.py``); a processor none
were kept for skips, saying how to add them.
"""

from __future__ import annotations

import hashlib

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bnnkit import likelihoods, priors
from bnnkit.inference import mclmc
from bnnkit.inference.adaptation import MEMBERS
from bnnkit.log_posterior import LogPosterior
from bnnkit.types import Batch
from processors import processor


class TinyMLP(nn.Module):
    """A nonlinear model small enough to compile in a moment (27 parameters)."""

    @nn.compact
    def __call__(self, x):
        return nn.Dense(3)(jnp.tanh(nn.Dense(4)(x)))


# 24 iterations, 20 of tuning: with the default fractions the step size part is iterations
# 0-14, the variance part 15-16 (the preconditioner and L set at its end), the readjustment 17
# and the autocorrelation part 18-19 (L from it at the end of tuning); 4 kept iterations.
COMMON = dict(num_iterations=24, num_burn_in=20)
CASES = {
    "default": dict(num_chains=2),
    "default-one-chain": dict(num_chains=1),
    "variance": dict(num_chains=2, preconditioner="variance"),
    "none": dict(num_chains=2, preconditioner="none"),
    "no-retries": dict(num_chains=2, step_retries=0),
    "adjusted": dict(num_chains=2, adjusted=True),
    "adjusted-one-chain": dict(num_chains=1, adjusted=True),
    "adjusted-none": dict(num_chains=2, adjusted=True, preconditioner="none"),
}
# Made on an Intel Xeon with AVX-512 (the command in the module docstring).
INTEL_AVX512 = {
    "default": "a73724ec88a500c222efa01d1e596f476f2d8ea817f42a5726ca009c43897b7f",
    "default-one-chain": "77f6a743e0815887ec7afbe72267c351bfcafa9aa703ba9d45ba57a96c277d5f",
    "variance": "cdbe4252fc9c161b6964a354a17c0e5684a4cb3bb65ff161363918fddb2636bf",
    "none": "43a96542ee9c70af338092392f68ce2d18cc96c949faf7761196e4881af7ffb8",
    "no-retries": "a8978aadf8210bb8ddddb49ecb2b1047a94d1f0c2112a2d6e98d0310e2a14c17",
    "adjusted": "a06e966e7eae4cb3b4bb6726c892c60d35af252b2d9bee0f10f35dfac3af950c",
    "adjusted-one-chain": "7c53c9765d3f3ced9335eb4eafe62d15a44a9367a01fae7b2cb04fc9bed261e8",
    "adjusted-none": "b0b1ae27cdb8e7567669842c27898801d95415656f98fc4a9393acd87b53098d",
}
EXPECTED = {("GenuineIntel", "avx512"): INTEL_AVX512}

# Each case compiles a program of its own: the default and adjusted samplers and the variance
# preconditioner are checked with every test run, the other cases with the slow checks.
EVERY_RUN = ("default",)

#: MCLMC's info fields when the digests were made, in their order.
PINNED_INFO = (
    "acceptance_rate",
    "divergent",
    "num_divergent",
    "num_leapfrog",
    "step_size",
    "L",
    "energy_var",
    "log_posterior",
)


def pinned_digest(**settings) -> str:
    """The sha256 of a short run of MCLMC on a tiny classification problem (see the module)."""
    config = mclmc.Config(**{**COMMON, **settings})
    rng = np.random.default_rng(0)
    batch = Batch(
        jnp.asarray(rng.normal(size=(24, 2)), jnp.float32),
        jnp.asarray(rng.integers(0, 3, 24), jnp.int32),
    )
    net = TinyMLP()
    lp = LogPosterior(net.apply, likelihoods.Categorical(3), priors.Gaussian(1.0), 24)
    method = mclmc.build(lp, config)
    keys = jax.random.split(jax.random.PRNGKey(3), config.num_chains)
    params = jax.tree.map(
        lambda s: jnp.asarray(rng.normal(size=(config.num_chains, *s.shape)), s.dtype),
        jax.eval_shape(net.init, keys[0], batch.x[:1]),
    )
    state = jax.jit(jax.vmap(lambda k, p: method.init(k, p, batch), axis_name=MEMBERS))(
        keys, params
    )
    # What the run driver compiles.
    step_all = jax.jit(jax.vmap(method.step, in_axes=(0, 0, None), axis_name=MEMBERS))
    digest = hashlib.sha256()
    for i in range(config.num_iterations):
        state, info = step_all(
            jax.vmap(lambda k, i=i: jax.random.fold_in(k, i))(keys), state, batch
        )
        pinned = [getattr(info, name) for name in PINNED_INFO]
        for leaf in jax.tree.leaves((state.position, pinned)):
            digest.update(np.asarray(leaf).tobytes())
    for leaf in jax.tree.leaves(state):
        digest.update(np.asarray(leaf).tobytes())
    return digest.hexdigest()


@pytest.mark.skipif(
    jax.default_backend() != "cpu",
    reason="the digests are of the CPU backend's floating-point results",
)
@pytest.mark.skipif(
    processor() not in EXPECTED,
    reason=f"no digests are kept for {processor()}: make them with the command in "
    "this module's docstring from a commit whose digests pass elsewhere",
)
@pytest.mark.parametrize(
    "case",
    [
        case if case in EVERY_RUN else pytest.param(case, marks=pytest.mark.slow)
        for case in sorted(CASES)
    ],
)
def test_samples_equal_the_pinned_ones(case):
    assert pinned_digest(**CASES[case]) == EXPECTED[processor()][case]
