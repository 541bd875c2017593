"""bnnkit.runs.sample: any log density over a pytree, with the driver's chains and verdict."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bnnkit.errors import ConfigError
from bnnkit.inference import hmc, nuts, sgd
from bnnkit.runs import faults, load_chains, sample
from bnnkit.runs.verification import verify
from mcmc_checks import assert_gaussian_moments

# A correlated 3-d Gaussian with scales over two orders of magnitude, split over two leaves.
MEAN = np.array([1.0, -2.0, 0.5])
COV = np.array([[1.0, 0.05, 0.0], [0.05, 0.01, 0.0], [0.0, 0.0, 1e-4]])
PRECISION = np.linalg.inv(COV)


def log_density(p):
    x = jnp.concatenate([p["a"], p["b"]]) - MEAN
    return -0.5 * x @ jnp.asarray(PRECISION, x.dtype) @ x


def start(num_chains):
    return {"a": jnp.zeros((num_chains, 2)), "b": jnp.zeros((num_chains, 1))}


def test_same_config_same_chains_and_the_seed_matters():
    config = hmc.Config(
        step_size=1e-2,
        trajectory_len=0.1,
        adapt="mass",
        num_chains=2,
        num_iterations=20,
        num_burn_in=10,
    )
    one, two = sample(log_density, start(2), config), sample(log_density, start(2), config)
    assert jax.tree.map(lambda x: x.shape, one.positions) == {"a": (2, 10, 2), "b": (2, 10, 1)}
    assert one.info.accepted.shape == (2, 20)
    np.testing.assert_array_equal(one.positions["a"], two.positions["a"])
    other = sample(log_density, start(2), hmc.Config(**{**config.to_dict(), "seed": 1}))
    assert not np.array_equal(one.positions["a"], other.positions["a"])


def test_refuses_minibatch_methods_and_positions_without_a_chain_axis():
    with pytest.raises(ConfigError, match="full-batch samplers"):
        sample(log_density, start(1), sgd.Config(init_step_size=1e-3, num_epochs=1, batch_size=1))
    config = hmc.Config(step_size=1e-2, trajectory_len=0.1, num_chains=3, num_iterations=4)
    with pytest.raises(ConfigError, match="leading axis of length --num-chains 3"):
        sample(log_density, start(2), config)


@pytest.mark.parametrize(
    ("density", "positions", "message"),
    [
        (
            lambda p: p["a"] ** 2,
            {"a": jnp.zeros((2, 3))},
            r"log_density gives shape \(3,\) float32 for one position; allowed: a scalar",
        ),
        (
            lambda p: jnp.sum(p["a"]) > 0,
            {"a": jnp.zeros((2, 3))},
            r"log_density gives shape \(\) bool for one position",
        ),
        (
            lambda p: (p["a"].sum(), p["a"].sum()),
            {"a": jnp.zeros((2, 3))},
            r"log_density gives a tuple for one position",
        ),
        (
            lambda p: jnp.sum(p["a"] ** 2.0),
            {"a": jnp.zeros((2, 3), jnp.int32)},
            r"initial position 'a' has dtype int32; allowed: real numbers",
        ),
    ],
    ids=["vector", "bool", "tuple", "integer start"],
)
def test_a_density_or_start_the_samplers_cannot_use_is_a_config_error(density, positions, message):
    """Python callers get one-line ConfigErrors naming what is wrong, not JAX's TypeErrors."""
    config = hmc.Config(step_size=1e-2, trajectory_len=0.1, num_chains=2, num_iterations=4)
    with pytest.raises(ConfigError, match=message):
        sample(density, positions, config)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["hmc-mass", "hmc-chees", "nuts", "hmc-auto"])
def test_sample_recovers_a_gaussian_and_says_it_converged(name):
    # Every mean and covariance entry within Bonferroni-corrected MCSE (tests/mcmc_checks.py).
    common = dict(step_size=1e-2, num_chains=4, num_iterations=1500, num_burn_in=500)
    config = (
        nuts.Config(**common)
        if name == "nuts"
        else hmc.Config(num_chains=4, num_iterations=1500)
        if name == "hmc-auto"
        # no knobs
        else hmc.Config(**common, trajectory_len=2.0, adapt=name.split("-")[1])
    )
    chains = sample(log_density, start(4), config)
    draws = np.concatenate([chains.positions["a"], chains.positions["b"]], -1)
    assert_gaussian_moments(draws.astype(np.float64), MEAN, COV, name)
    # Exactly Gaussian, adapted: ESS in the thousands, R-hat ≈ 1; the verdict must agree.
    assert chains.verdict.outcome == "certified", chains.verdict.problems
    # The warning's thresholds are the verdict's, so a converged run has none.
    assert chains.warnings == ()


