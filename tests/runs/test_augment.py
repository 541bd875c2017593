"""--augment: a fresh crop and flip per minibatch from explicit keys, reproduced on resume."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bnnkit import runs
from bnnkit.errors import ConfigError
from bnnkit.inference import ensemble, sgd
from bnnkit.inference.base import Method
from bnnkit.problem import ProblemConfig
from bnnkit.runs.provenance import settings_digest
from bnnkit.runs.units import make_epoch
from bnnkit.types import Batch
from cli_checks import stored_files as stored

STEPS, BATCH = 4, 2


class Seen(NamedTuple):
    step: jax.Array
    inputs: jax.Array  # (STEPS, BATCH, H, W, C): what each step of the epoch was given


def recording_method() -> Method:
    """A method whose state is the inputs of every step, so an epoch shows what it fed."""

    def step(key, state, batch):
        inputs = jax.lax.dynamic_update_index_in_dim(state.inputs, batch.x, state.step, 0)
        return Seen(state.step + 1, inputs), Seen(state.step, jnp.zeros(()))

    return Method(init=None, step=step, posterior=None, position=None)


def crops(image: np.ndarray) -> list[np.ndarray]:
    padded = np.pad(image, ((4, 4), (4, 4), (0, 0)))
    h, w = image.shape[:2]
    out = [padded[dy : dy + h, dx : dx + w] for dy in range(9) for dx in range(9)]
    return out + [c[:, ::-1] for c in out]


def test_each_step_gets_its_own_crops_and_the_same_again_for_the_same_keys():
    # Every training image is the same, so the data order cannot make two steps differ: only
    # the augmentation can, and it must, since each step folds its own index into the key.
    image = np.arange(1, 8 * 8 + 1, dtype=np.float32).reshape(8, 8, 1)
    train = Batch(
        jnp.asarray(np.repeat(image[None], STEPS * BATCH, 0)), jnp.zeros(STEPS * BATCH, jnp.int32)
    )
    start = Seen(jnp.zeros((), jnp.int32), jnp.zeros((STEPS, BATCH, 8, 8, 1)))
    epoch = jax.jit(make_epoch(recording_method(), BATCH, augment=True))
    keys = jax.random.split(jax.random.PRNGKey(0), 3)

    def seen(epoch_index, augment_key=keys[2]):
        state, _ = epoch(start, keys[0], keys[1], epoch_index, train, augment_key)
        return np.asarray(state.inputs)

    first = seen(0)
    candidates = crops(image)
    assert all(any(np.array_equal(x, c) for c in candidates) for x in first.reshape(-1, 8, 8, 1))
    # 162 equally likely, distinct crops (81 offsets, flipped or not): two steps agree in both
    # of their crops with probability 1/162², some pair of the 4 steps with less than 3e-4.
    assert len({step.tobytes() for step in first}) == STEPS
    np.testing.assert_array_equal(seen(0), first)
    assert not np.array_equal(seen(1), first)  # another epoch, other crops
    assert not np.array_equal(seen(0, keys[0]), first)  # another member's key, other crops
    plain, _ = jax.jit(make_epoch(recording_method(), BATCH))(start, keys[0], keys[1], 0, train)
    assert np.all(np.asarray(plain.inputs) == image)  # without --augment the inputs as stored


@pytest.fixture(scope="module")
def images(tmp_path_factory) -> ProblemConfig:
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, size=(40, 8, 8, 1), dtype=np.uint8)
    y = (x[:, :, :4].mean((1, 2, 3)) > x[:, :, 4:].mean((1, 2, 3))).astype(np.int64)
    path = tmp_path_factory.mktemp("data") / "images.npz"
    np.savez(path, x_train=x[:32], y_train=y[:32], x_test=x[32:], y_test=y[32:])
    return ProblemConfig(dataset=str(path), model="linear")


def config(num_epochs: int, augment: bool = True) -> sgd.Config:
    return sgd.Config(
        init_step_size=1e-3, num_epochs=num_epochs, batch_size=8, seed=3, augment=augment
    )


def uninterrupted(images, tmp_path_factory, augment: bool) -> Path:
    """A 3-epoch run; a copy of it after its second epoch is left beside it, as a crash would
    have left it (one compilation for both: the tests must stay short)."""
    path = tmp_path_factory.mktemp("runs") / "run"

    def copy_after_second_epoch(epoch, log):
        if epoch == 1:
            shutil.copytree(path, path.parent / "crashed", ignore=shutil.ignore_patterns(".lock"))

    runs.run(images, config(3, augment), path, progress=False, on_unit=copy_after_second_epoch)
    record = json.loads((path / "run.json").read_text())
    assert record["method_config"]["augment"] is augment is record["loop"]["augment"]
    return path


@pytest.fixture(scope="module")
def augmented(images, tmp_path_factory) -> Path:
    return uninterrupted(images, tmp_path_factory, augment=True)


@pytest.fixture(scope="module")
def plain(images, tmp_path_factory) -> Path:
    return uninterrupted(images, tmp_path_factory, augment=False)


def assert_identical(a: dict, b: dict) -> None:
    assert sorted(a) == sorted(b)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)


@pytest.mark.slow
def test_augmented_training_differs_and_resumes_bit_for_bit(images, augmented, plain, tmp_path):
    crashed = Path(shutil.copytree(augmented.parent / "crashed", tmp_path / "crashed"))
    assert json.loads((crashed / "run.json").read_text())["status"] == "running"
    runs.run(images, config(3), crashed, resume=True, progress=False)
    # Same seed, same crops: the resumed run redoes epoch 3's exactly.
    assert_identical(stored(crashed), stored(augmented))
    unaugmented, augmented_ = stored(plain), stored(augmented)
    params = [k for k in unaugmented if "params" in k]
    assert params and all(not np.array_equal(unaugmented[k], augmented_[k]) for k in params)


def test_a_run_stored_before_augment_existed_resumes_unaugmented(images, plain, tmp_path):
    old = Path(shutil.copytree(plain, tmp_path / "old"))
    record = json.loads((old / "run.json").read_text())
    del record["method_config"]["augment"]
    del record["loop"]["augment"]
    record["settings_sha256"] = settings_digest(record)  # as that older bnnkit wrote it
    (old / "run.json").write_text(json.dumps(record))
    with pytest.raises(ConfigError, match="augment was False in the stored run but is True"):
        runs.run(images, config(3, augment=True), old, resume=True, progress=False)
    # Accepted as the unaugmented run it was (finished already: nothing to recompute).
    runs.run(images, config(3, augment=False), old, resume=True, progress=False)
    assert json.loads((old / "run.json").read_text())["method_config"]["augment"] is False


@pytest.mark.slow
def test_members_crop_alike_vmapped_or_one_after_another(images, tmp_path):
    # Member m takes its own augmentation key on either path; in float64 the two paths differ
    # only by the order of floating-point sums (the tolerance of the unaugmented check).
    problem = dataclasses.replace(images, float64=True)

    def config(sequential: bool) -> ensemble.Config:
        return ensemble.Config(
            init_step_size=1e-3,
            num_epochs=2,
            batch_size=8,
            num_members=2,
            seed=3,
            augment=True,
            sequential=sequential,
        )

    runs.run(problem, config(False), tmp_path / "v", progress=False)
    runs.run(problem, config(True), tmp_path / "s", progress=False)
    vmapped, sequential = stored(tmp_path / "v"), stored(tmp_path / "s")
    assert sorted(vmapped) == sorted(sequential)
    for key in vmapped:
        if np.issubdtype(vmapped[key].dtype, np.floating):
            np.testing.assert_allclose(
                vmapped[key], sequential[key], rtol=1e-10, atol=1e-12, err_msg=key
            )
        else:  # counts and names
            np.testing.assert_array_equal(vmapped[key], sequential[key], err_msg=key)
    kernel = vmapped["state/position/params/Dense_0/kernel"]
    assert not np.allclose(kernel[0], kernel[1])  # members: own start, order and crops
