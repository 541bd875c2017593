"""Prior predictive draws: the fan-in scaled prior keeps f's variance as width grows, and the
``bnnkit prior-predictive`` command writes its pictures or refuses bad input in one line."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bnnkit import priors
from bnnkit.cli import main
from bnnkit.models.mlp import MLP
from bnnkit.priors.predictive import draw_outputs
from mcmc_checks import z_threshold

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def output_variance_check(spec: str, width: int, truth: float, z: float) -> None:
    """Var f(1) over i.i.d. prior draws against its exact value, within z MCSE (E f = 0)."""
    net = MLP(hidden=(width,), num_outputs=1)
    x = jnp.ones((1, 1))
    like = jax.eval_shape(net.init, jax.random.PRNGKey(0), x)
    prior = priors.make(spec, like=like)
    f = draw_outputs(jax.random.PRNGKey(width), net.apply, prior, like, x, 4000)[:, 0, 0]
    sq = np.asarray(f, np.float64) ** 2
    mcse = sq.std() / np.sqrt(len(sq))
    assert abs(sq.mean() - truth) < z * mcse, (
        f"{spec}, width {width}: Var f(1) = {sq.mean():.4g}, exact {truth:.4g} (MCSE {mcse:.2g})"
    )


def test_fan_in_scaling_keeps_the_output_variance_as_width_grows():
    """f(x) = Σ_j v_j relu(w_j x + b_j) + c. With w, b, c ~ N(0, σ²) and v ~ N(0, σ²/H),
    Var f(x) = σ²·E[relu(z)²] + σ² = σ⁴(x² + 1)/2 + σ², whatever H; with v ~ N(0, σ²) it is
    H σ⁴(x² + 1)/2 + σ², growing with the width."""
    sigma = 1.5
    z = z_threshold(3)
    for width in (10, 1000):
        output_variance_check(f"fanin_gaussian:scale={sigma}", width, sigma**4 + sigma**2, z)
    output_variance_check(f"gaussian:scale={sigma}", 1000, 1000 * sigma**4 + sigma**2, z)


@pytest.mark.slow
def test_regression_picture(tmp_path, capsys):
    out = tmp_path / "widths.png"
    code = main(
        [
            "prior-predictive",
            "--widths",
            "10,100",
            "--prior",
            "fanin_gaussian:scale=2",
            "--num-draws",
            "50",
            "--out",
            str(out),
        ]
    )
    assert code == 0, capsys.readouterr().err
    assert out.read_bytes().startswith(PNG_MAGIC)
    printed = capsys.readouterr().out
    assert "width 10" in printed and "width 100" in printed
    out = tmp_path / "model.png"
    code = main(
        ["prior-predictive", "--prior", "laplace:scale=0.5", "--num-draws", "20", "--out", str(out)]
    )
    assert code == 0, capsys.readouterr().err
    assert out.read_bytes().startswith(PNG_MAGIC)


def test_classification_picture(tmp_path, capsys):
    rng = np.random.default_rng(0)
    data = tmp_path / "blobs.npz"
    np.savez(
        data,
        x_train=rng.normal(size=(30, 4)),
        y_train=rng.integers(0, 3, 30),
        x_test=rng.normal(size=(20, 4)),
        y_test=rng.integers(0, 3, 20),
    )
    out = tmp_path / "classes.png"
    code = main(
        [
            "prior-predictive",
            "--dataset",
            str(data),
            "--model",
            "linear",
            "--prior",
            "laplace:scale=2",
            "--num-draws",
            "30",
            "--out",
            str(out),
        ]
    )
    assert code == 0, capsys.readouterr().err
    assert out.read_bytes().startswith(PNG_MAGIC)
    assert "mean max class probability" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--widths", "10,x"], "--widths '10,x'; allowed: comma-separated integers >= 1"),
        (["--widths", "10", "--model", "mlp_regression"], "allowed: it or --model"),
        (["--model", "mlp_classification"], "is a classifier; allowed: give --dataset"),
        (["--x-range", "3,-3"], "--x-range '3,-3'; allowed: LOW,HIGH with LOW < HIGH"),
        (["--prior", "laplace:scale=0"], "invalid scale=0"),
        (["--num-draws", "0"], "--num-draws 0 must be an integer >= 1"),
    ],
)
def test_bad_input_exits_2_with_one_line(args, message, tmp_path, capsys):
    code = main(["prior-predictive", *args, "--out", str(tmp_path / "f.png")])
    err = capsys.readouterr().err
    assert code == 2
    assert message in err and err.count("\n") == 1
    assert not (tmp_path / "f.png").exists()


def test_missing_output_folder(tmp_path, capsys):
    code = main(["prior-predictive", "--out", str(tmp_path / "nope" / "f.png")])
    assert code == 2
    assert "does not exist" in capsys.readouterr().err
