"""HMC's samples are pinned bit for bit: every adaptation mode, both leapfrog loops (and
NUTS's, which shares Stan's windows with HMC's ``"mass"`` mode).

The expected digests (except where noted at them) were produced by the HMC of ``main`` before
its kernel was taken apart
into module-level pieces (``inference/hmc.py``, ``nuts.py``, ``adaptation.py``,
``host_leapfrog.py``), by
running :func:`pinned_digest` of this file with that version's own interpreter::

    cd <checkout of that version> && .venv/bin/python -c "import sys; \\
        sys.path[:0] = ['<this worktree>/tests/inference']; import test_hmc_pinned as t; \\
        [print(name, t.pinned_digest(**case)) for name, case in t.CASES.items()]"

A digest is the sha256 of the bytes of every iteration's positions and diagnostics and of the
last full state (every leaf, in the state's field order), so any change of a sample, of a
tuned ε, τ or M⁻¹, or of the stored state's layout changes it. The diagnostics hashed are
the info fields the digests were made with (:data:`PINNED_INFO`); a field added since (HMC's
``capped``) is a new diagnostic, not a change of the samples, and is tested where it is made.
Floating-point results are the CPU backend's (jax 0.10.2, XLA:CPU on x86-64), and XLA:CPU
vectorises for the widest vector instructions the processor has, so a sum rounds differently on a
processor with AVX-512 than on one with AVX2 only: the digests are kept per instruction set
(``tests/processors.py``'s ``vector_isa``) and the test runs on the CPU backend of an x86-64
processor whose set has them. The modes that search a first step size also round differently on
an Intel and an AMD processor of the same set (LLVM tunes XLA:CPU's code to the processor it runs
on), so the digests are kept per maker and set (:func:`processor`); a processor none were kept for
skips, saying how to add them. On an AVX2-only processor, the code before the kernel was taken
apart gives the same digests as today's for "none", "step", "step-host-one-chain" and
"step-scan-no-mh" (checked by running the command above there); the modes whose first step-size
search changed since ("mass", "chees", "nuts", "auto") are pinned from today's code, to catch any
later change. The Intel AVX-512 digests were made the same way, by the code of commit 718c49e (the
command above, on an Intel Xeon with AVX-512), whose AMD AVX-512 digests of the searching modes
they do not share.
"""

from __future__ import annotations

import hashlib

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bnnkit import likelihoods, priors
from bnnkit.inference import hmc, nuts
from bnnkit.inference.adaptation import MEMBERS
from bnnkit.log_posterior import LogPosterior
from bnnkit.types import Batch
from processors import processor


class TinyMLP(nn.Module):
    """A nonlinear model small enough to compile in a moment."""

    @nn.compact
    def __call__(self, x):
        return nn.Dense(3)(jnp.tanh(nn.Dense(4)(x)))


