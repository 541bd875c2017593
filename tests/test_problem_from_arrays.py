"""Your own model and data: ``Problem.from_arrays`` with a Flax module or an apply function on
arrays in memory, through the run driver, evaluate, a fresh process and the CLI's
``--model package.module:ClassName``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bnnkit
import user_models
from bnnkit.cli import main
from bnnkit.errors import ConfigError
from bnnkit.models.imported import trusting_model
from bnnkit.problem import DATA_FILE, Problem, ProblemConfig, arrays_sha256, build

ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent


def bar_images(seed: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` noisy 8x8 images of one of three patterns (a row, a column, the diagonal)."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 3, size=n).astype(np.int32)
    images = rng.normal(0.0, 0.3, size=(n, 8, 8, 1)).astype(np.float32)
    for i, label in enumerate(labels):
        k = rng.integers(1, 7)
        if label == 0:
            images[i, k, :, 0] += 1.0
        elif label == 1:
            images[i, :, k, 0] += 1.0
        else:
            images[i, np.arange(8), np.arange(8), 0] += 1.0
    return images, labels


def images_problem(**settings) -> Problem:
    x_train, y_train = bar_images(0, 48)
    x_test, y_test = bar_images(1, 16)
    return Problem.from_arrays(
        x_train, y_train, x_test, y_test, model=user_models.SmallCNN(features=2), **settings
    )


def regression_arrays(n: int = 40) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(3)
    x = rng.normal(size=(n, 2)).astype(np.float32)
    y = (np.sin(x[:, 0]) + 0.1 * rng.normal(size=n)).astype(np.float32)
    return x[:30], y[:30], x[30:], y[30:]


class InScript(nn.Module):  # as if defined in a script: see test_a_class_of_main_...
    @nn.compact
    def __call__(self, x):
        return nn.Dense(1)(x)


# --- what from_arrays builds and records ---------------------------------------------------


def test_from_arrays_builds_the_problem_and_records_the_model_by_import_path():
    problem = images_problem(weight_decay=2.0)
    assert problem.dataset.task == "classification" and problem.dataset.num_classes == 3
    assert problem.config.dataset == "arrays:" + arrays_sha256(problem.arrays)[:16]
    assert problem.dataset.info["sha256"] == arrays_sha256(problem.arrays)
    # The class imports again, so the run can rebuild it: path and non-default arguments.
    assert problem.config.model == "user_models:SmallCNN"
    assert json.loads(problem.config.model_args) == {"features": 2}
    assert problem.config.weight_decay == 2.0 and problem.config.likelihood is None
    params = problem.init_params(jax.random.PRNGKey(0))
    value = problem.log_posterior(params, problem.train_batch())
    assert np.isfinite(float(value))
    # The same log posterior as a problem built from the recorded path and arguments.
    rebuilt = Problem.from_arrays(
        *(problem.arrays[k] for k in ("x_train", "y_train", "x_test", "y_test")),
        model="user_models:SmallCNN",
        model_args='{"features": 2}',
        weight_decay=2.0,
    )
    assert rebuilt.config == problem.config
    assert float(rebuilt.log_posterior(params, rebuilt.train_batch())) == float(value)


def test_equal_arrays_give_the_same_dataset_name_and_other_arrays_another():
    x, y, xt, yt = regression_arrays()
    a = Problem.from_arrays(x, y, xt, yt, model=user_models.TinyMLP(), noise_std=0.5)
    b = Problem.from_arrays(x.copy(), y.copy(), xt, yt, model=user_models.TinyMLP(), noise_std=0.5)
    c = Problem.from_arrays(x, y + 1, xt, yt, model=user_models.TinyMLP(), noise_std=0.5)
    assert a.config.dataset == b.config.dataset != c.config.dataset


def test_num_outputs_is_set_for_the_likelihood_when_left_out():
    x, y, xt, yt = regression_arrays()
    # heteroscedastic Gaussian: a mean and a std
    problem = Problem.from_arrays(x, y, xt, yt, model="user_models:TinyMLP")
    assert problem.model.num_outputs == 2
    out = problem.apply(problem.init_params(jax.random.PRNGKey(0)), jnp.asarray(xt))
    assert out.shape == (10, 2)


def test_an_apply_function_with_params_or_an_init_function():
    x, y, xt, yt = regression_arrays()

    def apply(params, inputs):
        return inputs @ params["w"] + params["b"]

    start = {"w": jnp.zeros((2, 1)), "b": jnp.zeros(1)}
    problem = Problem.from_arrays(x, y, xt, yt, model=apply, params=start, noise_std=0.3)
    assert problem.config.model.startswith("<in memory: function")
    assert problem.init_params(jax.random.PRNGKey(0))["w"].shape == (2, 1)

    def init(key, inputs):
        return {"w": jax.random.normal(key, (inputs.shape[1], 1)), "b": jnp.zeros(1)}

    drawn = Problem.from_arrays(x, y, xt, yt, model=apply, params=init, noise_std=0.3)
    a, b = (drawn.init_params(jax.random.PRNGKey(k))["w"] for k in (0, 1))
    assert not np.array_equal(a, b)  # members start apart


def test_a_class_of_main_or_with_a_function_argument_is_recorded_as_in_memory():
    x, y, xt, yt = regression_arrays()
    InScript.__module__ = "__main__"  # what a class in a script or notebook has
    try:
        problem = Problem.from_arrays(x, y, xt, yt, model=InScript(), noise_std=0.5)
    finally:
        InScript.__module__ = __name__
    assert problem.config.model.startswith("<in memory: class InScript is defined in __main__")
    # Its default function is the class's own: rebuilt by path, as it is.
    problem = Problem.from_arrays(
        x, y, xt, yt, model=user_models.WithActivation(), likelihood="gaussian"
    )
    assert problem.config.model == "user_models:WithActivation"
    problem = Problem.from_arrays(
        x, y, xt, yt, model=user_models.WithActivation(nn.tanh), likelihood="gaussian"
    )
    assert "argument activation" in problem.config.model


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"data_dir": "x"}, "got data_dir; allowed settings: noise_std"),
        ({"x_val": np.zeros((2, 2))}, "give x_val and y_val together"),
        ({"params": {"w": 1}}, "params= goes with an apply"),
        ({"model_args": '{"width": 2}'}, "model_args goes with an import path"),
        ({"noise_std": -1.0}, "noise std -1.0 must be > 0"),
    ],
)
def test_bad_settings_are_refused_in_one_line(kwargs, message):
    x, y, xt, yt = regression_arrays()
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")) as err:
        Problem.from_arrays(x, y, xt, yt, model=user_models.TinyMLP(), **kwargs)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("arrays", "message"),
    [
        (
            lambda x, y, xt, yt: (x, y[:5], xt, yt),
            "Problem.from_arrays: x_train has 30 rows but y_train has 5",
        ),
        (lambda x, y, xt, yt: (x, y, xt[:, :1], yt), "x_train rows have shape"),
        (lambda x, y, xt, yt: (x, np.full(30, np.nan), xt, yt), "y_train holds 30 NaN"),
        (lambda x, y, xt, yt: (x, np.arange(30), xt, np.full(10, 99)), "y_test holds class 99"),
    ],
)
def test_bad_arrays_get_the_user_file_checks(arrays, message):
    with pytest.raises(ConfigError, match=message):
        Problem.from_arrays(*arrays(*regression_arrays()), model=user_models.TinyMLP())


def test_a_model_whose_outputs_do_not_fit_the_likelihood_is_refused():
    x, y, xt, yt = regression_arrays()
    with pytest.raises(ConfigError, match=r"gives outputs of shape \(1, 3\).*needs \(1, 1\)"):
        Problem.from_arrays(x, y, xt, yt, model=user_models.TinyMLP(num_outputs=3), noise_std=0.5)
    with pytest.raises(ConfigError, match="fails on inputs of shape"):
        Problem.from_arrays(x, y, xt, yt, model=user_models.SmallCNN(), noise_std=0.5)


def test_an_import_path_is_checked_like_a_registry_name():
    with pytest.raises(ConfigError, match="cannot import 'no_such_module'"):
        build(ProblemConfig("yacht_0", "no_such_module:Net"))
    with pytest.raises(ConfigError, match=r"not a flax.linen.Module subclass"):
        build(ProblemConfig("yacht_0", "user_models:NOT_A_MODULE"))
    with pytest.raises(ConfigError, match="has no 'Missing'"):
        build(ProblemConfig("yacht_0", "user_models:Missing"))
    with pytest.raises(ConfigError, match="has no argument depth; allowed: width, num_outputs"):
        build(ProblemConfig("yacht_0", "user_models:TinyMLP", model_args='{"depth": 2}'))
    with pytest.raises(ConfigError, match=r"--model-args is for a --model package.module"):
        ProblemConfig("yacht_0", "mlp_regression_small", model_args="{}")
    # --dropout-rate is a registry dropout model's; an imported module has no rate to take.
    with pytest.raises(ConfigError, match=r"--dropout-rate 0.2 applies to a model with dropout"):
        build(ProblemConfig("yacht_0", "user_models:TinyMLP", dropout_rate=0.2))
    problem = build(
        ProblemConfig("yacht_0", "user_models:TinyMLP", model_args='{"width": 3}', noise_std=0.3)
    )
    assert problem.model.num_outputs == 1


# --- runs on arrays ------------------------------------------------------------------------


@pytest.mark.slow  # a convolution in HMC's host-driven leapfrog on CPU: about a minute
def test_a_cnn_on_arrays_through_hmc_an_ensemble_and_vi_evaluates_in_a_fresh_process(tmp_path):
    problem = images_problem()
    configs = {
        "hmc": bnnkit.HMC(
            step_size=1e-2, trajectory_len=0.05, num_iterations=6, num_burn_in=2, num_chains=2
        ),
        "ensemble": bnnkit.Ensemble(
            init_step_size=1e-3, num_epochs=3, batch_size=16, num_members=2
        ),
        "vi": bnnkit.VI(init_step_size=1e-2, num_epochs=3, batch_size=16, vi_ensemble_size=3),
    }
    results = {}
    for name, config in configs.items():
        bnnkit.run(problem, config, tmp_path / name, progress=False)
        assert (tmp_path / name / DATA_FILE).is_file()
        results[name] = bnnkit.evaluate(tmp_path / name, trust_model="user_models:SmallCNN")
        assert set(results[name]["test"]) >= {"accuracy", "nll"}, name
    record = json.loads((tmp_path / "hmc" / "run.json").read_text())
    assert record["problem"]["model"] == "user_models:SmallCNN"
    assert record["dataset"]["sha256"] == arrays_sha256(problem.arrays)
    # Another process, which has only the run directory and user_models on its path.
    code = (
        "import json, sys, bnnkit; "
        "r = bnnkit.evaluate(sys.argv[1], write=False, trust_model='user_models:SmallCNN'); "
        "print(json.dumps(r['test']))"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), str(ROOT / "src")])}
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "hmc")],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    fresh = json.loads(out.stdout.strip().splitlines()[-1])
    assert fresh == pytest.approx(results["hmc"]["test"], rel=1e-6)
    # The comparison with a reference works as on a named dataset.
    compared = bnnkit.evaluate(
        tmp_path / "ensemble",
        reference=tmp_path / "hmc",
        write=False,
        trust_model="user_models:SmallCNN",
    )
    assert 0.0 <= compared["reference"]["agreement"] <= 1.0


def test_an_in_memory_model_is_refused_in_one_line_and_passed_back_in(tmp_path):
    x, y, xt, yt = regression_arrays()

    def apply(params, inputs):
        return inputs @ params["w"]

    problem = Problem.from_arrays(
        x, y, xt, yt, model=apply, params={"w": jnp.zeros((2, 1))}, noise_std=0.3
    )
    bnnkit.run(
        problem,
        bnnkit.SGD(init_step_size=1e-3, num_epochs=2, batch_size=10),
        tmp_path / "sgd",
        progress=False,
    )
    with pytest.raises(
        ConfigError,
        match=r"cannot be re-created here; pass it back in: "
        r"bnnkit.evaluate\(run_dir, problem=",
    ) as err:
        bnnkit.evaluate(tmp_path / "sgd")
    assert "\n" not in str(err.value)
    assert "rmse" in bnnkit.evaluate(tmp_path / "sgd", problem=problem)["test"]
    other = Problem.from_arrays(
        x, y * 2, xt, yt, model=apply, params={"w": jnp.zeros((2, 1))}, noise_std=0.3
    )
    with pytest.raises(ConfigError, match=r"problem= is not the problem of the run .*--dataset"):
        bnnkit.evaluate(tmp_path / "sgd", problem=other)
    colder = Problem.from_arrays(
        x, y, xt, yt, model=apply, params={"w": jnp.zeros((2, 1))}, noise_std=0.3, temperature=0.5
    )
    with pytest.raises(ConfigError, match=r"--temperature 0.5"):
        bnnkit.evaluate(tmp_path / "sgd", problem=colder)


def test_changed_stored_arrays_and_a_resume_on_other_arrays_are_refused(tmp_path):
    from bnnkit import storage

    x, y, xt, yt = regression_arrays()
    problem = Problem.from_arrays(x, y, xt, yt, model=user_models.TinyMLP(), noise_std=0.3)
    config = bnnkit.SGD(init_step_size=1e-3, num_epochs=2, batch_size=10)
    bnnkit.run(problem, config, tmp_path / "sgd", progress=False)
    other = Problem.from_arrays(x, y + 1, xt, yt, model=user_models.TinyMLP(), noise_std=0.3)
    with pytest.raises(ConfigError, match="--resume with a different config: dataset"):
        bnnkit.run(other, config, tmp_path / "sgd", resume=True, progress=False)
    bnnkit.run(problem, config, tmp_path / "sgd", resume=True, progress=False)  # the same
    stored = storage.load_arrays(tmp_path / "sgd" / DATA_FILE)
    storage.save_arrays(tmp_path / "sgd" / DATA_FILE, {**stored, "y_test": stored["y_test"] + 1})
    with pytest.raises(ConfigError, match=r"data.npz' was changed"):
        bnnkit.evaluate(tmp_path / "sgd", trust_model="user_models:TinyMLP")
    (tmp_path / "sgd" / DATA_FILE).unlink()
    with pytest.raises(ConfigError, match=r"data.npz' is missing: the run was made from arrays"):
        bnnkit.evaluate(tmp_path / "sgd", trust_model="user_models:TinyMLP")


def test_laplace_takes_the_problem_of_an_arrays_run(tmp_path):
    x, y, xt, yt = regression_arrays()
    problem = Problem.from_arrays(
        x, y, xt, yt, model=user_models.TinyMLP(), noise_std=0.3, x_val=xt[:4], y_val=yt[:4]
    )
    assert problem.dataset.info["validation"][0].shape == (4, 2)
    bnnkit.run(
        problem,
        bnnkit.SGD(init_step_size=1e-3, num_epochs=2, batch_size=10),
        tmp_path / "sgd",
        progress=False,
    )
    # The MAP run's model is imported again only on the user's word.
    with trusting_model("user_models:TinyMLP"):
        bnnkit.run(
            None, bnnkit.Laplace(map_run=str(tmp_path / "sgd")), tmp_path / "la", progress=False
        )
    assert "rmse" in bnnkit.evaluate(tmp_path / "la", trust_model="user_models:TinyMLP")["test"]


# --- the command line ----------------------------------------------------------------------


def test_the_cli_takes_an_importable_flax_module(tmp_path, monkeypatch, capsys):
    x, y, xt, yt = regression_arrays()
    np.savez(tmp_path / "data.npz", x_train=x, y_train=y, x_test=xt, y_test=yt)
    monkeypatch.chdir(tmp_path)
    args = [
        "sgd",
        "--dataset",
        "data.npz",
        "--model",
        "user_models:TinyMLP",
        "--model-args",
        '{"width": 4}',
        "--noise-std",
        "0.3",
        "--init-step-size",
        "1e-3",
        "--num-epochs",
        "2",
        "--batch-size",
        "10",
        "--no-progress",
    ]
    assert main([*args, "--dir", "run"]) == 0
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    assert record["problem"]["model"] == "user_models:TinyMLP"
    assert record["problem"]["model_args"] == '{"width":4}'
    capsys.readouterr()
    assert (
        main(
            [
                "sgd",
                "--dataset",
                "data.npz",
                "--model",
                "no_such_module:Net",
                "--init-step-size",
                "1e-3",
                "--num-epochs",
                "2",
                "--batch-size",
                "10",
                "--dir",
                "bad",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert err.startswith("bnnkit: error: --model 'no_such_module:Net': cannot import")
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "bad").exists()
