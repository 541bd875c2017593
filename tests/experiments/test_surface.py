"""The plane through three parameter vectors: on conjugate linear regression the surface is the
known quadratic, and a grid cut off part-way resumes to the same file."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bnnkit import storage
from bnnkit.errors import ConfigError
from bnnkit.experiments import surface
from bnnkit.problem import ProblemConfig
from conjugate import conjugate_problem

EPS32 = float(np.finfo(np.float32).eps)
NOISE, WEIGHT_DECAY, TEMPERATURE = 0.5, 2.0, 0.5  # conjugate_problem's noise and prior


@pytest.fixture(scope="module")
def conjugate(tmp_path_factory):
    """The conjugate data as a dataset file, its problem, and three sample files near the
    posterior mean (as `bnnkit samples` writes them: (chains, samples, ...) per parameter)."""
    _, _, batch, mean, cov = conjugate_problem()
    folder = tmp_path_factory.mktemp("conjugate")
    x, y = np.asarray(batch.x), np.asarray(batch.y)
    np.savez(folder / "data.npz", x_train=x, y_train=y, x_test=x[:5], y_test=y[:5])
    problem = ProblemConfig(
        str(folder / "data.npz"),
        "linear",
        noise_std=NOISE,
        weight_decay=WEIGHT_DECAY,
        temperature=TEMPERATURE,
        standardize=False,
    )
    rng = np.random.default_rng(1)
    files, zs = [], []
    for name in "abc":
        z = (mean + 3 * np.sqrt(np.diag(cov)) * rng.normal(size=4)).astype(np.float32)
        storage.save_arrays(
            folder / f"{name}.npz",
            {
                "params/Dense_0/kernel": z[:3].reshape(1, 1, 3, 1),
                "params/Dense_0/bias": z[3:].reshape(1, 1, 1),
            },
        )
        files.append(str(folder / f"{name}.npz"))
        zs.append(z.astype(np.float64))
    return problem, files, zs, x.astype(np.float64), y.astype(np.float64), mean, cov


def closed_form(z, x, y, mean, cov):
    """log likelihood, log prior and tempered log posterior of (w, b) = z, in float64.

    The posterior is the conjugate quadratic (λ + XᵀX/σ² precision about ``mean``) plus its
    value at the mean; likelihood and prior are their Gaussian log densities.
    """
    n = x.shape[0]
    xa = np.concatenate([x, np.ones((n, 1))], axis=1)
    r = y - xa @ z
    terms = -0.5 * (r / NOISE) ** 2 - np.log(NOISE) - 0.5 * np.log(2 * np.pi)
    log_lik = terms.sum()
    log_prior = -0.5 * WEIGHT_DECAY * z @ z + 0.5 * len(z) * np.log(WEIGHT_DECAY / (2 * np.pi))
    precision = np.linalg.inv(cov)
    at_mean = (
        -0.5 * np.sum((y - xa @ mean) ** 2) / NOISE**2
        - n * np.log(NOISE)
        - 0.5 * n * np.log(2 * np.pi)
        - 0.5 * WEIGHT_DECAY * mean @ mean
        + 0.5 * len(z) * np.log(WEIGHT_DECAY / (2 * np.pi))
    )
    log_post = (at_mean - 0.5 * (z - mean) @ precision @ (z - mean)) / TEMPERATURE
    return log_lik, log_prior, log_post


def rounding_bounds(z_scale, z, x, y):
    """Float32 rounding bounds on the three fields at z (float64 values).

    z(a, b) = A + a·u + b·v has, per coordinate, a float32 error of at most
    3ε(|A| + |a u| + |b v|) (``z_scale``); the residual r_i = y_i − x_i·w − b then has at most
    (d + 4)ε(|y_i| + Σ_j |x_ij| |z_j|) plus the propagated coordinate errors, so ½r²/σ² moves
    by ≤ (|r| δr + δr²/2)/σ²; recursive float32 summation of n terms adds ≤ (n + 3)ε Σ|terms|
    (Higham, Accuracy and Stability of Numerical Algorithms, §4.2).
    """
    n, d = x.shape
    xa = np.concatenate([x, np.ones((n, 1))], axis=1)
    r = y - xa @ z
    dz = 3 * EPS32 * z_scale
    dr = (d + 4) * EPS32 * (np.abs(y) + np.abs(xa) @ (np.abs(z) + dz)) + np.abs(xa) @ dz
    terms = 0.5 * (r / NOISE) ** 2 + abs(np.log(NOISE)) + 0.5 * np.log(2 * np.pi)
    lik = np.sum(np.abs(r) * dr + 0.5 * dr**2) / NOISE**2 + (n + 3) * EPS32 * terms.sum()
    log_norm = 0.5 * len(z) * abs(np.log(WEIGHT_DECAY / (2 * np.pi)))
    prior_terms = 0.5 * WEIGHT_DECAY * z @ z + log_norm
    prior = WEIGHT_DECAY * np.abs(z) @ dz + (len(z) + 3) * EPS32 * prior_terms
    post = (lik + prior + 2 * EPS32 * (terms.sum() + prior_terms)) / TEMPERATURE
    return lik, prior, post


def test_surface_is_the_conjugate_quadratic(conjugate, tmp_path):
    problem, files, zs, x, y, mean, cov = conjugate
    config = surface.Config(grid_size=6, chunk_size=8)  # 36 points: 4 full chunks, 1 padded
    result = surface.posterior_surface(
        files, tmp_path / "out", config, problem=problem, progress=False
    )
    a, b, c = zs
    u, w = b - a, c - a
    v = w - (u @ w) / (u @ u) * u
    np.testing.assert_allclose(result.points, [[0, 0], [1, 0], [(u @ w) / (u @ u), 1]])
    assert result.u_norm == pytest.approx(np.linalg.norm(u))
    assert result.v_norm == pytest.approx(np.linalg.norm(v))
    np.testing.assert_allclose(result.u, np.linspace(-0.25, 1.25, 6))
    for i, s in enumerate(result.u):
        for j, t in enumerate(result.v):
            z = a + s * u + t * v
            scale = np.abs(a) + np.abs(s * u) + np.abs(t * v)
            exact = closed_form(z, x, y, mean, cov)
            bounds = rounding_bounds(scale, z, x, y)
            got = (result.log_likelihood[i, j], result.log_prior[i, j], result.log_posterior[i, j])
            for value, truth, bound in zip(got, exact, bounds, strict=True):
                assert abs(value - truth) <= bound, (i, j, value, truth, bound)
    # The fields vary by far more than the bound: the comparison is not vacuous.
    assert np.ptp(result.log_posterior) > 100 * max(rounding_bounds(np.abs(a), a, x, y))
    stored = storage.load_arrays(tmp_path / "out" / surface.SURFACE_FILE)
    np.testing.assert_array_equal(stored["log_posterior"], result.log_posterior)
    assert stored["grid"].shape == (6, 6, 2) and list(stored["labels"]) == files
    assert float(stored["temperature"]) == TEMPERATURE
    for name in surface.PLOTS.values():
        assert (tmp_path / "out" / name).read_bytes().startswith(b"\x89PNG")


def test_an_interrupted_grid_resumes_to_the_same_file(conjugate, tmp_path, monkeypatch):
    problem, files, *_ = conjugate
    config = surface.Config(grid_size=5, chunk_size=4, limit_top=2.0)
    surface.posterior_surface(
        files, tmp_path / "whole", config, problem=problem, progress=False, plots=False
    )
    write = surface._write_chunk
    calls = []

    def killed_at_third_chunk(*args):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        write(*args)

    monkeypatch.setattr(surface, "_write_chunk", killed_at_third_chunk)
    cut = tmp_path / "cut"
    with pytest.raises(KeyboardInterrupt):
        surface.posterior_surface(files, cut, config, problem=problem, progress=False, plots=False)
    assert len(list((cut / surface.CHUNKS_DIR).glob("*.npz"))) == 2
    assert not (cut / surface.SURFACE_FILE).exists()
    monkeypatch.setattr(surface, "_write_chunk", write)

    with pytest.raises(ConfigError, match="not empty; pass --resume"):
        surface.posterior_surface(files, cut, config, problem=problem, progress=False, plots=False)
    other = surface.Config(grid_size=5, chunk_size=4)
    with pytest.raises(ConfigError, match="other settings: its grid differ"):
        surface.posterior_surface(files, cut, other, problem=problem, resume=True, progress=False)
    surface.posterior_surface(
        files, cut, config, problem=problem, resume=True, progress=False, plots=False
    )
    whole = storage.load_arrays(tmp_path / "whole" / surface.SURFACE_FILE)
    resumed = storage.load_arrays(cut / surface.SURFACE_FILE)
    assert whole.keys() == resumed.keys()
    for key in whole:
        np.testing.assert_array_equal(resumed[key], whole[key], err_msg=key)
    settings = json.loads((cut / surface.SETTINGS_FILE).read_text())
    assert settings["grid"]["limit_top"] == 2.0


def test_points_on_a_line_are_refused():
    a, b = {"w": np.zeros(3)}, {"w": np.ones(3)}
    with pytest.raises(ConfigError, match="same parameters"):
        surface.plane(a, a, b)
    with pytest.raises(ConfigError, match="on the line through A and B"):
        surface.plane(a, b, {"w": np.full(3, 3.0)})


@pytest.mark.parametrize(
    "values, message",
    [
        ({"grid_size": 0}, "--grid-size 0 out of range; allowed: 2..1024"),
        ({"limit_left": 1.0, "limit_right": 0.0}, "--limit-left 1.0 must be below --limit-right"),
        ({"limit_bottom": 0.5, "limit_top": 0.5}, "--limit-bottom 0.5 must be below --limit-top"),
        ({"chunk_size": 0}, "--chunk-size 0 out of range; allowed: 1..1048576"),
    ],
)
def test_bad_grids_are_refused(values, message):
    with pytest.raises(ConfigError, match=message):
        surface.Config(**values)