# 30 iterations, 26 of burn-in: long enough for one of Stan's slow windows to close (10 fast,
# 5 slow, 10 fast at the end, scaled by mass_windows.window_schedule), so M⁻¹ changes in "mass"
# and "chees", and the paper mode's dual averaging restarts at iteration 13.
COMMON = dict(
    step_size=0.05, trajectory_len=0.3, num_iterations=30, num_burn_in=26, max_num_leapfrog_steps=20
)
CASES = {
    **{
        f"{adapt}-{integrator}": dict(adapt=adapt, integrator=integrator, num_chains=2)
        for adapt in ("none", "step", "mass", "chees")
        for integrator in ("scan", "host")
    },
    # One chain's host loop runs its leapfrog step unvmapped (another program than the scan's).
    "step-host-one-chain": dict(adapt="step", integrator="host", num_chains=1),
    "mass-host-one-chain": dict(adapt="mass", integrator="host", num_chains=1),
    # bnn_hmc's uncorrected burn-in.
    "step-scan-no-mh": dict(adapt="step", integrator="scan", num_chains=2, mh_during_burn_in=False),
    "nuts": dict(method="nuts", num_chains=2, max_tree_depth=4),
    # The default: NUTS during burn-in (its trees shallow until the slow window closes), τ
    # estimated from them, then jittered static HMC.
    **{
        f"auto-{integrator}": dict(
            adapt="auto", integrator=integrator, num_chains=2, step_size=None, trajectory_len=None
        )
        for integrator in ("scan", "host")
    },
}
# With two chains both loops give the same bits (tests/inference/test_hmc_integrator.py).
# The modes that search a first step size ("mass", "chees", "nuts", "auto") since the search
# returns the largest ε seen to accept rather than the first one past the target
# (step_size_search.reasonable_step_size).
AVX512 = {
    "none-scan": "fb26ca90b16e86fd4ecab476863137ff43406c64e8ecd5c9680b90e00b419b17",
    "none-host": "fb26ca90b16e86fd4ecab476863137ff43406c64e8ecd5c9680b90e00b419b17",
    "step-scan": "f91e088c7d86667a61bbea456e9ac8a63754fbfb73e1e3df0a5e1603647687d2",
    "step-host": "f91e088c7d86667a61bbea456e9ac8a63754fbfb73e1e3df0a5e1603647687d2",
    "mass-scan": "dfb10c2c81dbf835d111c38bef09034f3e8bb6a3a2f32d17cd66ad62c65c6d7a",
    "mass-host": "dfb10c2c81dbf835d111c38bef09034f3e8bb6a3a2f32d17cd66ad62c65c6d7a",
    "chees-scan": "bcc5637e9b73870b210b6c2417c3538662971f60727f6276e46d25cdbde54a38",
    "chees-host": "bcc5637e9b73870b210b6c2417c3538662971f60727f6276e46d25cdbde54a38",
    "step-host-one-chain": "536764ebd94c4bfcf99525f9385faa8ad1e70b88e1e52ccd9a141db8a5cd696e",
    "mass-host-one-chain": "c748c1aa604618b5f3409dfb0f9c39a1c0051f67437a92e52d69a07e17a03117",
    "step-scan-no-mh": "09b940640bbc0d9a0afe39a8006d3c37063268a742e2d3c949c2a0e4063aea57",
    # Since NUTS searches each chain's first step size (from its own key) instead of starting
    # every chain at the given one.
    "nuts": "0a32b590323c960bd55f39d2709950e5d44ca6fe2d43d1e95118d6475d4e304b",
    "auto-scan": "b8e9d08631ab501866f87aee8cbab6dc91045bbde2f1140f621a5b708733d478",
    "auto-host": "b8e9d08631ab501866f87aee8cbab6dc91045bbde2f1140f621a5b708733d478",
}
AVX2 = {
    "none-scan": "f80e8b8231de3c52b61bb13899b9d222cd796038a19c8c1154bf1508d87bb84d",
    "none-host": "f80e8b8231de3c52b61bb13899b9d222cd796038a19c8c1154bf1508d87bb84d",
    "step-scan": "edd4d87308d0742ef5a9ee55313998947a925438f1e9b450d3a94557d4c6035c",
    "step-host": "edd4d87308d0742ef5a9ee55313998947a925438f1e9b450d3a94557d4c6035c",
    "mass-scan": "b318179c6d89c35e10535b3eb1c50cf2108daf4c72c9a2389aef4cbd5628239e",
    "mass-host": "b318179c6d89c35e10535b3eb1c50cf2108daf4c72c9a2389aef4cbd5628239e",
    "chees-scan": "2ce78713770abfaecb47c2722308cbd8d29d5fe48114e794c663ebda7be39317",
    "chees-host": "2ce78713770abfaecb47c2722308cbd8d29d5fe48114e794c663ebda7be39317",
    "step-host-one-chain": "8946331ba10740dc561360885e13d18358afdb990ccb5d1d9a4f24ca6cd310fd",
    "mass-host-one-chain": "bb9ea8ba299c814920382d236fa736d4868f632c987f51eff541c8f4a43b3733",
    "step-scan-no-mh": "77c6cf547e4ca10bfc4bc645a94ba3e56e59ba9f43a162c33ba61c82a3beb6be",
    "nuts": "3f19119f888aa0c7f538d606ee3730eaeff3b2dd8a3c4ce986530a1c705a8f58",
    "auto-scan": "1c51dead3b3d74019b312dfebd89f22aa63913555450217252b7f415055653c1",
    "auto-host": "1c51dead3b3d74019b312dfebd89f22aa63913555450217252b7f415055653c1",
}
INTEL_AVX512 = {
    "none-scan": "fb26ca90b16e86fd4ecab476863137ff43406c64e8ecd5c9680b90e00b419b17",
    "none-host": "fb26ca90b16e86fd4ecab476863137ff43406c64e8ecd5c9680b90e00b419b17",
    "step-scan": "f91e088c7d86667a61bbea456e9ac8a63754fbfb73e1e3df0a5e1603647687d2",
    "step-host": "f91e088c7d86667a61bbea456e9ac8a63754fbfb73e1e3df0a5e1603647687d2",
    "mass-scan": "9113fed48a90d3e2b79d2c1dc021a3f8352eee707ca23917c44b19d87a065494",
    "mass-host": "9113fed48a90d3e2b79d2c1dc021a3f8352eee707ca23917c44b19d87a065494",
    "chees-scan": "305d3b6bc45ba1d6eb4e3a8dd2ea6f9636c719edecf80bd84024b18ff65c04a0",
    "chees-host": "305d3b6bc45ba1d6eb4e3a8dd2ea6f9636c719edecf80bd84024b18ff65c04a0",
    "step-host-one-chain": "536764ebd94c4bfcf99525f9385faa8ad1e70b88e1e52ccd9a141db8a5cd696e",
    "mass-host-one-chain": "312ea6c716fa536f3c1653cb0dd9d5a5daf152b89c112a8c3644279420d7e220",
    "step-scan-no-mh": "09b940640bbc0d9a0afe39a8006d3c37063268a742e2d3c949c2a0e4063aea57",
    "nuts": "981f55cb509514ba37262d180d0f4114f41218f403d961bf32e77be51622fd4f",
    "auto-scan": "9a86100127ae22e33f57876d358dba36ea14b2acfa0d7df2737d5edc8635223b",
    "auto-host": "9a86100127ae22e33f57876d358dba36ea14b2acfa0d7df2737d5edc8635223b",
}
# The AVX-512 and AVX2 digests above were made on AMD EPYC processors.
EXPECTED = {
    ("AuthenticAMD", "avx512"): AVX512,
    ("AuthenticAMD", "avx2"): AVX2,
    ("GenuineIntel", "avx512"): INTEL_AVX512,
}


