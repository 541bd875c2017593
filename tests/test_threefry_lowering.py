"""Threefry-2x32 lowered without its loop (bnnkit.threefry_lowering) is the same hash.

Integer arithmetic is exact, so the checks are equalities: Random123's known answers for
Threefry-2x32 with 20 rounds, and an independent NumPy transcription of the hash on random
keys and counters (broadcast as JAX's primitive broadcasts them). That the draws of the
samplers keep every bit is the pinned digests' to check (tests/inference/*_pinned.py).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.extend.random import threefry2x32_p

import bnnkit.inference  # noqa: F401  (installs the lowering, as every run does)
from bnnkit.threefry_lowering import hash_rounds

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


@pytest.mark.parametrize("key, counter, expected", KNOWN)
def test_known_answers(key, counter, expected):
    args = [np.uint32(v) for v in (*key, *counter)]
    compiled = [int(v) for v in jax.jit(threefry2x32_p.bind)(*args)]
    assert compiled == list(expected)
    assert [int(v) for v in numpy_threefry(key, counter)] == list(expected)


def test_random_keys_and_counters_hash_as_the_specification():
    rng = np.random.default_rng(0)
    key = rng.integers(0, 2**32, size=(2, 64, 1), dtype=np.uint32)
    counter = rng.integers(0, 2**32, size=(2, 64, 33), dtype=np.uint32)
    # The primitive's operands broadcast: a key per row against every row's counters.
    hashed = jax.jit(threefry2x32_p.bind)(key[0], key[1], counter[0], counter[1])
    expected = numpy_threefry(key, counter)
    np.testing.assert_array_equal(np.asarray(hashed[0]), expected[0])
    np.testing.assert_array_equal(np.asarray(hashed[1]), expected[1])
    eager = hash_rounds(*(jnp.asarray(a) for a in (key[0], key[1], counter[0], counter[1])))
    np.testing.assert_array_equal(np.asarray(eager[0]), expected[0])


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="the lowering is the CPU's")
def test_draws_compile_without_a_loop():
    """JAX's own lowering on CPU is a ``while`` of five passes; the installed one has none."""

    def draws(key):
        first, second = jax.random.split(key)
        return jax.random.normal(jax.random.fold_in(first, 3), (8,)) + jax.random.uniform(second)

    text = jax.jit(draws).lower(jax.random.PRNGKey(0)).compile().as_text()
    assert " while(" not in text
