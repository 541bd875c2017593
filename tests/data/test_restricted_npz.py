"""The restricted unpickler: numpy arrays only, and only after the checksum matched."""

from __future__ import annotations

import hashlib
import io
import os
import pickle
import zipfile

import numpy as np
import pytest

from bnnkit.data.restricted_npz import RestrictedUnpickler, load_object_npz
from bnnkit.errors import ConfigError


class _Evil:
    def __reduce__(self):
        return (os.system, ("echo should-never-run",))


def test_refuses_os_system():
    payload = pickle.dumps(_Evil())
    with pytest.raises(pickle.UnpicklingError, match="refuses"):
        RestrictedUnpickler(io.BytesIO(payload)).load()
    assert b"system" in payload  # the pickle really references os.system


def test_refuses_builtins_eval():
    payload = b"cbuiltins\neval\n(S'1+1'\ntR."
    with pytest.raises(pickle.UnpicklingError, match=r"builtins\.eval"):
        RestrictedUnpickler(io.BytesIO(payload)).load()


def test_reads_object_array():
    array = np.empty(2, dtype=object)
    array[0], array[1] = [1, 2, 3], [4]
    out = RestrictedUnpickler(io.BytesIO(pickle.dumps(array))).load()
    assert out.dtype == object and out[0] == [1, 2, 3] and out[1] == [4]


def test_npz_with_evil_member_is_refused_even_with_right_hash(tmp_path):
    path = tmp_path / "evil.npz"
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": "|O", "fortran_order": False, "shape": (1,)}
    )
    npy = b"\x93NUMPY\x01\x00" + header.getvalue()[8:] + pickle.dumps(_Evil())
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("x_train.npy", npy)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    with pytest.raises(ConfigError, match="restricted unpickler"):
        load_object_npz(path, digest)


def test_hash_checked_before_reading(tmp_path):
    path = tmp_path / "a.npz"
    np.savez(path, y=np.arange(3))
    with pytest.raises(ConfigError, match="checksum mismatch"):
        load_object_npz(path, "0" * 64)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    np.testing.assert_array_equal(load_object_npz(path, f"sha256:{digest}")["y"], np.arange(3))
