"""JAX's Threefry-2x32 hash compiled straight, without a loop, on CPU: the same bits, faster.

Every key split, ``fold_in`` and random draw of JAX's default generator is the Threefry-2x32
hash (Salmon, Moraes, Dror & Shaw 2011, "Parallel random numbers: as easy as 1, 2, 3"): 20
rounds of ``x₀ ← x₀ + x₁; x₁ ← (x₁ ⋘ r) ⊕ x₀`` with rotations r cycling through
(13, 15, 26, 6) and (17, 29, 16, 24), the key ``(k₀, k₁, k₀ ⊕ k₁ ⊕ 0x1BD11BDA)`` injected, with
the injection count, after every fourth round. On CPU JAX lowers the 20 rounds as a loop of 5
passes (``jax._src.random.threefry2x32``, ``use_rolled_loops=True``), to keep programs small.
Inside a sampler's iteration, which draws and splits keys at every transition, each of those
loops is an XLA ``while`` whose passes the CPU runtime dispatches one by one: the hash's loop
control then costs more than its arithmetic (``docs/performance.md``, "Threefry without its
loop").

:func:`install` registers, for the CPU, the hash written out round by round, as JAX does on
other platforms: integer additions, rotations and exclusive-ors, which XLA fuses into the
operations that read them. Integer arithmetic is exact, so every bit of every key and draw is
the one the loop gives; only the compiled program differs. The lowering is per primitive and
per process, so it applies to all of the process's JAX programs, bnnkit's or not, from the
next one lowered on.

Example:
    >>> import jax, numpy as np
    >>> install()
    >>> k0, k1, x0, x1 = (np.uint32(v) for v in (0x13198A2E, 0x03707344, 0x243F6A88, 0x85A308D3))
    >>> [hex(int(v)) for v in jax.jit(threefry2x32_p.bind)(k0, k1, x0, x1)]
    ['0xc4923a9c', '0x483df7a0']
"""

from __future__ import annotations

import numpy as np
from jax import lax
from jax.extend.random import threefry2x32_p
from jax.interpreters import mlir

#: The rotations of the rounds: the first four, then the next four, alternating.
ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
#: The constant of the third key word, k₂ = k₀ ⊕ k₁ ⊕ PARITY (Threefish's key schedule).
PARITY = np.uint32(0x1BD11BDA)


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
            x0 = x0 + x1
            x1 = lax.shift_left(x1, np.uint32(rotation)) | lax.shift_right_logical(
                x1, np.uint32(32 - rotation)
            )
            x1 = x1 ^ x0
        x0 = x0 + keys[injection % 3]
        x1 = x1 + keys[(injection + 1) % 3] + np.uint32(injection)
    return x0, x1


#: The rule: the primitive's operands already have one shape up to broadcasting (its
#: abstract evaluation checks it), which the elementwise operations take as they are.
_LOWERING = mlir.lower_fun(hash_rounds, multiple_results=True)


def install() -> None:
    """Lower Threefry-2x32 on CPU as :func:`hash_rounds` in this process (idempotent)."""
    mlir.register_lowering(threefry2x32_p, _LOWERING, platform="cpu")
