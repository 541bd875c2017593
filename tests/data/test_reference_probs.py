"""Released HMC reference probabilities: the reader's checks, pinned hashes and the offline error.

Fixtures are written as the starter kit's files are: ``numpy.savetxt`` rows of ``%.18e``
numbers separated by spaces (a later copy of the kit uses commas, also read).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pooch
import pytest

from bnnkit.data import catalog, reference_probs, sources
from bnnkit.errors import ConfigError


def write_table(path: Path, table: np.ndarray, delimiter: str = " ") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savetxt(path, table, delimiter=delimiter)  # the published format: %.18e per value
    return path


def dirichlet(n: int, classes: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).dirichlet(np.ones(classes), size=n)


@pytest.mark.parametrize("delimiter", [" ", ","])
def test_reads_the_published_format_exactly(tmp_path, delimiter):
    table = dirichlet(7, 3)
    path = write_table(tmp_path / "probs.csv", table, delimiter)
    assert path.read_text().splitlines()[0].count(delimiter) == 2
    # %.18e keeps every bit of a float64
    np.testing.assert_array_equal(reference_probs.read(path, shape=(7, 3)), table)


@pytest.mark.parametrize(
    "content, message",
    [
        (b"", "is empty"),
        (b"0.5 0.5\n0.5\n", "not a table of probabilities"),
        (b"0.5 zero\n", "not a table of probabilities"),
        (b"\x89PNG\r\n\x1a\n\x00\x00", "not a table of probabilities"),
        (b"0.1\n0.9\n", r"has shape \(2, 1\)"),
        (b"0.5 0.5\nnan 0.5\n", "not finite in row 2"),
        (b"1.5 -0.5\n", "negative probability in row 1"),
        (b"0.5 0.5\n2.0 3.0\n", "row 2 sums to 5"),
        (b"0.5 0.4989\n", "row 1 sums to 0.9989"),  # just outside the 1e-3 tolerance
    ],
)
def test_bad_tables_are_refused_with_the_reason(tmp_path, content, message):
    path = tmp_path / "probs.csv"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match=message):
        reference_probs.read(path)


def test_row_sums_within_tolerance_are_accepted(tmp_path):
    path = tmp_path / "probs.csv"
    path.write_text("0.5 0.4991\n0.3333 0.6667\n")  # 4-decimal rounding: off by <= 1e-3
    assert reference_probs.read(path).shape == (2, 2)


def test_wrong_shape_names_both(tmp_path):
    path = write_table(tmp_path / "probs.csv", dirichlet(4, 2))
    with pytest.raises(ConfigError, match=r"shape \(4, 2\), expected \(25000, 2\)"):
        reference_probs.read(path, shape=(25_000, 2))


def test_missing_file_and_unknown_name(tmp_path):
    with pytest.raises(ConfigError, match="neither a file nor a released reference"):
        reference_probs.load(tmp_path / "nothere.txt")
    with pytest.raises(ConfigError, match="unknown reference 'mnist_hmc'"):
        reference_probs.locate("mnist_hmc")


def test_catalog_lists_both_references(tmp_path):
    cards = {card.name: card for card in catalog.cards()}
    assert (cards["cifar10_hmc"].num_test, cards["cifar10_hmc"].outputs) == (10_000, 10)
    assert (cards["imdb_hmc"].num_test, cards["imdb_hmc"].outputs) == (25_000, 2)
    assert catalog.where("imdb_hmc", tmp_path) is None
    write_table(tmp_path / "imdb_hmc" / "probs.csv", dirichlet(2, 2))
    assert catalog.where("imdb_hmc", tmp_path) == str(tmp_path / "imdb_hmc" / "probs.csv")


def test_pinned_hashes_are_the_released_ones():
    assert sources.REMOTES["cifar10_hmc"][0].known_hash == (
        "sha256:4299e2e90a445fcdc6b20ebfc6f233cb214c1930635c11b3bf9c4b7e1c23b4c6"
    )
    assert sources.REMOTES["imdb_hmc"][0].known_hash == (
        "sha256:7308a108ed1e411faed7f2bd25f74228f8e96d3baabc6b3da0e8229b5d7798db"
    )


@pytest.mark.parametrize("name", ["cifar10_hmc", "imdb_hmc"])
def test_a_catalog_file_with_another_checksum_is_refused(tmp_path, monkeypatch, name):
    monkeypatch.setenv("BNNKIT_DATA_DIR", str(tmp_path))
    rows, classes = reference_probs.REFERENCES[name].shape
    write_table(tmp_path / name / "probs.csv", dirichlet(rows, classes))
    with pytest.raises(ConfigError, match=f"checksum mismatch for .*{name}.*pass its path"):
        reference_probs.load(name)


def test_a_catalog_file_with_the_pinned_checksum_is_read(tmp_path, monkeypatch):
    # The real files are not available offline: pin the hash of a stand-in of the right shape.
    path = write_table(tmp_path / "imdb_hmc" / "probs.csv", dirichlet(25_000, 2))
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    remote = sources.REMOTES["imdb_hmc"][0]._replace(known_hash=f"sha256:{digest}")
    monkeypatch.setitem(sources.REMOTES, "imdb_hmc", (remote,))
    probs, info = reference_probs.load("imdb_hmc", data_dir=tmp_path)
    assert probs.shape == (25_000, 2) and info["source"] == "imdb_hmc"
    assert "Keras" in info["order"] and info["file"] == str(path)


def test_offline_download_fails_with_the_data_dir_hint(offline_env, monkeypatch):
    tried = []

    def retrieve(url, **kwargs):
        tried.append(url)
        raise ConnectionError(f"cannot reach {url}")

    monkeypatch.setattr(pooch, "retrieve", retrieve)
    with pytest.raises(ConfigError) as err:
        reference_probs.load("cifar10_hmc")
    message = str(err.value)
    assert message.startswith("could not download cifar10_hmc (ConnectionError from 1 URL")
    assert "put probs.csv in <data dir>/cifar10_hmc/ and set BNNKIT_DATA_DIR" in message
    assert tried == [sources.REMOTES["cifar10_hmc"][0].urls[0]]
    assert not offline_env.exists()


def test_a_download_with_another_checksum_is_refused(offline_env, monkeypatch, tmp_path):
    # what pooch does when the downloaded bytes do not match the pinned hash
    def retrieve(url, known_hash, fname, path, progressbar):
        raise ValueError(
            f"SHA256 hash of downloaded file ({'0' * 64}) does not match the known "
            f"hash: expected {known_hash}"
        )

    monkeypatch.setattr(pooch, "retrieve", retrieve)
    with pytest.raises(ConfigError, match=r"checksum mismatch for probs\.csv downloaded from"):
        reference_probs.load("imdb_hmc")
