"""Properties every registered network needs for HMC: shapes, sizes, purity, jit/vmap/grad, x64.

Parameter counts are derived here by hand from the layer shapes, independently of the modules.
"""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bnnkit import likelihoods, priors
from bnnkit.log_posterior import LogPosterior
from bnnkit.models import MODELS, get, num_params
from bnnkit.types import Batch


def dense(n_in: int, n_out: int) -> int:
    return n_in * n_out + n_out


def conv(kernel_elems: int, c_in: int, c_out: int) -> int:
    return kernel_elems * c_in * c_out + c_out


def lenet5_count(channels: int, k: int) -> int:
    # 5×5 convs; 16 maps of 5×5 reach the dense layers for both 28×28 (SAME) and 32×32 (VALID).
    return (
        conv(25, channels, 6)
        + conv(25, 6, 16)
        + dense(16 * 5 * 5, 120)
        + dense(120, 84)
        + dense(84, k)
    )


def resnet20_frn_count(k: int) -> int:
    frn = lambda c: 3 * c  # noqa: E731  (gamma, beta, tau per channel)
    total = conv(9, 3, 16) + frn(16)
    c_in = 16
    for c in (16, 32, 64):
        for block in range(3):
            total += conv(9, c_in, c) + frn(c) + conv(9, c, c) + frn(c)
            if c != c_in:  # projection shortcut
                total += conv(1, c_in, c) + frn(c)
            c_in = c
            del block
    return total + dense(64, k)


def cnn_lstm_count(k: int, vocab: int = 20_000) -> int:
    lstm = 4 * (64 * 128 + 128 * 128 + 128)  # 4 gates: input kernel, recurrent kernel, bias
    return vocab * 128 + conv(5, 128, 64) + lstm + dense(128, k)


def mlp_count(widths: tuple[int, ...]) -> int:
    return sum(dense(a, b) for a, b in itertools.pairwise(widths))


# name -> (example shape, num_outputs, is token input, expected parameter count)
CASES = {
    "lenet5": ((28, 28, 1), 10, False, lenet5_count(1, 10)),
    "resnet20_frn_swish": ((32, 32, 3), 10, False, resnet20_frn_count(10)),
    "resnet20_frn": ((32, 32, 3), 10, False, resnet20_frn_count(10)),
    "cnn_lstm": ((100,), 2, True, cnn_lstm_count(2)),
    "mlp_bbb_400": ((784,), 10, False, mlp_count((784, 400, 400, 10))),
    "mlp_bbb_800": ((784,), 10, False, mlp_count((784, 800, 800, 10))),
    "mlp_bbb_1200": ((784,), 10, False, mlp_count((784, 1200, 1200, 10))),
}
# The three Bayes-by-Backprop MLPs differ only in width: run the expensive checks on one. The
# two ResNets take most of the time (convolutions compile slowly on CPU): with `make test-slow`.
HEAVY = [
    "lenet5",
    pytest.param("resnet20_frn_swish", marks=pytest.mark.slow),
    pytest.param("resnet20_frn", marks=pytest.mark.slow),
    "cnn_lstm",
    "mlp_bbb_400",
]


def built(build, name: str):
    """The session's compiled copy of ``name`` (see conftest.py)."""
    shape, k, tokens, _ = CASES[name]
    return build(name, k, shape, tokens)


def test_new_models_are_registered():
    assert set(CASES) <= set(MODELS)


@pytest.mark.parametrize("name", sorted(CASES))
def test_parameter_count_matches_hand_derivation(name):
    shape, k, tokens, expected = CASES[name]
    model = get(name, k)
    x = jnp.zeros((1, *shape), jnp.int32 if tokens else jnp.float32)
    shapes = jax.eval_shape(model.init, jax.random.PRNGKey(0), x)
    assert num_params(shapes) == expected


