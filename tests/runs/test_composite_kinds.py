"""A new kind of run made of runs is a recipe and nothing else: here a deep ensemble, then a
Laplace approximation around each of its members (a mixture of Laplaces), defined in this file
alone and made, resumed, verified and evaluated by the composite run's one life."""

from __future__ import annotations

import json

import pytest

from bnnkit.cli import main
from bnnkit.evaluation import evaluate
from bnnkit.inference import ensemble, laplace
from bnnkit.problem import ProblemConfig
from bnnkit.runs import composite
from bnnkit.runs.directory import RunDir, composite_record, resolve

PROBLEM = ProblemConfig("yacht_0", "mlp_regression_small", noise_std=0.5)


def recipe() -> composite.Recipe:
    """The whole of the new kind: its name, its settings and its stages."""
    members = ensemble.Config(
        init_step_size=1e-4, num_epochs=3, batch_size=64, num_members=2, seed=1
    )
    around = laplace.Config(structure="diag", num_samples=4)
    stages = (
        composite.Stage("ensemble", members),
        composite.Stage("laplace", around, starts_from="ensemble"),
    )
    return composite.Recipe("ensemble-laplace", PROBLEM, members, stages)


@pytest.mark.slow  # an ensemble and a Laplace made, resumed, verified and evaluated
def test_a_new_kind_is_a_recipe(tmp_path, capsys):
    folder = tmp_path / "mixture"
    result = composite.run(recipe(), folder, progress=False)
    assert result.status == "finished"
    assert sorted(p.name for p in folder.iterdir()) == [
        "ensemble",
        "ensemble-laplace.json",
        "laplace",
    ]
    record = json.loads((folder / "ensemble-laplace.json").read_text())
    assert record["kind"] == "ensemble-laplace"
    assert record["outcomes"] == {"ensemble": "finished", "laplace": "finished"}
    # The Laplace stage was made around the ensemble stage, which it knows by identity.
    made = RunDir(folder / "laplace").read_record()
    source = RunDir(folder / "ensemble").read_record()
    assert made["init_source"]["identity"] == source["identity"]
    assert evaluate(folder / "laplace")["test"]["rmse"] > 0
    assert main(["verify", str(folder)]) == 0
    assert "laplace finished" in capsys.readouterr().out
    again = composite.run(recipe(), folder, resume=True, progress=False)
    assert {n: o.status for n, o in again.outcomes.items()} == {
        "ensemble": "reused",
        "laplace": "reused",
    }


def test_a_composite_written_before_records_were_named_after_their_kind_still_reads(tmp_path):
    # Records of kinds other than a reference were all called composite.json.
    folder = tmp_path / "old"
    (folder / "laplace").mkdir(parents=True)
    record = {"kind": "ensemble-laplace", "stages": [{"name": "ensemble"}, {"name": "laplace"}]}
    (folder / "composite.json").write_text(json.dumps(record))
    assert composite_record(folder) == folder / "composite.json"
    assert resolve(folder) == folder / "laplace"
    # A JSON file that records no kind, or another kind than its name says, is none.
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.json").write_text(json.dumps({"kind": "ensemble-laplace"}))
    (other / "list.json").write_text("[1, 2]")
    assert composite_record(other) is None and resolve(other) == other
