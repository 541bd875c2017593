"""A tiny image classification problem for the experiments' tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def tiny_images(folder: Path, num_train: int = 40, num_test: int = 10) -> Path:
    """8 x 8 x 1 images of 10 classes whose mean brightness is the class: learnable at once."""
    rng = np.random.default_rng(0)

    def draw(n):
        y = rng.integers(0, 10, n).astype(np.int32)
        x = y[:, None, None, None] / 10 + 0.1 * rng.standard_normal((n, 8, 8, 1))
        return x.astype(np.float32), y

    x_train, y_train = draw(num_train)
    x_test, y_test = draw(num_test)
    path = folder / "tiny_images.npz"
    np.savez(path, x_train=x_train, y_train=y_train, x_test=x_test, y_test=y_test)
    return path


def count_runs(monkeypatch) -> list:
    """Every call of ``bnnkit.runs.run`` from now on, recorded (the call still runs)."""
    from bnnkit import runs

    calls = []
    real = runs.run

    def counting(*args, **kwargs):
        calls.append(args[2])
        return real(*args, **kwargs)

    monkeypatch.setattr(runs, "run", counting)
    return calls


def png_ok(path: Path) -> bool:
    return path.is_file() and path.stat().st_size > 0 and path.read_bytes()[1:4] == b"PNG"