def test_documented_parameter_counts():
    # The numbers quoted in the module docstrings and the paper (ResNet-20-FRN ≈ 0.27 M).
    assert resnet20_frn_count(10) == 274_042
    assert lenet5_count(1, 10) == 61_706
    assert lenet5_count(3, 10) == 62_006
    assert cnn_lstm_count(2) == 2_700_098


@pytest.mark.parametrize("name", HEAVY)
def test_output_shape_and_determinism(name, build):
    model, p1, _, x, apply = built(build, name)
    out = apply(p1, x)
    assert out.shape == (x.shape[0], model.num_outputs)
    assert out.dtype == jnp.float32
    np.testing.assert_array_equal(np.asarray(out), np.asarray(apply(p1, x)))
    # Each example's output does not depend on the rest of its batch (no batch statistics).
    np.testing.assert_allclose(apply(p1, x[:1])[0], out[0], rtol=1e-5, atol=1e-5)
    assert not np.allclose(out[0], out[1]), "different inputs should give different outputs"


@pytest.mark.parametrize("name", HEAVY)
def test_likelihood_gradient_is_finite_and_reaches_every_parameter(name, build):
    model, p1, _, x, _ = built(build, name)
    y = jnp.arange(x.shape[0]) % model.num_outputs
    lp = LogPosterior(
        model.apply,
        likelihoods.Categorical(num_classes=model.num_outputs),
        priors.Gaussian(weight_decay=1.0),
        num_data=x.shape[0],
    )
    grad = jax.jit(jax.grad(lp.log_likelihood))
    for g in jax.tree.leaves(grad(p1, Batch(x, y))):
        assert np.all(np.isfinite(g))
    # At init FRN's τ = 0 meets ReLU's kink (relu'(0) = 0), so τ can have no gradient there;
    # away from init every parameter must influence the likelihood.
    rng = np.random.default_rng(3)
    moved = jax.tree.map(lambda a: a + 0.1 * rng.standard_normal(a.shape, np.float32), p1)
    for path, g in jax.tree_util.tree_leaves_with_path(grad(moved, Batch(x, y))):
        assert np.all(np.isfinite(g)), path
        assert np.any(g != 0), f"no gradient reaches {jax.tree_util.keystr(path)}"


@pytest.mark.parametrize("name", HEAVY)
def test_vmap_over_parameter_samples_equals_loop(name, build):
    _, p1, p2, x, apply = built(build, name)
    stacked = jax.tree.map(lambda a, b: jnp.stack([a, b]), p1, p2)
    vmapped = jax.jit(jax.vmap(apply, in_axes=(0, None)))(stacked, x)
    looped = jnp.stack([apply(p1, x), apply(p2, x)])
    assert vmapped.shape == (2, *looped.shape[1:])
    np.testing.assert_allclose(vmapped, looped, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", HEAVY)
def test_float64_agrees_with_float32(name, build):
    model, p1, _, x, apply = built(build, name)
    out32 = np.asarray(apply(p1, x))
    with jax.enable_x64(True):
        p64 = jax.tree.map(lambda a: jnp.asarray(a, jnp.float64), p1)
        x64 = jnp.asarray(x, jnp.int64 if x.dtype.kind == "i" else jnp.float64)

        def total(params):
            out = model.apply(params, x64)
            return jnp.sum(jax.nn.log_softmax(out)[:, 0]), out

        (_, out64), grad64 = jax.jit(jax.value_and_grad(total, has_aux=True))(p64)
        assert out64.dtype == jnp.float64
        for g in jax.tree.leaves(grad64):
            assert g.dtype == jnp.float64 and np.all(np.isfinite(g))
        out64 = np.asarray(out64)
    # float32 keeps ~7 significant digits; through ≤ 20 layers at init the outputs agree to
    # 1e-4 relative to their scale.
    scale = max(1.0, float(np.abs(out64).max()))
    np.testing.assert_allclose(out32, out64, rtol=1e-4, atol=1e-4 * scale)
