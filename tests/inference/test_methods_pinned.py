"""The minibatch methods' results are pinned bit for bit: SGD (and the deep ensemble, which is
SGD's build), SGMCMC's variants, SWAG, IVON and MC dropout.

Each case builds the method on a tiny classification problem with a dropout network (so every
step's model key reaches the model), runs two members vmapped under the members' axis as the
run driver does, for four epochs of three minibatches, and hashes every step's full state and
diagnostics, the last state, and the posterior of the first member's states at the end of each
epoch (its stored arrays and metadata). A digest therefore changes with any change of an
update, of a key's use, of a schedule, of the state's layout or of the posterior.

The digests are of the CPU backend's floating-point results, which depend on the processor's
vector instructions and maker (``tests/processors.py`` says why), so they are kept per
:func:`processor`, as HMC's are; a processor none were kept for skips. To add them, run the
command below from a commit whose digests pass elsewhere::

    .venv/bin/python -c "import sys; sys.path[:0] = ['tests', 'tests/inference']; \\
        import test_methods_pinned as t; \\
        [print(f'    {name!r}: {t.pinned_digest(**case)!r},') for name, case in t.CASES.items()]"
"""

from __future__ import annotations

import hashlib
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bnnkit import likelihoods, models, priors
from bnnkit.inference import dropout, ensemble, ivon, sgd, sgmcmc, swag
from bnnkit.inference.adaptation import MEMBERS
from bnnkit.log_posterior import LogPosterior
from bnnkit.types import Batch
from processors import processor

MODULES = {
    "sgd": sgd,
    "ensemble": ensemble,
    "sgmcmc": sgmcmc,
    "swag": swag,
    "ivon": ivon,
    "dropout": dropout,
}
NUM_DATA, BATCH_SIZE, NUM_EPOCHS, NUM_MEMBERS = 24, 8, 4, 2
STEPS_PER_EPOCH = NUM_DATA // BATCH_SIZE
COMMON = dict(init_step_size=0.05, num_epochs=NUM_EPOCHS, batch_size=BATCH_SIZE)
# Each option of a method's update in at least one case: SGD's and dropout's momentum-free and
# clipped steps, SGMCMC's noises, schedules and preconditioner, SWAG's schedules and wrapping
# ring buffer, IVON's several samples, clipping and given λ.
CASES = {
    "sgd": dict(method="sgd"),
    "sgd-clipped": dict(method="sgd", momentum_decay=0.0, clip_grad_norm=0.01),
    "ensemble": dict(method="ensemble", num_members=NUM_MEMBERS),
    "sgld-rademacher": dict(
        method="sgmcmc", noise="rademacher", num_burn_in=1, final_step_size=0.01
    ),
    "sghmc": dict(method="sgmcmc", momentum_decay=0.9, num_burn_in=1),
    "sghmc-clr": dict(
        method="sgmcmc",
        momentum_decay=0.9,
        step_size_schedule="cyclical",
        cycle_length=1,
        num_burn_in=1,
    ),
    "sghmc-clr-prec": dict(
        method="sgmcmc",
        momentum_decay=0.9,
        step_size_schedule="cyclical",
        cycle_length=1,
        num_burn_in=1,
        preconditioner="rmsprop",
        rmsprop_decay=0.9,
    ),
    # Two slots for five collected iterates: the ring buffer wraps.
    "swag": dict(method="swag", num_burn_in=1, swag_step_size=0.02, collect_every=2, max_rank=2),
    "swag-cyclical": dict(
        method="swag",
        num_burn_in=1,
        step_size_schedule="cyclical",
        cycle_length=1,
        clip_grad_norm=0.01,
    ),
    "ivon": dict(method="ivon"),
    "ivon-samples-clipped": dict(
        method="ivon", ivon_num_samples=2, clip_radius=0.1, ess=10.0, beta2=0.9
    ),
    "dropout": dict(method="dropout"),
    "dropout-clipped": dict(method="dropout", momentum_decay=0.0, clip_grad_norm=0.01),
}
# Made by the code of commit 3cc5edc on an Intel Xeon with AVX-512. The ensemble's is SGD's: its
# build is SGD's, and the members' count is the test's.
INTEL_AVX512 = {
    "sgd": "24266ecc27600d707119955d70247c2f9f0dbfbcbc319e6a600bf943859eba3c",
    "sgd-clipped": "8cf2cf6a509886a031f865e2cda6be0842b585f731f5303a172bf6a6b70e9394",
    "ensemble": "24266ecc27600d707119955d70247c2f9f0dbfbcbc319e6a600bf943859eba3c",
    "sgld-rademacher": "655164350728b1ebb749d61b1b4aa522a3e33034506ad7db335487fe5dd35f1d",
    "sghmc": "7e5050f848fbd23cf21a7f0f29e33f189300aea0d3abb342fa5712d39fa23c7d",
    "sghmc-clr": "10ade7d3078af0ae86b68fc8a1f4a7c94ba83230a5a6f1465badbdd25ea364b5",
    "sghmc-clr-prec": "60474bfa2e0e96a546cb294131be975a5dfc473d495474a22ba3cf99bb330731",
    "swag": "90a2b87db123f0ed5e5be9f99946ee5539f9d259d3e25eead639697678fc9400",
    "swag-cyclical": "c8aff67784e617251d339745baffb72559272aa12e597f941437e8edc0f4d4c1",
    "ivon": "7959b31affa3aaab05c9ca7d9abe23517ec0333e4e44987b5d5cd37ffbcbb102",
    "ivon-samples-clipped": "c9e486df68642422bbc7ddc81b2da08bfa8f6dd5e599e205709077075636f15b",
    "dropout": "2b4ddc977ae7fc38bdc8d2747bca381d661663815f3e6ddab400ec1fb8e9330c",
    "dropout-clipped": "0db04eaa8dbadf030381b3274d5610c95d6b6b642ab665340843a09e8b53cee7",
}
EXPECTED = {("GenuineIntel", "avx512"): INTEL_AVX512}


