"""Is the gradient floor XLA's gradient, or how bnnkit writes it? The vmapped autodiff gradient
of a one-hidden-layer regression MLP against one derived by hand, in the same process.

Both compute, for C chains at once, the log density of a heteroscedastic Gaussian network
(``mean, raw = f(x)``, ``σ = softplus(raw) + 1e-6``) under a Gaussian prior of precision 3,

    log p(θ | D) = Σᵢ [ −½ ((yᵢ − μᵢ)/σᵢ)² − log σᵢ ] − (3/2) ‖θ‖²,

and its gradient; ``autodiff`` is ``jax.vmap(jax.value_and_grad(...))`` over the chains, as
the runs and the profile's floor compute it; ``by hand`` writes the backward pass out, with
every chain's first layer as one matmul of the inputs by the chains' weights side by side and
no transposes of the hidden activations. The script first checks that the two agree within
float32 rounding, then times 20 gradients of every chain in one jitted ``lax.fori_loop`` for
each, taking turns, and prints the medians and their ratio.

    python benchmarks/gradient_by_hand.py [--dataset concrete_0] [--chains 4] [--repeats 20]

4 chains is one CPU device's share of the default reference's 8 on 2 devices.
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

HIDDEN = 50
PRECISION = 3.0
GRADIENTS = 20


def autodiff(x: jax.Array, y: jax.Array):
    """``params -> (value, grads)`` of every chain, by ``jax.value_and_grad`` under ``vmap``."""

    def log_density(params):
        w1, b1, w2, b2 = params
        out = jax.nn.relu(x @ w1 + b1) @ w2 + b2
        std = jax.nn.softplus(out[:, 1]) + 1e-6
        ll = -0.5 * ((y - out[:, 0]) / std) ** 2 - jnp.log(std)
        return ll.sum() - 0.5 * PRECISION * sum((a**2).sum() for a in params)

    return jax.vmap(jax.value_and_grad(log_density))


def by_hand(x: jax.Array, y: jax.Array):
    """The same value and gradient with the backward pass written out (chains first in
    ``params``; the chains' hidden units side by side in the activations)."""
    n, d = x.shape

    def value_and_grad(params):
        w1, b1, w2, b2 = params
        chains = w1.shape[0]
        pre = x @ jnp.transpose(w1, (1, 0, 2)).reshape(d, chains * HIDDEN)
        pre = (pre + b1.reshape(1, -1)).reshape(n, chains, HIDDEN)
        hidden = jnp.maximum(pre, 0.0)
        out = jnp.einsum("nch,chk->nck", hidden, w2) + b2
        mean, raw = out[..., 0], out[..., 1]
        std = jax.nn.softplus(raw) + 1e-6
        z = (y[:, None] - mean) / std
        value = (-0.5 * z**2 - jnp.log(std)).sum(0)
        # d/dμ = z/σ; d/dσ = (z² − 1)/σ; dσ/draw = sigmoid(raw).
        d_out = jnp.stack([z / std, (z**2 - 1.0) / std * jax.nn.sigmoid(raw)], -1)
        d_hidden = jnp.einsum("nck,chk->nch", d_out, w2) * (pre > 0)
        g_w1 = (x.T @ d_hidden.reshape(n, -1)).reshape(d, chains, HIDDEN).transpose(1, 0, 2)
        grads = (
            g_w1 - PRECISION * w1,
            d_hidden.sum(0) - PRECISION * b1,
            jnp.einsum("nch,nck->chk", hidden, d_out) - PRECISION * w2,
            d_out.sum(0) - PRECISION * b2,
        )
        prior = sum((a**2).reshape(chains, -1).sum(1) for a in params)
        return value - 0.5 * PRECISION * prior, grads

    return value_and_grad


def disagreements(x: jax.Array, y: jax.Array, params) -> list[tuple[str, float, float]]:
    """``(name, largest difference, float32 rounding bound)`` between the two, for the value
    and each parameter's gradient at ``params``."""
    (va, ga), (vb, gb) = jax.jit(autodiff(x, y))(params), jax.jit(by_hand(x, y))(params)
    found = []
    # A sum of N float32 terms is within about N·ε of its size (ε: float32's epsilon), the
    # two computing the same terms in other orders; 8x for the products before the sums.
    for name, a, b in [("value", va, vb), *zip(("w1", "b1", "w2", "b2"), ga, gb, strict=True)]:
        scale = float(jnp.abs(a).max()) + 1.0
        tolerance = 8 * x.shape[0] * float(np.finfo(np.float32).eps) * scale
        found.append((name, float(jnp.abs(a - b).max()), tolerance))
    return found


def gradients_in_a_loop(value_and_grad):
    """``GRADIENTS`` gradients of every chain in one jitted loop (each moves the parameters by
    a step too small to matter, so that no gradient is hoisted out of the loop)."""

    @jax.jit
    def run(params):
        def body(_, carry):
            _, grads = value_and_grad(carry)
            return jax.tree.map(lambda p, g: p + 1e-12 * g, carry, grads)

        return jax.lax.fori_loop(0, GRADIENTS, body, params)

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="concrete_0", help="a UCI split, for its shapes")
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    if args.chains < 1 or args.repeats < 1:
        parser.error("--chains and --repeats must be at least 1")
    jax.config.update("jax_num_cpu_devices", 1)
    from bnnkit.data.uci import load

    data = load(args.dataset)
    x, y = jnp.asarray(data.x_train, jnp.float32), jnp.asarray(data.y_train, jnp.float32)
    keys = jax.random.split(jax.random.key(0), 2)
    c, d = args.chains, x.shape[1]
    params = (
        0.3 * jax.random.normal(keys[0], (c, d, HIDDEN)),
        jnp.zeros((c, HIDDEN)),
        0.3 * jax.random.normal(keys[1], (c, HIDDEN, 2)),
        jnp.zeros((c, 2)),
    )
    auto, hand = autodiff(x, y), by_hand(x, y)
    for name, error, tolerance in disagreements(x, y, params):
        if error > tolerance:
            raise SystemExit(f"{name}: the two differ by {error:.3g} > {tolerance:.3g}")
    programs = {"autodiff": gradients_in_a_loop(auto), "by hand": gradients_in_a_loop(hand)}
    for run in programs.values():
        jax.block_until_ready(run(params))
    seconds: dict[str, list[float]] = {name: [] for name in programs}
    for _ in range(args.repeats):  # taking turns, so that a change of load hits both
        for name, run in programs.items():
            start = time.perf_counter()
            jax.block_until_ready(run(params))
            seconds[name].append(time.perf_counter() - start)
    median = {name: float(np.median(found)) for name, found in seconds.items()}
    print(
        f"{args.dataset} ({x.shape[0]} x {d}), {c} chains, {GRADIENTS} gradients each: "
        f"autodiff {1e3 * median['autodiff']:.2f} ms, by hand {1e3 * median['by hand']:.2f} ms, "
        f"by hand / autodiff {median['by hand'] / median['autodiff']:.2f}"
    )


if __name__ == "__main__":
    main()
