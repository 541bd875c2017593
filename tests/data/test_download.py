"""Downloads through a localhost HTTP server: pinned hashes, no partial files, offline errors."""

from __future__ import annotations

import functools
import hashlib
import http.server
import socket
import threading

import numpy as np
import pytest

import bnnkit.data as data
from bnnkit.data import fetch, sources
from bnnkit.errors import ConfigError


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture
def server(tmp_path):
    served = tmp_path / "served"
    served.mkdir()
    handler = functools.partial(_Quiet, directory=str(served))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield served, f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()
    httpd.server_close()


def _closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/nothing.bin"


def test_download_verifies_hash(server, offline_env):
    served, url = server
    (served / "blob.bin").write_bytes(b"hello bnnkit")
    digest = hashlib.sha256(b"hello bnnkit").hexdigest()
    remote = sources.Remote("blob.bin", (url + "blob.bin",), f"sha256:{digest}")
    path = fetch.download("demo", remote)
    assert path == offline_env / "demo" / "blob.bin" and path.read_bytes() == b"hello bnnkit"


def test_checksum_mismatch_leaves_no_file(server, offline_env):
    served, url = server
    (served / "blob.bin").write_bytes(b"tampered")
    remote = sources.Remote("blob.bin", (url + "blob.bin",), "sha256:" + "0" * 64)
    with pytest.raises(ConfigError, match=r"checksum mismatch for blob\.bin"):
        fetch.download("demo", remote)
    folder = offline_env / "demo"
    assert not folder.exists() or list(folder.iterdir()) == []


def test_mirror_used_when_first_url_fails(server, offline_env):
    served, url = server
    (served / "blob.bin").write_bytes(b"x")
    remote = sources.Remote(
        "blob.bin", (_closed_port_url(), url + "blob.bin"), "md5:" + hashlib.md5(b"x").hexdigest()
    )
    assert fetch.download("demo", remote).read_bytes() == b"x"


def test_offline_error_says_where_to_put_the_file(offline_env):
    remote = sources.Remote("blob.bin", (_closed_port_url(),), "sha256:" + "0" * 64)
    with pytest.raises(
        ConfigError,
        match=r"could not download demo .*put blob\.bin in "
        r"<data dir>/demo/",
    ):
        fetch.download("demo", remote)


def test_mnist_downloads_into_cache_then_reuses_it(server, offline_env, monkeypatch):
    served, url = server
    rng = np.random.default_rng(0)
    np.savez(
        served / "mnist.npz",
        x_train=rng.integers(0, 255, (6, 28, 28), dtype=np.uint8),
        y_train=np.arange(6, dtype=np.uint8),
        x_test=np.zeros((2, 28, 28), np.uint8),
        y_test=np.zeros(2, np.uint8),
    )
    digest = hashlib.sha256((served / "mnist.npz").read_bytes()).hexdigest()
    monkeypatch.setitem(
        sources.REMOTES,
        "mnist",
        (sources.Remote("mnist.npz", (url + "mnist.npz",), f"sha256:{digest}"),),
    )
    assert data.load("mnist").num_train == 6
    (served / "mnist.npz").unlink()  # second load must not need the server
    assert data.load("mnist", subset_train_to=3).num_train == 3


def test_data_dir_never_downloads(tmp_path, monkeypatch):
    monkeypatch.setenv("BNNKIT_DATA_DIR", str(tmp_path))
    monkeypatch.setitem(
        sources.REMOTES,
        "cifar10",
        (sources.Remote("cifar-10-binary.tar.gz", ("http://127.0.0.1:9/never",), "md5:0"),),
    )
    with pytest.raises(ConfigError, match=f"not found: put it in {tmp_path}/cifar10/"):
        data.load("cifar10")
    with pytest.raises(ConfigError, match="is not a directory"):
        data.load("cifar10", data_dir=tmp_path / "absent")


def test_mnist_falls_back_to_idx_files(server, offline_env, monkeypatch):
    served, url = server
    import gzip

    from bnnkit.data import mnist

    arrays = {
        "x_train": np.ones((3, 28, 28), np.uint8),
        "y_train": np.arange(3, dtype=np.uint8),
        "x_test": np.zeros((1, 28, 28), np.uint8),
        "y_test": np.zeros(1, np.uint8),
    }
    remotes = []
    for key, stem in mnist.IDX_FILES.items():
        array = arrays[key]
        header = bytes([0, 0, 8, array.ndim]) + b"".join(d.to_bytes(4, "big") for d in array.shape)
        payload = gzip.compress(header + array.tobytes())
        (served / f"{stem}.gz").write_bytes(payload)
        remotes.append(
            sources.Remote(
                f"{stem}.gz", (url + f"{stem}.gz",), "md5:" + hashlib.md5(payload).hexdigest()
            )
        )
    monkeypatch.setitem(
        sources.REMOTES,
        "mnist",
        (sources.Remote("mnist.npz", (_closed_port_url(),), "sha256:" + "0" * 64),),
    )
    monkeypatch.setitem(sources.REMOTES, "mnist_idx", tuple(remotes))
    ds = data.load("mnist")
    np.testing.assert_array_equal(ds.y_train, [0, 1, 2])
    assert (offline_env / "mnist" / "t10k-labels-idx1-ubyte.gz").is_file()