#: The info fields of each sampler when the digests were made, in their order.
PINNED_INFO = {
    "hmc": (
        "acceptance_rate",
        "accepted",
        "divergent",
        "num_leapfrog",
        "step_size",
        "trajectory_len",
        "log_posterior",
    ),
    "nuts": (
        "acceptance_rate",
        "divergent",
        "num_leapfrog",
        "tree_depth",
        "step_size",
        "log_posterior",
    ),
}


def pinned_digest(method: str = "hmc", **settings) -> str:
    """The sha256 of a short run of HMC (or NUTS) on a tiny classification problem (see the
    module)."""
    if method == "nuts":
        config = nuts.Config(
            step_size=COMMON["step_size"], num_iterations=30, num_burn_in=26, **settings
        )
    else:
        config = hmc.Config(**{**COMMON, **settings})
    rng = np.random.default_rng(0)
    batch = Batch(
        jnp.asarray(rng.normal(size=(24, 2)), jnp.float32),
        jnp.asarray(rng.integers(0, 3, 24), jnp.int32),
    )
    net = TinyMLP()
    lp = LogPosterior(net.apply, likelihoods.Categorical(3), priors.Gaussian(1.0), 24)
    method = {"hmc": hmc, "nuts": nuts}[config.METHOD].build(lp, config)
    keys = jax.random.split(jax.random.PRNGKey(3), config.num_chains)
    params = jax.tree.map(
        lambda s: jnp.asarray(rng.normal(size=(config.num_chains, *s.shape)), s.dtype),
        jax.eval_shape(net.init, keys[0], batch.x[:1]),
    )
    state = jax.jit(jax.vmap(lambda k, p: method.init(k, p, batch), axis_name=MEMBERS))(
        keys, params
    )
    if getattr(config, "integrator", "scan") == "host":
        step_all = method.step_members
    else:  # what the run driver compiles
        step_all = jax.jit(jax.vmap(method.step, in_axes=(0, 0, None), axis_name=MEMBERS))
    digest = hashlib.sha256()
    for i in range(config.num_iterations):
        state, info = step_all(
            jax.vmap(lambda k, i=i: jax.random.fold_in(k, i))(keys), state, batch
        )
        pinned = [getattr(info, name) for name in PINNED_INFO[config.METHOD]]
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
# A two-chain host loop gives its scan's bits (tests/inference/test_hmc_integrator.py): its
# digests are checked with the slow checks, the scan's with every test run.
@pytest.mark.parametrize(
    "case",
    [
        # NUTS's digest with the slow checks, as NUTS's other runs.
        pytest.param(case, marks=pytest.mark.slow)
        if case.endswith("-host") or case == "nuts"
        else case
        for case in sorted(CASES)
    ],
)
def test_samples_equal_the_pinned_ones(case):
    assert pinned_digest(**CASES[case]) == EXPECTED[processor()][case]
