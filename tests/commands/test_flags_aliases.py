"""The paper's flag names, bnnkit's one name per concept, and bnn_hmc's README commands.

Settings are compared through ``--print-config``, which builds (and validates) the same
Configs a run would and prints them, without running anything.
"""

from __future__ import annotations

import dataclasses
import shlex

import pytest

from bnnkit.cli import main
from bnnkit.inference import sgmcmc

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib


def resolved(argv: list[str], capsys) -> dict:
    """The settings ``bnnkit ARGV --print-config`` resolves to (it must exit 0)."""
    code = main([*argv, "--print-config"])
    out = capsys.readouterr()
    assert code == 0, out.err
    return tomllib.loads(out.out)


YACHT = ["--dataset", "yacht_0", "--model", "mlp_regression_small", "--noise-std", "0.35"]


@pytest.mark.parametrize(
    "command, canonical, paper",
    [
        (
            "hmc",
            [
                *YACHT,
                "--step-size",
                "1e-3",
                "--trajectory-len",
                "0.1",
                "--num-iterations",
                "20",
                "--num-burn-in",
                "5",
                "--checkpoint-every",
                "4",
                "--float64",
            ],
            [
                "--dataset-name",
                "yacht_0",
                "--model-name",
                "mlp_regression_small",
                "--noise-std",
                "0.35",
                "--step-size",
                "1e-3",
                "--trajectory-len",
                "0.1",
                "--num-iterations",
                "20",
                "--num-burn-in-iterations",
                "5",
                "--save-freq",
                "4",
                "--use-float64",
            ],
        ),
        (
            "sgmcmc",
            [
                *YACHT,
                "--init-step-size",
                "1e-5",
                "--num-epochs",
                "10",
                "--batch-size",
                "8",
                "--momentum-decay",
                "0.95",
                "--num-burn-in",
                "4",
                "--step-size-schedule",
                "cyclical",
                "--cycle-length",
                "3",
                "--checkpoint-every",
                "2",
                "--preconditioner",
                "rmsprop",
            ],
            [
                *YACHT,
                "--init-step-size",
                "1e-5",
                "--num-epochs",
                "10",
                "--batch-size",
                "8",
                "--momentum",
                "0.95",
                "--num-burnin-epochs",
                "4",
                "--step-size-schedule",
                "cyclical",
                "--step-size-cycle-length-epochs",
                "3",
                "--save-freq",
                "2",
                "--preconditioner",
                "RMSprop",
                "--save-all-ensembled",
            ],
        ),
        (
            "sgd",
            [
                *YACHT,
                "--init-step-size",
                "1e-5",
                "--num-epochs",
                "3",
                "--batch-size",
                "8",
                "--momentum-decay",
                "0.8",
            ],
            [
                *YACHT,
                "--init-step-size",
                "1e-5",
                "--num-epochs",
                "3",
                "--batch-size",
                "8",
                "--momentum",
                "0.8",
            ],
        ),
        (
            "vi",
            [
                *YACHT,
                "--init-step-size",
                "1e-3",
                "--num-epochs",
                "3",
                "--batch-size",
                "8",
                "--init-checkpoint",
                "runs/sgd",
                "--optimizer",
                "adam",
            ],
            [
                *YACHT,
                "--init-step-size",
                "1e-3",
                "--num-epochs",
                "3",
                "--batch-size",
                "8",
                "--mean-init-checkpoint",
                "runs/sgd",
                "--optimizer",
                "Adam",
            ],
        ),
        (
            "hmc",
            [
                "--dataset",
                "mnist",
                "--model",
                "lenet5",
                "--step-size",
                "1e-3",
                "--trajectory-len",
                "0.1",
            ],
            [
                "--dataset",
                "mnist",
                "--model",
                "lenet",
                "--step-size",
                "1e-3",
                "--trajectory-len",
                "0.1",
            ],
        ),
    ],
)
def test_paper_names_give_the_same_settings(command, canonical, paper, capsys, tmp_path):
    expected = resolved([command, *canonical], capsys)
    assert resolved([command, *paper], capsys) == expected
    underscored = ["--" + a[2:].replace("-", "_") if a.startswith("--") else a for a in paper]
    assert resolved([command, *underscored], capsys) == expected


