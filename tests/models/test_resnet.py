"""ResNet-20-FRN: the FRN layer against a NumPy reference, and the network's structure."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bnnkit.models import get
from bnnkit.models.resnet import FilterResponseNorm


def frn_reference(x, gamma, beta, tau, eps=1e-6):
    """Singh & Krishnan (2020), eq. 1-2, per example and channel, written with loops."""
    out = np.empty_like(x)
    n, _, _, c = x.shape
    for i in range(n):
        for j in range(c):
            plane = x[i, :, :, j]
            nu2 = np.mean(plane**2)
            y = gamma[j] * plane / np.sqrt(nu2 + eps) + beta[j]
            out[i, :, :, j] = np.maximum(y, tau[j])
    return out


def test_frn_matches_numpy_reference():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32) * 3.0
    gamma, beta, tau = (rng.standard_normal(5).astype(np.float32) for _ in range(3))
    params = {
        "params": {
            "gamma": gamma.reshape(1, 1, 1, 5),
            "beta": beta.reshape(1, 1, 1, 5),
            "tau": tau.reshape(1, 1, 1, 5),
        }
    }
    out = FilterResponseNorm().apply(params, jnp.asarray(x))
    np.testing.assert_allclose(out, frn_reference(x, gamma, beta, tau), rtol=1e-5, atol=1e-5)


def test_frn_init_and_zero_channel():
    frn = FilterResponseNorm()
    x = np.zeros((1, 2, 2, 3), np.float32)
    x[..., 0] = 2.0
    params = frn.init(jax.random.PRNGKey(0), x)
    p = params["params"]
    np.testing.assert_array_equal(p["gamma"], np.ones((1, 1, 1, 3)))
    np.testing.assert_array_equal(p["beta"], np.zeros((1, 1, 1, 3)))
    np.testing.assert_array_equal(p["tau"], np.zeros((1, 1, 1, 3)))
    out = np.asarray(frn.apply(params, x))
    # A constant channel normalises to ≈ 1 (ν² = 4); an all-zero channel stays finite (eps).
    np.testing.assert_allclose(out[..., 0], 1.0, rtol=1e-6)
    np.testing.assert_array_equal(out[..., 1:], 0.0)


def test_frn_keeps_no_batch_state():
    frn = FilterResponseNorm()
    x = jax.random.normal(jax.random.PRNGKey(1), (4, 3, 3, 2))
    variables = frn.init(jax.random.PRNGKey(0), x)
    assert set(variables) == {"params"}
    np.testing.assert_allclose(frn.apply(variables, x)[:1], frn.apply(variables, x[:1]))


def test_resnet_layout():
    model = get("resnet20_frn_swish", 10)
    x = jnp.zeros((1, 32, 32, 3))
    shapes = jax.eval_shape(model.init, jax.random.PRNGKey(0), x)["params"]
    convs = sorted((k for k in shapes if k.startswith("Conv_")), key=lambda k: int(k[5:]))
    frns = [k for k in shapes if k.startswith("FilterResponseNorm_")]
    # 1 stem + 9 blocks × 2 + 2 projection shortcuts; one FRN after each conv; one dense head.
    assert len(convs) == 21 and len(frns) == 21
    assert [k for k in shapes if k.startswith("Dense_")] == ["Dense_0"]
    kernels = [shapes[k]["kernel"].shape for k in convs]
    assert kernels.count((1, 1, 16, 32)) == 1 and kernels.count((1, 1, 32, 64)) == 1
    assert kernels[0] == (3, 3, 3, 16)
    assert sum(s == (3, 3, 64, 64) for s in kernels) == 5
    assert shapes["Dense_0"]["kernel"].shape == (64, 10)


@pytest.mark.slow
def test_he_normal_initialisation(build):
    params = build("resnet20_frn", 10, (32, 32, 3), False).p1["params"]
    biggest = max(
        (k for k in params if k.startswith("Conv_")), key=lambda k: params[k]["kernel"].size
    )
    kernel = np.asarray(params[biggest]["kernel"])  # 3×3×64×64: fan_in = 576
    np.testing.assert_allclose(kernel.std(), np.sqrt(2.0 / 576), rtol=0.05)
    np.testing.assert_array_equal(params[biggest]["bias"], 0.0)


@pytest.mark.slow  # two ResNet-20s built and run on the CPU
def test_swish_and_relu_variants_differ_only_in_activation(build):
    relu = build("resnet20_frn", 10, (32, 32, 3), False)
    swish = build("resnet20_frn_swish", 10, (32, 32, 3), False)
    # Same parameter tree, so the same samples can be read by either network.
    assert jax.tree.structure(relu.p1) == jax.tree.structure(swish.p1)
    a = relu.apply(relu.p1, relu.x)
    b = swish.apply(relu.p1, relu.x)
    assert np.all(np.isfinite(a)) and np.all(np.isfinite(b))
    assert not np.allclose(a, b)
