"""Sample any log density with bnnkit's samplers: the eight-schools hierarchical model.

``bnnkit.sample`` runs HMC or NUTS chains on a log density over any pytree, with the same
chains, keys, adaptation, verdict and run directories as a network posterior.

    python examples/log_density.py            # 4 chains of 600 iterations (seconds)
    python examples/log_density.py --small    # shorter chains: a check that the script runs

It checks what the tutorial states: each sampler's means of mu and tau are the exact
posterior means (computed here by quadrature) within 4 Monte Carlo standard errors, and the
chains written to a run directory are the in-memory ones bit for bit. A run that does not
agree is an error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import jax.numpy as jnp
import numpy as np

import bnnkit

# Eight schools (Rubin 1981): an estimated treatment effect and its standard error per school.
y = jnp.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0])
sigma = jnp.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0])


def log_density(p):
    """Non-centred: mu ~ N(0, 5), tau ~ N+(0, 5) (sampled as log tau), z ~ N(0, 1),
    theta = mu + tau z, y ~ N(theta, sigma). The + log_tau is the Jacobian of tau = exp."""
    tau = jnp.exp(p["log_tau"])
    theta = p["mu"] + tau * p["z"]
    return (
        -0.5 * jnp.sum(((y - theta) / sigma) ** 2)
        - 0.5 * jnp.sum(p["z"] ** 2)
        - 0.5 * (p["mu"] / 5) ** 2
        - 0.5 * (tau / 5) ** 2
        + p["log_tau"]
    )


def exact_means() -> tuple[float, float]:
    """E[mu] and E[tau] without sampling: theta integrates out (y_j ~ N(mu, sigma_j^2 +
    tau^2)), which leaves a 2-d posterior that a fine grid integrates."""
    mu = np.linspace(-30.0, 40.0, 1401)[:, None]
    tau = np.linspace(0.0, 40.0, 2001)[1:][None, :]
    var = np.asarray(sigma)[:, None, None] ** 2 + tau**2
    log_p = (
        -0.5 * (mu / 5) ** 2
        - 0.5 * (tau / 5) ** 2
        + np.sum(-0.5 * (np.asarray(y)[:, None, None] - mu) ** 2 / var - 0.5 * np.log(var), axis=0)
    )
    weight = np.exp(log_p - log_p.max())
    weight /= weight.sum()
    return float((weight * mu).sum()), float((weight * tau).sum())


def main(out: Path, small: bool = False):
    iterations, burn_in = (200, 100) if small else (600, 300)
    mu_exact, tau_exact = exact_means()
    print(f"exact: E[mu] = {mu_exact:.2f}, E[tau] = {tau_exact:.2f}")
    # One starting position per chain: every leaf has a leading axis of 4.
    start = {"mu": jnp.zeros(4), "log_tau": jnp.zeros(4), "z": jnp.zeros((4, 8))}
    samplers = {
        # --adapt mass tunes the step size and a diagonal mass matrix during burn-in;
        # --adapt chees the trajectory length as well; NUTS takes no step or length at all.
        "hmc --adapt mass": bnnkit.HMC(
            step_size=0.1,
            trajectory_len=3.0,
            adapt="mass",
            num_chains=4,
            num_iterations=iterations,
            num_burn_in=burn_in,
        ),
        "hmc --adapt chees": bnnkit.HMC(
            step_size=0.1,
            trajectory_len=3.0,
            adapt="chees",
            num_chains=4,
            num_iterations=iterations,
            num_burn_in=burn_in,
        ),
        "nuts": bnnkit.NUTS(num_chains=4, num_iterations=iterations, num_burn_in=burn_in),
    }
    failed = []
    for label, config in samplers.items():
        # In memory: the kept positions are (chains, samples, ...) arrays.
        chains = bnnkit.sample(log_density, start, config)
        # Per-parameter diagnostics, as ArviZ computes them (tau = exp(log_tau) by itself).
        table = bnnkit.summary(
            {"mu": chains.positions["mu"], "tau": jnp.exp(chains.positions["log_tau"])}
        )
        print(
            f"{label}: E[mu] = {table['mu'].mean:.2f} (mcse {table['mu'].mcse_mean:.2f}), "
            f"E[tau] = {table['tau'].mean:.2f} (mcse {table['tau'].mcse_mean:.2f}), "
            f"verdict: {chains.verdict.outcome}"
        )
        for name, exact in (("mu", mu_exact), ("tau", tau_exact)):
            row = table[name]
            if not abs(row.mean - exact) <= 4 * row.mcse_mean:
                failed.append(
                    f"{label}: E[{name}] = {row.mean:.3f}, exact {exact:.3f}, "
                    f"more than 4 Monte Carlo standard errors ({row.mcse_mean:.3f})"
                )
    print(table.to_markdown())  # the last sampler's summary, every parameter
    if failed:
        sys.exit(
            "log_density.py: the chains do not reproduce the exact posterior means: "
            + "; ".join(failed)
        )

    # Into a run directory that survives a crash: a checkpoint every tenth of the run, and
    # the same chains bit for bit. After a crash, the same call with resume=True continues.
    in_memory = bnnkit.sample(log_density, start, samplers["hmc --adapt mass"])
    config = bnnkit.HMC(
        step_size=0.1,
        trajectory_len=3.0,
        adapt="mass",
        num_chains=4,
        num_iterations=iterations,
        num_burn_in=burn_in,
        checkpoint_every=iterations // 10,
    )
    stored = bnnkit.sample(
        log_density,
        start,
        config,
        run_dir=out / "eight_schools",
        name="eight_schools",
        overwrite=True,
    )
    again = bnnkit.load_chains(out / "eight_schools")  # the same Chains, read back
    for name in start:
        if not (
            np.array_equal(again.positions[name], stored.positions[name])
            and np.array_equal(stored.positions[name], in_memory.positions[name])
        ):
            sys.exit(
                f"log_density.py: the stored chains' {name!r} differ from the in-memory "
                "ones; the run directory should hold them bit for bit"
            )
    return stored


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="short chains (a quick check)")
    parser.add_argument("--out", type=Path, default=Path("runs"), help="folder for the run")
    args = parser.parse_args()
    main(args.out, small=args.small)
