"""Seconds per epoch of a plain PyTorch Bayes-by-Backprop loop: the reference for vi_epoch.py.

The same setting as ``benchmarks/vi_epoch.py``: MLP 784-400-400-10 (478,410 weights and
biases) on 60,000 MNIST-shaped random inputs, batch 128 (468 steps, the last incomplete batch
dropped), Blundell's weight noise (one ``W = μ + softplus(ρ) ε`` per step, ``torch.randn``),
the closed-form KL to a N(0, 1) prior spread uniformly over the minibatches, and Adam at 1e-3.
Written as one would by hand in PyTorch (``F.linear`` on sampled weights, autograd, a fresh
permutation each epoch), with ``torch.set_num_threads`` set to the cores the process may use,
which is what XLA's CPU backend uses too. ``--device cuda`` runs it on the GPU instead (the
reference when ``vi_epoch.py`` runs JAX on a GPU), synchronising before each clock read.

torch is not a dependency of bnnkit: without it this prints a note and exits 0.

Usage::

    python benchmarks/torch_bbb.py [--repeats 3] [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import itertools
import math
import statistics
import time

from bnnkit.cpu_devices import usable_cores

try:
    import torch
    import torch.nn.functional as F  # noqa: N812
except ImportError:  # the benchmark is optional
    torch = None

SIZES = (784, 400, 400, 10)


def make_layers(sigma_init: float = 1e-3, device: str = "cpu"):
    gen = torch.Generator().manual_seed(0)
    rho0 = math.log(math.expm1(sigma_init))
    layers = []
    for fan_in, fan_out in itertools.pairwise(SIZES):
        w = (torch.randn(fan_out, fan_in, generator=gen) / math.sqrt(fan_in)).to(device)
        b = torch.zeros(fan_out, device=device)
        layers.append(
            [t.requires_grad_() for t in (w, torch.full_like(w, rho0), b, torch.full_like(b, rho0))]
        )
    return layers


def make_epoch(num_train: int, batch_size: int, device: str = "cpu"):
    """``epoch(x, y)``: one pass of Bayes by Backprop over shuffled minibatches."""
    layers = make_layers(device=device)
    opt = torch.optim.Adam([t for layer in layers for t in layer], lr=1e-3)
    steps = num_train // batch_size

    def kl_to_standard_normal(mu, sigma):
        return 0.5 * torch.sum(sigma**2 + mu**2 - 1.0) - torch.sum(torch.log(sigma))

    def step(xb, yb):
        h, kl = xb, 0.0
        for i, (w_mu, w_rho, b_mu, b_rho) in enumerate(layers):
            w_sigma, b_sigma = F.softplus(w_rho), F.softplus(b_rho)
            w = w_mu + w_sigma * torch.randn_like(w_mu)
            b = b_mu + b_sigma * torch.randn_like(b_mu)
            h = F.linear(h, w, b)
            if i < len(layers) - 1:
                h = F.relu(h)
            kl = kl + kl_to_standard_normal(w_mu, w_sigma) + kl_to_standard_normal(b_mu, b_sigma)
        nll = F.cross_entropy(h, yb, reduction="sum") * (num_train / xb.shape[0])
        loss = nll + kl / steps
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    def epoch(x, y):
        perm = torch.randperm(num_train, device=x.device)
        for i in range(steps):
            idx = perm[i * batch_size : (i + 1) * batch_size]
            step(x[idx], y[idx])

    return epoch


def time_epochs(repeats: int, num_train: int = 60_000, batch_size: int = 128, device: str = "cpu"):
    """Median (wall, CPU) seconds of ``repeats`` epochs after one warm-up epoch, or None.

    None also when ``device`` is ``"cuda"`` and torch sees no GPU.
    """
    if torch is None or (device == "cuda" and not torch.cuda.is_available()):
        return None
    torch.set_num_threads(usable_cores())  # the threads XLA's CPU backend uses
    torch.manual_seed(0)
    x = torch.randn(num_train, SIZES[0], device=device)
    y = torch.randint(0, SIZES[-1], (num_train,), device=device)
    epoch = make_epoch(num_train, batch_size, device)

    def sync() -> None:
        if device == "cuda":
            torch.cuda.synchronize()

    epoch(x, y)  # warm up the allocator and the kernels
    sync()
    wall, cpu = [], []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        epoch(x, y)
        sync()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return statistics.median(wall), statistics.median(cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    args = parser.parse_args()
    result = time_epochs(args.repeats, device=args.device)
    if result is None:
        print(
            "torch is not installed (pip install torch to get one), or it sees no GPU for "
            "--device cuda: no PyTorch reference"
        )
        return
    print(
        f"torch {torch.__version__} on {args.device}, {torch.get_num_threads()} threads: BBB "
        f"{result[0]:.2f} s/epoch (CPU {result[1]:.2f} s), median of {args.repeats}"
    )


if __name__ == "__main__":
    main()
