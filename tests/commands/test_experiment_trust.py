"""An experiment given a model outside bnnkit by its own --model reads back the runs it makes
with that model: naming it on the call is the user's word (bnnkit.models.imported)."""

from __future__ import annotations

import pytest

from bnnkit.cli import main
from bnnkit.errors import ConfigError
from bnnkit.experiments import temperature
from bnnkit.models import imported


class _Result:
    def markdown(self) -> str:
        return "done"


def test_an_experiment_may_read_back_the_model_its_call_names(tmp_path, monkeypatch, capsys):
    allowed = []

    def sweep(config, out, progress=True):
        # What the experiment's readers ask before rebuilding a run of that model.
        imported.check_trusted(config.model, None, where="the run 'r'")
        allowed.append(config.model)
        return _Result()

    monkeypatch.setattr(temperature, "temperature_sweep", sweep)
    argv = ["experiment", "temperature", "--out", str(tmp_path / "out"), "--no-progress"]
    assert main([*argv, "--model", "user_models:TinyMLP"]) == 0
    assert allowed == ["user_models:TinyMLP"]
    # Outside the call the word no longer holds.
    with pytest.raises(ConfigError, match="--model user_models:TinyMLP"):
        imported.check_trusted("user_models:TinyMLP", None, where="the run 'r'")