def test_shared_concepts_have_one_name_in_every_method():
    from bnnkit.inference import METHODS

    for name, module in METHODS.items():
        fields = {f.name for f in dataclasses.fields(module.Config)}
        assert "save_freq" not in fields and "num_burnin_epochs" not in fields, name
        if name in ("hmc", "nuts", "sgd", "ensemble", "sgmcmc", "vi"):
            assert "checkpoint_every" in fields, name


def test_runs_stored_under_the_old_names_read_back():
    old = {
        "init_step_size": 1e-5,
        "num_epochs": 6,
        "batch_size": 4,
        "num_burnin_epochs": 2,
        "save_freq": 3,
    }
    config = sgmcmc.Config.from_dict(old)
    assert (config.num_burn_in, config.checkpoint_every) == (2, 3)


# Every command of bnn_hmc's README (google-research/bnn_hmc), verbatim after its script name;
# the placeholders <path-to-sgd-solution> and [cifar10 | cifar100] are filled in.
PAPER_COMMANDS = {
    "hmc imdb T=1": "hmc --seed=1 --weight_decay=40. --temperature=1. --dir=runs/hmc/imdb/ "
    "--dataset_name=imdb --model_name=cnn_lstm --use_float64 --step_size=1e-5 "
    "--trajectory_len=0.24 --max_num_leapfrog_steps=30000",
    "hmc imdb T=0.3": "hmc --seed=1 --weight_decay=40. --temperature=0.3 --dir=runs/hmc/imdb/ "
    "--dataset_name=imdb --model_name=cnn_lstm --use_float64 "
    "--step_size=3e-6 --trajectory_len=0.136 --max_num_leapfrog_steps=46000",
    "hmc imdb T=0.1": "hmc --seed=1 --weight_decay=40. --temperature=0.1 --dir=runs/hmc/imdb/ "
    "--dataset_name=imdb --model_name=cnn_lstm --use_float64 "
    "--step_size=1e-6 --trajectory_len=0.078 --max_num_leapfrog_steps=90000",
    "hmc imdb T=0.03": "hmc --seed=1 --weight_decay=40. --temperature=0.03 "
    "--dir=runs/hmc/imdb/ --dataset_name=imdb --model_name=cnn_lstm "
    "--use_float64 --step_size=1e-6 --trajectory_len=0.043 "
    "--max_num_leapfrog_steps=45000",
    "hmc mnist160": "hmc --seed=0 --weight_decay=1. --temperature=1. "
    "--dir=runs/hmc/mnist_subset160 --dataset_name=mnist "
    "--model_name=mlp_classification --step_size=3.e-5 --trajectory_len=1.5 "
    "--num_iterations=100 --max_num_leapfrog_steps=50000 "
    "--num_burn_in_iterations=10 --subset_train_to=160",
    "sgd cifar10": "sgd --seed=1 --weight_decay=10 --dir=runs/sgd/cifar10/ "
    "--dataset_name=cifar10 --model_name=resnet20_frn_swish "
    "--init_step_size=3e-7 --num_epochs=500 --eval_freq=10 --batch_size=80 "
    "--save_freq=500 --subset_train_to=40960",
    "sgd cifar100": "sgd --seed=1 --weight_decay=10 --dir=runs/sgd/cifar100/ "
    "--dataset_name=cifar100 --model_name=resnet20_frn_swish "
    "--init_step_size=1e-6 --num_epochs=500 --eval_freq=10 --batch_size=80 "
    "--save_freq=500 --subset_train_to=40960",
    "sgd imdb": "sgd --seed=1 --weight_decay=3. --dir=runs/sgd/imdb/ --dataset_name=imdb "
    "--model_name=cnn_lstm --init_step_size=3e-7 --num_epochs=500 --eval_freq=10 "
    "--batch_size=80 --save_freq=500",
    "sgld cifar10": "sgmcmc --seed=1 --weight_decay=5. --dir=runs/sgmcmc/cifar10/ "
    "--dataset_name=cifar10 --model_name=resnet20_frn_swish "
    "--init_step_size=1e-6 --final_step_size=1e-6 --num_epochs=10000 "
    "--num_burnin_epochs=1000 --eval_freq=10 --batch_size=80 --save_freq=10 "
    "--momentum=0. --subset_train_to=40960",
    "sghmc cifar10": "sgmcmc --seed=1 --weight_decay=5 --dir=runs/sgmcmc/cifar10/ "
    "--dataset_name=cifar10 --model_name=resnet20_frn_swish "
    "--init_step_size=3e-7 --final_step_size=3e-7 --num_epochs=10000 "
    "--num_burnin_epochs=1000 --eval_freq=10 --batch_size=80 --save_freq=10 "
    "--subset_train_to=40960 --momentum=0.9",
    "sghmc-clr cifar10": "sgmcmc --seed=1 --weight_decay=5 --dir=runs/sgmcmc/cifar10/ "
    "--dataset_name=cifar10 --model_name=resnet20_frn_swish "
    "--init_step_size=3e-7 --num_epochs=10000 --num_burnin_epochs=1000 "
    "--step_size_schedule=cyclical --step_size_cycle_length_epochs=50 "
    "--ensemble_freq=50 --eval_freq=10 --batch_size=80 --save_freq=1000 "
    "--subset_train_to=40960 --preconditioner=None --momentum=0.95 "
    "--eval_freq=10 --save_all_ensembled",
    "sghmc-clr-prec cifar10": "sgmcmc --seed=1 --weight_decay=5 --dir=runs/sghmc/cifar10/ "
    "--dataset_name=cifar10 --model_name=resnet20_frn_swish "
    "--init_step_size=3e-5 --num_epochs=10000 "
    "--num_burnin_epochs=1000 --step_size_schedule=cyclical "
    "--step_size_cycle_length_epochs=50 --ensemble_freq=50 "
    "--eval_freq=10 --batch_size=80 --save_freq=50 "
    "--subset_train_to=40960 --preconditioner=RMSprop "
    "--momentum=0.95 --eval_freq=10 --save_all_ensembled",
    "vi cifar": "vi --seed=11 --weight_decay=5. --dir=runs/vi/cifar100/ --dataset_name=cifar10 "
    "--model_name=resnet20_frn_swish --init_step_size=1e-4 --num_epochs=300 "
    "--eval_freq=10 --batch_size=80 --save_freq=300 --subset_train_to=40960 "
    "--optimizer=Adam --vi_sigma_init=0.01 --temperature=1. "
    "--vi_ensemble_size=20 --mean_init_checkpoint=runs/sgd/cifar10",
    "vi imdb": "vi --seed=11 --weight_decay=5. --dir=runs/vi/imdb/ --dataset_name=imdb "
    "--model_name=cnn_lstm --init_step_size=1e-4 --num_epochs=500 --eval_freq=10 "
    "--batch_size=80 --save_freq=200 --optimizer=Adam --vi_sigma_init=0.01 "
    "--temperature=1. --vi_ensemble_size=20 --mean_init_checkpoint=runs/sgd/imdb",
}


@pytest.mark.parametrize("name", sorted(PAPER_COMMANDS))
def test_every_paper_command_parses(name, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    argv = shlex.split(PAPER_COMMANDS[name])
    settings = resolved(argv, capsys)
    # Each flag the command gives reached the settings under its bnnkit name.
    given = dict(a[2:].split("=", 1) for a in argv[1:] if "=" in a)
    renamed = {
        "dataset_name": "dataset",
        "model_name": "model",
        "num_burn_in_iterations": "num_burn_in",
        "num_burnin_epochs": "num_burn_in",
        "save_freq": "checkpoint_every",
        "momentum": "momentum_decay",
        "step_size_cycle_length_epochs": "cycle_length",
        "mean_init_checkpoint": "init_checkpoint",
    }
    for key, text in given.items():
        if key == "dir":
            continue
        value = settings[renamed.get(key, key)]
        if isinstance(value, str):
            assert value.lower() == text.lower(), key
        else:
            assert value == pytest.approx(float(text)), key
    assert settings["float64"] == ("--use_float64" in argv)
    assert not (tmp_path / "runs").exists()  # nothing was run or written