# Stored runs: 20 iterations in chunks of 5, the first 10 adapting the step size and mass matrix
# (the first test's chains, whose programs it has compiled already).
STORED = dict(
    step_size=1e-2,
    trajectory_len=0.1,
    adapt="mass",
    num_chains=2,
    num_iterations=20,
    num_burn_in=10,
    checkpoint_every=5,
)


@pytest.fixture(scope="module")
def in_memory():
    return sample(log_density, start(2), hmc.Config(**STORED))


def assert_same_chains(got, want):
    # Bit for bit: positions, every iteration's info and the final (adapted) state.
    for part in ("positions", "info", "state"):
        assert jax.tree.structure(getattr(got, part)) == jax.tree.structure(getattr(want, part))
        for a, b in zip(
            jax.tree.leaves(getattr(got, part)), jax.tree.leaves(getattr(want, part)), strict=True
        ):
            assert np.asarray(a).dtype == np.asarray(b).dtype, part
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=part)


def snapshot(folder):
    return {
        str(f): f.read_bytes()
        for f in sorted(folder.rglob("*"))
        if f.is_file() and f.name != ".lock"
    }


class KilledError(Exception):
    pass


def crash_at(monkeypatch, name, count):
    """Raise at the count-th time the run reaches the point ``name`` of bnnkit.runs.faults,
    where a SIGKILL would stop it (the lock is released, the files stay as they are)."""
    reached = []

    def point(at):
        if at == name:
            reached.append(at)
            if len(reached) == count:
                raise KilledError(at)

    monkeypatch.setattr(faults, "point", point)


def test_a_stored_run_equals_the_in_memory_one_and_loads_back(in_memory, tmp_path):
    folder = tmp_path / "run"
    stored = sample(log_density, start(2), hmc.Config(**STORED), run_dir=folder, name="gauss")
    assert_same_chains(stored, in_memory)
    assert_same_chains(load_chains(folder), in_memory)
    assert stored.verdict == in_memory.verdict
    record = json.loads((folder / "run.json").read_text())
    assert (record["status"], record["problem"]["log_density"]) == ("finished", "gauss")
    assert record["problem"]["initial_positions"] == {"a": [[2, 2], "<f4"], "b": [[2, 1], "<f4"]}
    assert verify(folder) == ([], "finished: the state covers 20 of 20 iterations")
    # A finished run resumed with the same settings is read back, nothing written.
    before = snapshot(folder)
    assert_same_chains(
        sample(
            log_density, start(2), hmc.Config(**STORED), run_dir=folder, name="gauss", resume=True
        ),
        in_memory,
    )
    assert snapshot(folder) == before


def test_interrupted_runs_resume_bit_for_bit(in_memory, tmp_path, monkeypatch):
    folder, config = tmp_path / "run", hmc.Config(**STORED)
    # Cut off while writing the state of iterations 5..9 (still adapting): the state on disk
    # is that of iteration 5, the chunk after it is recomputed.
    crash_at(monkeypatch, "state-recorded", 2)
    with pytest.raises(KilledError):
        sample(log_density, start(2), config, run_dir=folder)
    assert verify(folder) == ([], "running: the state covers 5 of 20 iterations")
    # Then after the chunk of iterations 5..9, between two chunks.
    crash_at(monkeypatch, "unit-done", 1)
    with pytest.raises(KilledError):
        sample(log_density, start(2), config, run_dir=folder, resume=True)
    assert verify(folder)[1] == "running: the state covers 10 of 20 iterations"
    monkeypatch.undo()
    assert_same_chains(
        sample(log_density, start(2), config, run_dir=folder, resume=True), in_memory
    )
    assert_same_chains(load_chains(folder), in_memory)


