"""Threefry-2x32 lowered round by round or in passes (bnnkit.threefry_lowering) is the same hash.

Integer arithmetic is exact, so the checks are equalities: Random123's known answers for
Threefry-2x32 with 20 rounds, and an independent NumPy transcription of the hash on random
keys and counters (broadcast as JAX's primitive broadcasts them), for both lowerings. That the
samplers' draws keep every bit is the pinned digests' to check (tests/inference/*_pinned.py);
that a run lowers its initialisation, prior check and block program straight, the last two
tests'.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.extend.random import threefry2x32_p

import bnnkit.inference  # noqa: F401  (installs the rule, as every run does)
from bnnkit.threefry_lowering import hash_passes, hash_rounds, straight

# Random123's kat_vectors, threefry2x32_20: (key, counter) -> hashed counter.
KNOWN = [
    ((0x00000000, 0x00000000), (0x00000000, 0x00000000), (0x6B200159, 0x99BA4EFE)),
    ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
    ((0x13198A2E, 0x03707344), (0x243F6A88, 0x85A308D3), (0xC4923A9C, 0x483DF7A0)),
]


def numpy_threefry(key, counter):
    """Threefry-2x32, 20 rounds, in NumPy (the specification's loop, written independently)."""
    k0, k1 = (np.asarray(k, np.uint64) for k in key)
    x0, x1 = (np.asarray(c, np.uint64) for c in counter)
    mask = np.uint64(0xFFFFFFFF)
    k = [k0, k1, k0 ^ k1 ^ np.uint64(0x1BD11BDA)]
    rotations = [13, 15, 26, 6, 17, 29, 16, 24]
    x0, x1 = (x0 + k[0]) & mask, (x1 + k[1]) & mask
    for round_ in range(20):
        r = np.uint64(rotations[round_ % 8])
        x0 = (x0 + x1) & mask
        x1 = (((x1 << r) | (x1 >> (np.uint64(32) - r))) & mask) ^ x0
        if round_ % 4 == 3:
            s = round_ // 4 + 1
            x0 = (x0 + k[s % 3]) & mask
            x1 = (x1 + k[(s + 1) % 3] + np.uint64(s)) & mask
    return x0.astype(np.uint32), x1.astype(np.uint32)


def hashed(straight_rounds: bool, *words):
    """The primitive, compiled with the rule :func:`straight` selects (a new function each
    time, whose lowering JAX has not kept)."""
    function = jax.jit(lambda *w: threefry2x32_p.bind(*w))
    if straight_rounds:
        with straight():
            return function.lower(*words).compile()(*words)
    return function.lower(*words).compile()(*words)


@pytest.mark.parametrize("straight_rounds", [False, True])
@pytest.mark.parametrize("key, counter, expected", KNOWN)
def test_known_answers(key, counter, expected, straight_rounds):
    words = [np.uint32(v) for v in (*key, *counter)]
    assert [int(v) for v in hashed(straight_rounds, *words)] == list(expected)
    assert [int(v) for v in numpy_threefry(key, counter)] == list(expected)


@pytest.mark.parametrize("straight_rounds", [False, True])
def test_random_keys_and_counters_hash_as_the_specification(straight_rounds):
    rng = np.random.default_rng(0)
    key = rng.integers(0, 2**32, size=(2, 64, 1), dtype=np.uint32)
    counter = rng.integers(0, 2**32, size=(2, 64, 33), dtype=np.uint32)
    # The primitive's operands broadcast: a key per row against every row's counters.
    found = hashed(straight_rounds, key[0], key[1], counter[0], counter[1])
    expected = numpy_threefry(key, counter)
    np.testing.assert_array_equal(np.asarray(found[0]), expected[0])
    np.testing.assert_array_equal(np.asarray(found[1]), expected[1])
    words = [jnp.asarray(a) for a in (key[0], key[1], counter[0], counter[1])]
    for eager in (hash_rounds(*words), hash_passes(*words)):
        np.testing.assert_array_equal(np.asarray(eager[1]), expected[1])


def draws():
    """A new function each call: JAX keeps a function's lowering for its shapes, and the rule
    applies to lowerings made after it is chosen."""

    def drawn(key):
        first, second = jax.random.split(key)
        return jax.random.normal(jax.random.fold_in(first, 3), (8,)) + jax.random.uniform(second)

    return drawn


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="the rule is the CPU's")
def test_straight_draws_compile_without_a_loop_and_the_same_bits():
    """Outside :func:`straight` each hash is a ``while`` of five passes, as JAX's own lowering;
    inside it none is, and the draws are the same."""
    key = jax.random.PRNGKey(0)
    looped = jax.jit(draws()).lower(key).compile()
    with straight():
        flat = jax.jit(draws()).lower(key).compile()
    assert looped.as_text().count(" while(") == 4  # the split, the fold_in, each draw's bits
    assert " while(" not in flat.as_text()
    np.testing.assert_array_equal(np.asarray(looped(key)), np.asarray(flat(key)))


def lowered_where(monkeypatch, module) -> list[bool]:
    """For every hash lowered round by round from now on, whether ``module.straight()`` (the
    straight() the module calls) was open in the lowering thread."""
    import contextlib
    import contextvars

    from bnnkit import threefry_lowering

    inside = contextvars.ContextVar("inside", default=False)
    found: list[bool] = []
    rounds, entered = threefry_lowering._ROUNDS, module.straight

    def counted(ctx, *operands):
        found.append(inside.get())
        return rounds(ctx, *operands)

    @contextlib.contextmanager
    def marked():
        token = inside.set(True)
        try:
            with entered():
                yield
        finally:
            inside.reset(token)

    monkeypatch.setattr(threefry_lowering, "_ROUNDS", counted)
    monkeypatch.setattr(module, "straight", marked)
    return found


def test_a_runs_initialisation_and_prior_check_are_lowered_straight(monkeypatch, tmp_path):
    """A run without blocks (SGD) lowers the hashes of its initialisation and of its prior
    check round by round, each inside the straight() of its own module."""
    from bnnkit import prior_check
    from bnnkit.inference import sgd
    from bnnkit.problem import ProblemConfig
    from bnnkit.runs import loop

    in_init, in_check = lowered_where(monkeypatch, loop), []
    check = prior_check.check

    def checked(*args, **kwargs):
        found = lowered_where(monkeypatch, prior_check)
        try:
            return check(*args, **kwargs)
        finally:
            in_check.extend(found)

    monkeypatch.setattr(prior_check, "check", checked)
    loop.run(
        ProblemConfig("yacht_0", "mlp_regression_small", noise_std=0.35),
        sgd.Config(init_step_size=1e-3, num_epochs=1, batch_size=64, seed=11),
        tmp_path / "run",
        progress=False,
    )
    assert any(in_init), "the initialisation's hashes were not lowered inside loop.straight()"
    assert in_check and all(in_check), "the prior check was not lowered inside its straight()"


@pytest.mark.slow
def test_the_block_program_is_lowered_straight(monkeypatch, tmp_path):
    """A sampler run in blocks lowers its block's hashes round by round, inside the block
    driver's straight() (ahead in its thread, or at the first block)."""
    from bnnkit.inference import mclmc
    from bnnkit.problem import ProblemConfig
    from bnnkit.runs import blocks
    from bnnkit.runs.loop import run

    in_block = lowered_where(monkeypatch, blocks)
    run(
        ProblemConfig("yacht_0", "linear", noise_std=0.35),
        mclmc.Config(num_iterations=4, num_burn_in=2, num_chains=2, seed=11),
        tmp_path / "run",
        progress=False,
    )
    assert any(in_block), "no hash of the block program was lowered round by round"
