"""Registry metadata, model/dataset compatibility and the ``bnnkit models`` command."""

from __future__ import annotations

import argparse

import pytest

from bnnkit.commands import models as models_command
from bnnkit.errors import ConfigError
from bnnkit.models import MODELS, ModelSpec, check_compatible
from bnnkit.models.mlp import MLP


def test_example_shapes_match_input_rank():
    for name, spec in MODELS.items():
        if spec.example_shape is not None:
            assert spec.input_rank is None or len(spec.example_shape) == spec.input_rank, name
    for name in ("lenet5", "resnet20_frn", "resnet20_frn_swish", "cnn_lstm"):
        assert MODELS[name].example_shape is not None


def test_model_spec_without_example_shape_still_works():
    spec = ModelSpec(lambda k: MLP(hidden=(), num_outputs=k), ("regression",), None, "x")
    assert spec.example_shape is None and spec.input_dtype == "float"


@pytest.mark.parametrize(
    ("name", "task", "shape", "dtype", "match"),
    [
        ("cnn_lstm", "classification", (32, 32, 3), None, "rank 1"),
        ("cnn_lstm", "classification", (784,), "float", "token ids"),
        ("cnn_lstm", "regression", (13,), None, "classification"),
        ("lenet5", "regression", (13,), None, "classification"),
        ("lenet5", "classification", (784,), None, "rank 3"),
        ("resnet20_frn_swish", "classification", (100,), "int", "rank 3"),
        ("mlp_bbb_400", "classification", (100,), "int", "real-valued"),
        ("mlp_bbb_400", "classification", (784,), "uint8", "'int' or 'float'"),
    ],
)
def test_incompatible_pairs_are_refused(name, task, shape, dtype, match):
    with pytest.raises(ConfigError, match=match):
        check_compatible(name, task, shape, "somedata", input_dtype=dtype)


@pytest.mark.parametrize(
    ("name", "shape", "dtype"),
    [
        ("cnn_lstm", (100,), "int"),
        ("lenet5", (28, 28, 1), "float"),
        ("lenet5", (32, 32, 3), None),
        ("resnet20_frn_swish", (32, 32, 3), "float"),
        ("mlp_bbb_1200", (28, 28, 1), "float"),
    ],
)
def test_compatible_pairs_pass(name, shape, dtype):
    check_compatible(name, "classification", shape, "somedata", input_dtype=dtype)


def run_command(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    models_command.COMMAND.add_arguments(parser)
    return models_command.COMMAND.run(parser.parse_args(argv))


def test_models_command_plain_lists_every_model_with_its_count(capsys):
    assert run_command(["--plain"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].split("\t")[0] == "name"
    rows = {line.split("\t")[0]: line.split("\t") for line in lines[1:]}
    assert set(rows) == set(MODELS)
    assert rows["resnet20_frn_swish"][5] == "274042"
    assert rows["lenet5"][3:6] == ["28x28x1", "10", "61706"]
    assert rows["cnn_lstm"][3:6] == ["100", "2", "2700098"]
    assert rows["mlp_regression_small"][3:6] == ["6", "2", "452"]  # 6·50 + 50 + 50·2 + 2


def test_models_command_table(capsys):
    assert run_command([]) == 0
    out = capsys.readouterr().out
    assert "resnet20_frn_swish" in out and "274,042" in out and "784 input features" in out
