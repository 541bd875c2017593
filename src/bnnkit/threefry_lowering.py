"""JAX's Threefry-2x32 hash compiled straight, without its loop, on CPU, inside the programs
that ask for it: the same bits, a faster sampler iteration.

Every key split, ``fold_in`` and random draw of JAX's default generator is the Threefry-2x32
hash (Salmon, Moraes, Dror & Shaw 2011, "Parallel random numbers: as easy as 1, 2, 3"): 20
rounds of ``x₀ ← x₀ + x₁; x₁ ← (x₁ ⋘ r) ⊕ x₀`` with rotations r cycling through
(13, 15, 26, 6) and (17, 29, 16, 24), the key ``(k₀, k₁, k₀ ⊕ k₁ ⊕ 0x1BD11BDA)`` injected, with
the injection count, after every fourth round. On CPU JAX lowers the 20 rounds as a loop of 5
passes, to keep programs small. Inside a sampler's iteration, which draws and splits keys at
every transition, each of those loops is an XLA ``while`` whose passes the CPU runtime
dispatches one by one: the hash's loop control then costs more than its arithmetic
(``docs/performance.md``, "Threefry's hash without its loop").

:func:`install` registers, for the CPU, a rule that lowers the hash round by round
(:func:`hash_rounds`, as JAX does on other platforms: integer additions, rotations and
exclusive-ors, which XLA fuses into the operations that read them) while a program is lowered
inside :func:`straight`, and as JAX's loop of five passes (:func:`hash_passes`) otherwise.
The run driver lowers inside it the samplers' block programs, every run's initialisation
and the prior check's draws (small programs of key splits and draws, which also compile
faster without the loops). Not every program gains: a variational step drawing float64
noise for several estimators at once did not finish compiling in over half an hour with the
straight rounds (LLVM's loop vectoriser busy all along), which is why the loop stays the
default. Integer arithmetic is exact, so every bit of every key and draw is the same either
way; only the compiled program differs.

Example:
    >>> import jax, numpy as np
    >>> install()
    >>> k0, k1, x0, x1 = (np.uint32(v) for v in (0x13198A2E, 0x03707344, 0x243F6A88, 0x85A308D3))
    >>> with straight():
    ...     words = jax.jit(threefry2x32_p.bind)(k0, k1, x0, x1)
    >>> [hex(int(v)) for v in words]
    ['0xc4923a9c', '0x483df7a0']
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

import numpy as np
from jax import lax
from jax.extend.random import threefry2x32_p
from jax.interpreters import mlir

#: The rotations of the rounds: the first four, then the next four, alternating.
ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
#: The constant of the third key word, k₂ = k₀ ⊕ k₁ ⊕ PARITY (Threefish's key schedule).
PARITY = np.uint32(0x1BD11BDA)


def _round(x0, x1, rotation):
    """One round: ``x₀ ← x₀ + x₁; x₁ ← (x₁ ⋘ r) ⊕ x₀`` (r a uint32)."""
    x0 = x0 + x1
    x1 = lax.shift_left(x1, rotation) | lax.shift_right_logical(x1, np.uint32(32) - rotation)
    return x0, x1 ^ x0


def hash_rounds(key0, key1, x0, x1):
    """Threefry-2x32's 20 rounds on ``(x0, x1)`` under the key ``(key0, key1)``, unrolled.

    Args:
        key0, key1: the key's two uint32 words (broadcast against the counters).
        x0, x1: the counters, uint32 arrays of one shape.

    Returns:
        The two hashed words, uint32 arrays of the counters' shape.

    Example:
        >>> import jax.numpy as jnp
        >>> words = hash_rounds(*(jnp.zeros((), jnp.uint32),) * 4)
        >>> [hex(int(w)) for w in words]
        ['0x6b200159', '0x99ba4efe']
    """
    keys = (key0, key1, key0 ^ key1 ^ PARITY)
    x0, x1 = x0 + keys[0], x1 + keys[1]
    for injection in range(1, 6):
        for rotation in ROTATIONS[(injection - 1) % 2]:
            x0, x1 = _round(x0, x1, np.uint32(rotation))
        x0 = x0 + keys[injection % 3]
        x1 = x1 + keys[(injection + 1) % 3] + np.uint32(injection)
    return x0, x1


def hash_passes(key0, key1, x0, x1):
    """The same hash as :func:`hash_rounds`, as a loop of five passes of four rounds (JAX's
    lowering on CPU): a small program, whose passes run one after the other.

    Example:
        >>> import jax.numpy as jnp
        >>> words = hash_passes(*(jnp.zeros((), jnp.uint32),) * 4)
        >>> [hex(int(w)) for w in words]
        ['0x6b200159', '0x99ba4efe']
    """
    keys = (key0, key1, key0 ^ key1 ^ PARITY)
    rotations = np.asarray(ROTATIONS, np.uint32)

    def one_pass(injection, carry):
        x0, x1, k_first, k_second, k_third = carry
        parity = (injection - 1) % 2
        for r in range(4):
            x0, x1 = _round(x0, x1, lax.dynamic_index_in_dim(rotations[:, r], parity, 0, False))
        # The key words rotate by one at every injection: k₁, k₂ then k₂, k₀, ...
        x0 = x0 + k_second
        x1 = x1 + k_third + injection.astype(np.uint32)
        return x0, x1, k_second, k_third, k_first

    x0, x1 = x0 + keys[0], x1 + keys[1]
    x0, x1, *_ = lax.fori_loop(1, 6, one_pass, (x0, x1, *keys))
    return x0, x1


#: Whether a program lowered now takes :func:`hash_rounds` (inside :func:`straight`).
_STRAIGHT = contextvars.ContextVar("bnnkit_threefry_straight", default=False)
#: The rules: the primitive's operands already have one shape up to broadcasting (its
#: abstract evaluation checks it), which the elementwise operations take as they are.
_ROUNDS = mlir.lower_fun(hash_rounds, multiple_results=True)
_PASSES = mlir.lower_fun(hash_passes, multiple_results=True)


def _lowering(ctx, *operands):
    return (_ROUNDS if _STRAIGHT.get() else _PASSES)(ctx, *operands)


@contextlib.contextmanager
def straight() -> Iterator[None]:
    """Programs lowered in this block (in this thread) hash without the loop, once
    :func:`install` has run. JAX keeps a function's lowering for the shapes it was lowered
    for: a function lowered before, outside the block, keeps its loops (the run driver makes
    its block program anew for each run)."""
    token = _STRAIGHT.set(True)
    try:
        yield
    finally:
        _STRAIGHT.reset(token)


def install() -> None:
    """Register the CPU rule that :func:`straight` switches, in this process (idempotent)."""
    mlir.register_lowering(threefry2x32_p, _lowering, platform="cpu")
