"""``bnnkit evaluate RUN --reference-probs cifar10_hmc|imdb_hmc|FILE``: the competition's
agreement and total variation against a released table; a table for another test set is one
line, exit 2, and nothing is written."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bnnkit.cli import main
from bnnkit.evaluation import compare_probs

NUM_TEST, NUM_CLASSES = 6, 3


@pytest.fixture(scope="module")
def classification_run(tmp_path_factory):
    """SGD for one epoch on a 3-class npz with 6 test points (about a second)."""
    tmp = tmp_path_factory.mktemp("refprobs")
    rng = np.random.default_rng(0)
    np.savez(
        tmp / "data.npz",
        x_train=rng.normal(size=(20, 3)),
        y_train=np.arange(20) % 3,
        x_test=rng.normal(size=(NUM_TEST, 3)),
        y_test=np.arange(NUM_TEST) % 3,
    )
    run_dir = tmp / "run"
    assert (
        main(
            [
                "sgd",
                "--dataset",
                str(tmp / "data.npz"),
                "--model",
                "mlp_classification",
                "--init-step-size",
                "1e-2",
                "--num-epochs",
                "1",
                "--batch-size",
                "8",
                "--no-progress",
                "--no-evaluate",
                "--dir",
                str(run_dir),
            ]
        )
        == 0
    )
    return run_dir


def test_compare_probs_by_hand():
    p = np.array([[0.6, 0.3, 0.1], [0.2, 0.5, 0.3], [0.1, 0.1, 0.8]])
    q = np.array([[0.5, 0.4, 0.1], [0.6, 0.2, 0.2], [0.0, 0.0, 1.0]])
    # argmaxes 0,1,2 vs 0,0,2: 2 of 3 agree. ½Σ|p−q| per row: ½(.1+.1+0) = .1,
    # ½(.4+.3+.1) = .4, ½(.1+.1+.2) = .2; mean .7/3.
    scores = compare_probs(p, q)
    assert scores["agreement"] == pytest.approx(2 / 3)
    assert scores["total_variation"] == pytest.approx(0.7 / 3)


@pytest.mark.slow
def test_scores_against_a_file_in_the_published_format(classification_run, tmp_path, capsys):
    assert main(["evaluate", str(classification_run), "--json"]) == 0
    capsys.readouterr()
    with np.load(classification_run / "predictions" / "test.npz") as stored:
        probs = stored["probs"].astype(np.float64)
    # Reference: the run's own top class moved to the next class in rows 0 and 3, unchanged
    # elsewhere. Agreement is 4/6 exactly (a top class can't stay on top after moving away).
    reference = probs.copy()
    for row in (0, 3):
        reference[row] = np.roll(probs[row], 1)
        assert np.argmax(reference[row]) != np.argmax(probs[row])  # no tied top classes
    path = tmp_path / "probs.csv"
    np.savetxt(path, reference)  # whitespace-delimited, %.18e, as the released files
    expected_tv = (
        sum(
            0.5 * sum(abs(a - b) for a, b in zip(probs[r], reference[r], strict=True))
            for r in range(NUM_TEST)
        )
        / NUM_TEST
    )
    assert (
        main(["evaluate", str(classification_run), "--reference-probs", str(path), "--json"]) == 0
    )
    scored = json.loads(capsys.readouterr().out)["reference_probs"]
    assert scored["source"] == str(path) and scored["agreement"] == pytest.approx(4 / 6)
    # float32 predictions against the %.18e copy of them: equal to ~1e-7
    assert scored["total_variation"] == pytest.approx(expected_tv, abs=1e-6)
    assert main(["evaluate", str(classification_run), "--reference-probs", str(path)]) == 0
    text = capsys.readouterr().out
    assert "agreement" in text and "0.6667" in text


@pytest.mark.parametrize("rows, classes", [(NUM_TEST + 1, NUM_CLASSES), (NUM_TEST, 2)])
def test_a_table_for_another_test_set_is_refused(
    classification_run, tmp_path, capsys, rows, classes
):
    path = tmp_path / "probs.txt"
    np.savetxt(path, np.full((rows, classes), 1.0 / classes))
    before = sorted(p.name for p in classification_run.iterdir())
    code = main(["evaluate", str(classification_run), "--reference-probs", str(path)])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1, err
    assert (
        f"shape {rows} x {classes}" in err
        and f": {NUM_TEST} x {NUM_CLASSES} (test points x classes)" in err
    )
    assert sorted(p.name for p in classification_run.iterdir()) == before


@pytest.mark.parametrize(
    "content, message",
    [
        (b"\x00\x01garbled\xff", "not a table of probabilities"),
        (b"0.2 0.3 0.1\n", "sums to 0.6"),
    ],
)
def test_an_unreadable_file_is_refused(classification_run, tmp_path, capsys, content, message):
    path = tmp_path / "probs.csv"
    path.write_bytes(content)
    code = main(["evaluate", str(classification_run), "--reference-probs", str(path)])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and message in err


def test_released_reference_offline_and_with_corruption(
    classification_run, tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("BNNKIT_DATA_DIR", str(tmp_path))
    assert main(["evaluate", str(classification_run), "--reference-probs", "imdb_hmc"]) == 2
    err = capsys.readouterr().err
    assert "probs.csv not found: put it in" in err and "imdb_hmc" in err
    assert (
        main(
            [
                "evaluate",
                str(classification_run),
                "--reference-probs",
                "cifar10_hmc",
                "--corruption",
                "fog",
                "--severity",
                "1",
            ]
        )
        == 2
    )
    assert "--corruption 'fog' beside reference probabilities; allowed: no corruption" in (
        capsys.readouterr().err
    )
