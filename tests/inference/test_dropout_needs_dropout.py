"""MC dropout refuses a network without dropout before anything is written: its T passes
would all be the same deterministic network, reported as MC dropout."""

from __future__ import annotations

import flax.linen as nn
import jax
import numpy as np
import pytest

import bnnkit
from bnnkit.cli import main
from bnnkit.errors import ConfigError
from bnnkit.inference import dropout
from bnnkit.problem import ProblemConfig
from bnnkit.problem import build as build_problem

TINY = dict(init_step_size=1e-5, num_epochs=1, batch_size=16, num_passes=3)


class DenseWithDropout(nn.Module):
    """A user's network with a dropout layer that reads ``deterministic``."""

    num_outputs: int = 1

    @nn.compact
    def __call__(self, x: jax.Array, deterministic: bool = True) -> jax.Array:
        x = nn.Dropout(0.5)(nn.tanh(nn.Dense(8)(x)), deterministic=deterministic)
        return nn.Dense(self.num_outputs)(x)


def arrays():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 3)).astype(np.float32)
    y = (x @ np.array([1.0, -1.0, 0.5])).astype(np.float32)
    return x[:32], y[:32], x[32:], y[32:]


def test_the_command_refuses_a_model_without_dropout_in_one_line(tmp_path, capsys):
    run_dir = tmp_path / "run"
    code = main(
        [
            "dropout",
            "--dataset",
            "yacht_0",
            "--model",
            "mlp_regression_small",
            "--noise-std",
            "0.35",
            "--init-step-size",
            "1e-5",
            "--num-epochs",
            "1",
            "--batch-size",
            "32",
            "--no-progress",
            "--dir",
            str(run_dir),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "'mlp_regression_small' has none" in err
    assert "--model mlp_regression_small_dropout" in err  # how to get one
    assert "takes deterministic" in err  # the other thing allowed
    assert not run_dir.exists() and list(tmp_path.iterdir()) == []


def test_the_python_api_refuses_it_before_the_folder_exists(tmp_path):
    problem = ProblemConfig("yacht_0", "mlp_regression_small", noise_std=0.35)
    with pytest.raises(
        ConfigError,
        match=r"model 'mlp_regression_small' has none.*"
        r"--model mlp_regression_small_dropout",
    ):
        bnnkit.run(problem, dropout.Config(**TINY), tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()


def test_a_model_with_no_dropout_variant_gets_no_variant_named():
    with pytest.raises(ConfigError, match=r"model 'linear' has none") as err:
        dropout.check_problem(build_problem(ProblemConfig("yacht_0", "linear", noise_std=0.35)))
    assert "for this network" not in str(err.value)
    for name in ("mlp_regression_small_dropout", "lenet5_dropout"):  # what is allowed
        assert name in str(err.value)


def test_an_imported_module_without_deterministic_is_refused_and_one_with_it_runs(tmp_path):
    plain = bnnkit.Problem.from_arrays(*arrays(), model=nn.Dense(1), noise_std=0.5)
    with pytest.raises(ConfigError, match=r"model 'flax.linen.linear:Dense' has none"):
        bnnkit.run(plain, dropout.Config(**TINY), tmp_path / "plain", progress=False)
    assert not (tmp_path / "plain").exists()

    own = bnnkit.Problem.from_arrays(*arrays(), model=DenseWithDropout(), noise_std=0.5)
    dropout.check_problem(own)  # accepted: its __call__ takes deterministic
    result = bnnkit.run(own, dropout.Config(**TINY), tmp_path / "own", progress=False)
    assert result.record["status"] == "finished"
