"""A new level is one entry in :data:`bnnkit.metrics.levels.LEVELS`: a toy level appended here
reaches the verdict, ``bnnkit evaluate --json`` (with its remedy in the flags of the command
that made the run) and the report, with no other change."""

from __future__ import annotations

import json

from bnnkit.cli import main
from bnnkit.evaluation import evaluate
from bnnkit.metrics import levels
from bnnkit.metrics.findings import Finding, Remedy

#: What the toy level finds on every run: a failure, a figure and what would help.
TOY_REMEDY = Remedy("more toy chains", (("num_chains", "larger"),))
#: A remedy in settings of several methods, of which bnnkit hmc (and hmc.Config) takes one.
TOY_DRAWS = Remedy(
    "more toy draws",
    (("num_samples", "larger"), ("num_iterations", "larger"), ("num_epochs", "larger")),
)


def toy_check(evidence: levels.Evidence) -> Finding:
    """Fails every run, with the number of chains it saw as its figure."""
    chains = evidence.prediction.per_sample.shape[0]
    remedies = (TOY_REMEDY, TOY_DRAWS)
    return Finding("fail", ("the toy question has no answer",), {"chains": chains}, remedies)


TOY = levels.Level(
    name="L9",
    asks="toy question",
    passes="a toy answer",
    check=toy_check,
    thresholds=(),
    reproducible=False,  # a reproducible run does not need it, a certified one does
    remedies=(),
    row=lambda figures: f"asked of {figures['chains']} chains",
)


def test_a_level_appended_to_the_list_reaches_the_verdict_the_json_and_the_report(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.setattr(levels, "LEVELS", [*levels.LEVELS, TOY])
    run = tmp_path / "run"
    argv = ["hmc", "--dataset", "yacht_0", "--model", "linear", "--noise-std", "0.35"]
    argv += ["--step-size", "1e-2", "--trajectory-len", "0.05", "--num-iterations", "40"]
    argv += ["--num-burn-in", "10", "--num-chains", "2", "--dir", str(run), "--no-progress"]
    assert main(argv) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    # The run's last line: the toy level among the others, its remedy in bnnkit hmc's flags.
    assert last.startswith("verdict: ") and "L9 FAIL" in last
    assert "more toy chains: a larger --num-chains" in last
    assert main(["evaluate", str(run), "--json"]) == 0
    found = json.loads(capsys.readouterr().out)["levels"]
    assert found["order"] == ["L0", "L1", "L2", "L3", "L9"] and "L9" in found["failed"]
    assert found["L9"]["figures"] == {"chains": 2}
    assert "L9 (toy question): the toy question has no answer" in found["problems"]
    assert "more toy chains: a larger --num-chains" in found["advice"]
    assert "more toy draws: a larger --num-iterations" in found["advice"]
    # From Python the same advice names hmc.Config's fields, and only those.
    from_python = evaluate(run, write=False)["levels"]["advice"]
    assert "more toy chains: a larger num_chains" in from_python
    assert "more toy draws: a larger num_iterations" in from_python
    # It fails, so the run is not certified; the stored verdict is that of its findings.
    assert found["verdict"] != "certified"
    stored = {name: Finding.from_dict(found[name]) for name in found["order"]}
    assert found["verdict"] == levels.verdict(stored).outcome
    out = tmp_path / "report"
    assert main(["report", str(run), "--out", str(out)]) == 0
    page = (out / "report.html").read_text()
    assert "L9 toy question" in page and "FAIL: asked of 2 chains" in page
    # The verdict opens the run's section, before its settings.
    assert page.index('class="headline"') < page.index("method settings")