def _problem() -> tuple[LogPosterior, jax.Array, jax.Array, np.random.Generator]:
    """A 2-50-3 dropout network (p = 0.2) on 24 random examples of 3 classes, at T = 0.8."""
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.normal(size=(NUM_DATA, 2)), jnp.float32)
    y = jnp.asarray(rng.integers(0, 3, NUM_DATA), jnp.int32)
    model = models.get("mlp_regression_small_dropout", num_outputs=3, dropout_rate=0.2)
    lp = LogPosterior(
        model.apply,
        likelihoods.Categorical(3),
        priors.Gaussian(1.0),
        NUM_DATA,
        temperature=0.8,
        stochastic=True,
        dropout_rate=0.2,
    )
    return lp, x, y, rng


def _update(digest, tree) -> None:
    for leaf in jax.tree.leaves(tree):
        digest.update(np.asarray(leaf).tobytes())


def pinned_digest(method: str, **settings) -> str:
    """The sha256 of a short run of ``method`` with ``settings`` (see the module)."""
    module = MODULES[method]
    config = module.Config(**{**COMMON, **settings})
    lp, x, y, rng = _problem()
    built = module.build(lp, config)
    keys = jax.random.split(jax.random.PRNGKey(3), NUM_MEMBERS)
    model = models.get("mlp_regression_small_dropout", num_outputs=3, dropout_rate=0.2)
    params = jax.tree.map(
        lambda s: jnp.asarray(0.5 * rng.normal(size=(NUM_MEMBERS, *s.shape)), s.dtype),
        jax.eval_shape(model.init, keys[0], x[:1]),
    )

    def batch(i: int) -> Batch:
        chunk = slice(BATCH_SIZE * (i % STEPS_PER_EPOCH), BATCH_SIZE * (i % STEPS_PER_EPOCH + 1))
        return Batch(x[chunk], y[chunk])

    state = jax.jit(jax.vmap(lambda k, p: built.init(k, p, batch(0)), axis_name=MEMBERS))(
        keys, params
    )
    step_all = jax.jit(jax.vmap(built.step, in_axes=(0, 0, None), axis_name=MEMBERS))
    digest, kept = hashlib.sha256(), []
    for i in range(NUM_EPOCHS * STEPS_PER_EPOCH):
        step_keys = jax.vmap(lambda k, i=i: jax.random.fold_in(k, i))(keys)
        state, info = step_all(step_keys, state, batch(i))
        _update(digest, (state, info))
        if (i + 1) % STEPS_PER_EPOCH == 0:
            kept.append(jax.tree.map(lambda a: a[0], state))
    _update(digest, state)
    _update(digest, built.position(state))
    posterior = built.posterior(jax.tree.map(lambda *a: jnp.stack(a), *kept))
    for name, array in sorted(posterior.arrays().items()):
        digest.update(name.encode())
        digest.update(np.asarray(array).tobytes())
    digest.update(json.dumps(posterior.meta(), sort_keys=True, default=str).encode())
    return digest.hexdigest()


# One case of each update rule every run; their variants with the slow checks.
EVERY_RUN = ("sgd", "sghmc-clr-prec", "swag", "ivon", "dropout")


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
def test_results_equal_the_pinned_ones(case):
    assert pinned_digest(**CASES[case]) == EXPECTED[processor()][case]