@pytest.mark.parametrize(
    ("change", "setting"),
    [
        ({"step_size": 2e-2}, "step_size"),
        ({"seed": 1}, "seed"),
        ({"positions": 1.0}, "initial_positions_sha256"),
        ({"shapes": True}, "initial_positions"),
        ({"name": "other"}, "log_density"),
    ],
)
def test_resume_with_other_settings_is_refused_writing_nothing(tmp_path, change, setting):
    folder = tmp_path / "run"
    config = hmc.Config(**STORED)
    sample(log_density, start(2), config, run_dir=folder, name="gauss")
    before = snapshot(folder)
    positions = start(2)
    if "positions" in change:
        positions["a"] = positions["a"] + change["positions"]
    if "shapes" in change:  # the same 3 numbers per chain, split otherwise
        positions = {"a": jnp.zeros((2, 1)), "b": jnp.zeros((2, 2))}
    other = hmc.Config(
        **{**config.to_dict(), **{k: v for k, v in change.items() if k in ("step_size", "seed")}}
    )
    with pytest.raises(ConfigError, match=f"^--resume with a different config: {setting} was"):
        sample(
            log_density,
            positions,
            other,
            run_dir=folder,
            name=change.get("name", "gauss"),
            resume=True,
        )
    assert snapshot(folder) == before


def test_a_damaged_state_is_refused_on_resume(tmp_path):
    folder = tmp_path / "run"
    sample(log_density, start(2), hmc.Config(**STORED), run_dir=folder)
    state = folder / "state.npz"
    data = bytearray(state.read_bytes())
    data[len(data) // 2] ^= 1
    state.write_bytes(bytes(data))
    with pytest.raises(ConfigError) as refused:
        sample(log_density, start(2), hmc.Config(**STORED), run_dir=folder, resume=True)
    assert "\n" not in str(refused.value)
    assert "state.npz' is damaged or was edited" in str(refused.value)
    with pytest.raises(ConfigError, match=r"state\.npz' is damaged or was edited"):
        load_chains(folder)


@pytest.mark.slow
def test_nuts_stored_in_uneven_chunks_equals_in_memory(tmp_path):
    # 30 iterations in chunks of 7: four full chunks and a last one of 2, compiled apart.
    config = nuts.Config(
        step_size=1e-2, num_chains=2, num_iterations=30, num_burn_in=10, checkpoint_every=7
    )
    stored = sample(log_density, start(2), config, run_dir=tmp_path / "run")
    assert_same_chains(stored, sample(log_density, start(2), config))
    assert_same_chains(load_chains(tmp_path / "run"), stored)


def test_verify_finds_missing_and_unrecorded_chunks(tmp_path):
    folder = tmp_path / "run"
    sample(log_density, start(2), hmc.Config(**STORED), run_dir=folder)
    (folder / "samples" / "chunk_0000010.npz").rename(folder / "samples" / "chunk_0000011.npz")
    assert [(f.file, f.problem, f.repairable) for f in verify(folder)[0]] == [
        ("samples/chunk_0000010.npz", "is missing", False),
        ("samples/chunk_0000011.npz", "is not in the manifest", False),
    ]
    with pytest.raises(ConfigError, match=r"chunk_0000010\.npz' is missing"):
        load_chains(folder)


def test_a_stuck_sampler_is_named_while_it_runs_and_on_the_result(tmp_path, capsys):
    # No adaptation and a step of 0.5: 25 times the leapfrog's stability limit 2 sigma = 0.02
    # on the narrowest direction (sigma = 0.01), so the energy error grows geometrically along
    # every trajectory and every proposal is rejected: acceptance 0 by construction.
    config = hmc.Config(
        step_size=0.5,
        trajectory_len=2.0,
        adapt="none",
        num_chains=2,
        num_iterations=30,
        num_burn_in=10,
        checkpoint_every=10,
    )
    stored = sample(log_density, start(2), config, run_dir=tmp_path / "run", progress=True)
    out = capsys.readouterr().out
    assert len(stored.warnings) == 1, stored.warnings
    assert stored.warnings[0].startswith("the chains look stuck: acceptance 0.00 after burn-in")
    # Shown once, as soon as 10 sampling iterations were judged (the chunk ending at 20).
    assert out.count("warning: the chains look stuck") == 1, out
    assert out.index("warning:") < out.index("HMC 30/30")
    assert sample(log_density, start(2), config).warnings == stored.warnings
    assert load_chains(tmp_path / "run").warnings == stored.warnings
    # A resumed run counts the iterations before its restart too.
    shorter = hmc.Config(**{**config.to_dict(), "num_iterations": 20})
    sample(log_density, start(2), shorter, run_dir=tmp_path / "part")
    resumed = sample(log_density, start(2), config, run_dir=tmp_path / "part", resume=True)
    assert resumed.warnings == stored.warnings
