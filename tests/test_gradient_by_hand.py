"""The hand-derived gradient of ``benchmarks/gradient_by_hand.py`` is the autodiff one: its
timing compares two computations of the same numbers only if they agree."""

import jax
import jax.numpy as jnp
import pytest

# A benchmark's own check, not the library's: it runs with the slow checks.
pytestmark = pytest.mark.slow


def _problem(chains: int = 3, n: int = 40, d: int = 5):
    keys = jax.random.split(jax.random.key(1), 4)
    x = jax.random.normal(keys[0], (n, d))
    y = jax.random.normal(keys[1], (n,))
    hidden = 50
    params = (
        0.3 * jax.random.normal(keys[2], (chains, d, hidden)),
        0.1 * jnp.ones((chains, hidden)),
        0.3 * jax.random.normal(keys[3], (chains, hidden, 2)),
        jnp.full((chains, 2), 0.2),
    )
    return x, y, params


def test_by_hand_agrees_with_autodiff_within_float32_rounding(benchmark_script):
    bench = benchmark_script("gradient_by_hand")
    x, y, params = _problem()
    found = bench.disagreements(x, y, params)
    assert [name for name, _, _ in found] == ["value", "w1", "b1", "w2", "b2"]
    # The bound is the benchmark's own (N·ε of each result's size, 8x, from float32 rounding
    # of sums of N terms); the next test shows that it tells a wrong gradient apart.
    assert all(error <= tolerance for _, error, tolerance in found), found


def test_a_wrong_gradient_is_told_apart(benchmark_script, monkeypatch):
    bench = benchmark_script("gradient_by_hand")
    x, y, params = _problem()
    # The prior's gradient taken out of the hand-derived one: the check must see it.
    right = bench.by_hand

    def wrong(x, y):
        value_and_grad = right(x, y)

        def broken(p):
            value, grads = value_and_grad(p)
            return value, tuple(g + bench.PRECISION * a for g, a in zip(grads, p, strict=True))

        return broken

    monkeypatch.setattr(bench, "by_hand", wrong)
    found = bench.disagreements(x, y, params)
    assert any(error > tolerance for _, error, tolerance in found), found
