"""Cost of one step's standard normal noise for ~5·10⁵ weights on CPU, by generator and transform.

Every variant is an exact N(0, 1) generator (up to float32 rounding of its uniform input); they
differ in where the random bits come from and how they become normals:

- bits: JAX's default ``threefry2x32`` (20 rounds of add-rotate-xor per pair of words, computed
  by XLA's element-wise code), or XLA's ``RngBitGenerator`` through JAX's ``rbg`` /
  ``unsafe_rbg`` key implementations (Philox on CPU), keyed by threefry words of the caller's
  key so that the noise stays a pure function of explicit threefry keys;
- transform: ``jax.random.normal``'s inverse CDF ``√2 erfinv(u)`` of one uniform per normal, or
  Box–Muller ``√(−2 log u₁) (cos 2πu₂, sin 2πu₂)``, two normals per pair of uniforms, with
  XLA's ``sin``/``cos`` or with the polynomial quadrant form that bnnkit adopts
  (:func:`bnnkit.inference._noise.standard_normal`).

Measured on a loaded 2-core EPYC, variants interleaved (provisional): the adopted generator
takes about 0.85× the time of ``jax.random.normal``, as much as threefry's bits alone; ``rbg``
bits are about twice as slow as threefry's on CPU, and XLA's ``sin``/``cos`` cost more than
``erfinv``.

Rows give milliseconds per draw of 478,410 float32 normals (``mlp_bbb_400``'s parameter count),
single and vmapped over 4 keys (ensembles and chains draw under ``vmap``), and the ratio to the
threefry + erfinv baseline measured in the same run.

Usage::

    python benchmarks/normal_draws.py [--size 478410] [--repeats 50]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import jax
import jax.numpy as jnp

from bnnkit.inference import _noise


def rbg_key(key: jax.Array, impl: str) -> jax.Array:
    """An ``impl`` key whose state is four threefry words of ``key``."""
    return jax.random.wrap_key_data(jax.random.bits(key, (4,), jnp.uint32), impl=impl)


def uniform_open(bits: jax.Array) -> jax.Array:
    """(0, 1] from the top 23 bits: never 0, so log is finite."""
    mantissa = (bits >> 9) | jnp.uint32(0x3F800000)
    return 2.0 - jax.lax.bitcast_convert_type(mantissa, jnp.float32)


def box_muller(bits: jax.Array) -> jax.Array:
    half = bits.shape[0] // 2
    u1, u2 = uniform_open(bits[:half]), uniform_open(bits[half:])
    r = jnp.sqrt(-2.0 * jnp.log(u1))
    theta = (2 * jnp.pi) * u2
    return jnp.concatenate([r * jnp.cos(theta), r * jnp.sin(theta)])


def variants(n: int):
    even = n + n % 2
    return {
        "threefry + erfinv (jax.random.normal)": lambda k: jax.random.normal(k, (n,)),
        "threefry + Box-Muller (library sin/cos)": lambda k: box_muller(
            jax.random.bits(k, (even,))
        )[:n],
        "rbg + erfinv": lambda k: jax.random.normal(rbg_key(k, "rbg"), (n,)),
        "unsafe_rbg + erfinv": lambda k: jax.random.normal(rbg_key(k, "unsafe_rbg"), (n,)),
        "rbg + Box-Muller": lambda k: box_muller(jax.random.bits(rbg_key(k, "rbg"), (even,)))[:n],
        "rbg bits only": lambda k: jax.random.bits(rbg_key(k, "rbg"), (n,)),
        "threefry bits only": lambda k: jax.random.bits(k, (n,)),
        "threefry + Box-Muller, polynomial sin/cos (adopted)": lambda k: _noise.standard_normal(
            k, (n,)
        ),
    }


def time_all(fns: dict, key, repeats: int) -> dict[str, float]:
    """Median ms of each function, the variants interleaved round by round so that a changing
    load on a shared machine affects all of them alike."""
    compiled = {name: jax.jit(fn) for name, fn in fns.items()}
    for f in compiled.values():
        jax.block_until_ready(f(key))
    times = {name: [] for name in fns}
    for i in range(repeats):
        k = (
            jax.vmap(jax.random.fold_in, (0, None))(key, i)
            if key.ndim > 1
            else (jax.random.fold_in(key, i))
        )
        for name, f in compiled.items():
            t0 = time.perf_counter()
            jax.block_until_ready(f(k))
            times[name].append(time.perf_counter() - t0)
    return {name: 1e3 * statistics.median(t) for name, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=478_410)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--members", type=int, default=4)
    args = parser.parse_args()
    print(
        f"jax {jax.__version__} on {jax.devices()[0].platform} "
        f"({platform.processor() or platform.machine()}), {args.size:,} float32 normals, "
        f"median of {args.repeats}"
    )
    key = jax.random.PRNGKey(0)
    keys = jax.random.split(key, args.members)
    fns = variants(args.size)
    one = time_all(fns, key, args.repeats)
    many = time_all(
        {name: jax.vmap(fn) for name, fn in fns.items()}, keys, max(args.repeats // 4, 3)
    )
    rows = {name: (one[name], many[name]) for name in fns}
    base = rows["threefry + erfinv (jax.random.normal)"]
    print(f"{'variant':<52} {'ms':>8} {'ratio':>7} {f'vmap {args.members} ms':>12} {'ratio':>7}")
    for name, (one, many) in rows.items():
        print(f"{name:<52} {one:8.2f} {one / base[0]:7.2f} {many:12.2f} {many / base[1]:7.2f}")


if __name__ == "__main__":
    main()
