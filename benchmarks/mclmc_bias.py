"""Bias of unadjusted MCLMC's second moments on Gaussians, by the tuned energy variance.

Unadjusted MCLMC (``bnnkit.inference.mclmc`` without ``adjusted``) samples a distribution near the
posterior, not the posterior itself. On a Gaussian target ``N(0, diag(σ²))`` the error shows in the
second moments: this script reports the relative error ``E[θᵢ²]/σᵢ² − 1`` of each coordinate, its
mean over the coordinates and the worst coordinate, for several seeds, on

- ``spread``: d = 100, σ log-spaced over 10⁻²..10² (the test's target,
  ``tests/inference/test_mclmc.py``), and
- ``isotropic``: d = 100, σ = 1 (what a perfect preconditioner sees),

at the desired energy variance per dimension ``energy_var_end`` v of each row (the default 0.1,
MILE's, and stricter values down to BlackJAX's 5·10⁻⁴). Each seed runs 8 chains of the test's
settings (1,000 tuning and 2,000 kept iterations of 10 steps), started from exact draws. The
Monte Carlo error of a coordinate's figure is about √(2/ESS) ≈ 0.01-0.03 here, so the spread
between seeds is the sampler's, not noise.

    python benchmarks/mclmc_bias.py [--seeds 5] [--energy-vars 0.1 0.01 0.0005]
"""

from __future__ import annotations

import argparse
import platform
import time

import jax
import jax.numpy as jnp
import numpy as np

from bnnkit.inference import mclmc

NUM_CHAINS = 8
GEOMETRIES = {"spread": (-2.0, 2.0), "isotropic": (0.0, 0.0)}


def relative_errors(scales: jax.Array, config: mclmc.Config, seed: int) -> tuple[np.ndarray, float]:
    """Each coordinate's ``E[θ²]/σ² − 1`` over the kept draws of all chains, and the mean
    energy variance per dimension after tuning."""
    d = scales.shape[0]

    def log_density(params, batch):
        return -0.5 * jnp.sum((params["x"] / scales) ** 2)

    method = mclmc.build(log_density, config)

    def chain(key):
        key_init, key_run = jax.random.split(key)
        state = method.init(key_init, {"x": scales * jax.random.normal(key_init, (d,))}, None)

        def body(state, k):
            state, info = method.step(k, state, None)
            return state, (state.position["x"] ** 2, info.energy_var)

        _, (squares, energy) = jax.lax.scan(
            body, state, jax.random.split(key_run, config.num_iterations)
        )
        kept = slice(config.num_burn_in, None)
        return squares[kept].mean(0), energy[kept].mean()

    squares, energy = jax.jit(jax.vmap(chain))(
        jax.random.split(jax.random.PRNGKey(seed), NUM_CHAINS)
    )
    second = np.asarray(squares, np.float64).mean(0) / np.asarray(scales, np.float64) ** 2
    return second - 1.0, float(np.mean(energy))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--energy-vars", type=float, nargs="+", default=[0.1, 0.01, 0.0005])
    parser.add_argument(
        "--geometries", nargs="+", default=list(GEOMETRIES), choices=list(GEOMETRIES)
    )
    parser.add_argument(
        "--preconditioner", default=mclmc.Config().preconditioner, choices=mclmc.PRECONDITIONERS
    )
    args = parser.parse_args()
    print(
        f"jax {jax.__version__} on {jax.default_backend()} ({platform.machine()}), "
        f"{NUM_CHAINS} chains per seed"
    )
    print(
        f"{'target':<10} {'v':>7} {'seed':>4} {'Var[ΔE]/d':>9} {'mean err':>9} "
        f"{'min err':>8} {'max err':>8} {'seconds':>7}"
    )
    for geometry in args.geometries:
        lo, hi = GEOMETRIES[geometry]
        scales = jnp.logspace(lo, hi, 100)
        for v in args.energy_vars:
            config = mclmc.Config(
                num_iterations=3000,
                num_burn_in=1000,
                energy_var_end=v,
                preconditioner=args.preconditioner,
                energy_var_start=max(0.5, v),
            )
            means, worst = [], []
            for seed in range(args.seeds):
                t0 = time.perf_counter()
                errors, energy = relative_errors(scales, config, seed)
                means.append(errors.mean())
                worst.append(errors[np.argmax(np.abs(errors))])
                print(
                    f"{geometry:<10} {v:7.4f} {seed:4d} {energy:9.4f} {errors.mean():9.3f} "
                    f"{errors.min():8.3f} {errors.max():8.3f} "
                    f"{time.perf_counter() - t0:7.1f}",
                    flush=True,
                )
            print(
                f"{geometry:<10} {v:7.4f}  all: mean error {np.mean(means):.3f} "
                f"(seeds {np.min(means):.3f}..{np.max(means):.3f}), worst coordinate "
                f"{worst[int(np.argmax(np.abs(worst)))]:.3f}"
            )


if __name__ == "__main__":
    main()
