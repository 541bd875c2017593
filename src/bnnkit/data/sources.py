"""Where each dataset file comes from: canonical URLs, pinned hashes, licences, local layout.

This is the one table of download sources. Every hash is the one published by the data's
distributor:

- ``sha256`` where the distributor publishes one (the Keras ``mnist.npz`` and ``imdb.npz``, pinned
  in Keras' own ``load_data``);
- ``sha256`` of the released file for the HMC reference predictions (``cifar10_hmc``,
  ``imdb_hmc``), fetched from a fixed commit of the starter kit so the bytes cannot change;
- ``md5`` where only an md5 is published (MNIST / Fashion-MNIST IDX files, the CIFAR binary
  archives on the authors' page, the CIFAR-10-C archive on Zenodo). pooch checks ``"md5:..."``
  hashes the same way as sha256 ones.

Local files live under ``<data dir>/<folder>/`` (``folder`` below), e.g.
``$BNNKIT_DATA_DIR/mnist/mnist.npz``; downloads go to ``$BNNKIT_CACHE_DIR/<folder>/``.
"""

from __future__ import annotations

from typing import NamedTuple


class Remote(NamedTuple):
    """One downloadable file.

    Attributes:
        filename: name of the file on disk (in the dataset's folder).
        urls: canonical URL first, then public mirrors of the identical file.
        known_hash: pooch hash string, ``"sha256:<hex>"`` or ``"md5:<hex>"``.
    """

    filename: str
    urls: tuple[str, ...]
    known_hash: str


_KERAS = "https://storage.googleapis.com/tensorflow/tf-keras-datasets/"
_LECUN = "https://yann.lecun.com/exdb/mnist/"
_MNIST_MIRROR = "https://ossci-datasets.s3.amazonaws.com/mnist/"
_ZALANDO = "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"
_TORONTO = "https://www.cs.toronto.edu/~kriz/"
# The NeurIPS 2021 BDL competition starter kit, at the commit whose probs.csv files are the
# whitespace-delimited ones the hashes below pin (a later commit rewrote them comma-delimited).
_BDL_KIT = (
    "https://raw.githubusercontent.com/izmailovpavel/neurips_bdl_starter_kit/"
    "6743c848e5582f1ea60878bd2d71d6367ef826a3/data/"
)


def _served(filename: str, known_hash: str, *bases: str) -> Remote:
    """The file ``filename`` as served under each base URL (canonical first)."""
    return Remote(filename, tuple(base + filename for base in bases), known_hash)


# dataset folder -> the files a download fetches (alternatives for local use are listed by the
# loaders: e.g. MNIST also reads the four IDX files when they are on disk; "mnist_idx" is the
# fallback download of MNIST, into the same folder, when the Keras file is unreachable).
REMOTES: dict[str, tuple[Remote, ...]] = {
    "mnist": (
        _served(
            "mnist.npz",
            "sha256:731c5ac602752760c8e48fbffcf8c3b850d9dc2a2aedcf2cc48468fc17b673d1",
            _KERAS,
        ),
    ),
    "mnist_idx": (
        _served(
            "train-images-idx3-ubyte.gz",
            "md5:f68b3c2dcbeaaa9fbdd348bbdeb94873",
            _LECUN,
            _MNIST_MIRROR,
        ),
        _served(
            "train-labels-idx1-ubyte.gz",
            "md5:d53e105ee54ea40749a09fcbcd1e9432",
            _LECUN,
            _MNIST_MIRROR,
        ),
        _served(
            "t10k-images-idx3-ubyte.gz",
            "md5:9fb629c4189551a2d022fa330f9573f3",
            _LECUN,
            _MNIST_MIRROR,
        ),
        _served(
            "t10k-labels-idx1-ubyte.gz",
            "md5:ec29112dd5afa0611ce80d1b7f02629c",
            _LECUN,
            _MNIST_MIRROR,
        ),
    ),
    "fashion_mnist": (
        _served("train-images-idx3-ubyte.gz", "md5:8d4fb7e6c68d591d4c3dfef9ec88bf0d", _ZALANDO),
        _served("train-labels-idx1-ubyte.gz", "md5:25c81989df183df01b3e8a0aad5dffbe", _ZALANDO),
        _served("t10k-images-idx3-ubyte.gz", "md5:bef4ecab320f06d8554ea6380940ec79", _ZALANDO),
        _served("t10k-labels-idx1-ubyte.gz", "md5:bb300cfdad3c16e7a12a480ee83cd310", _ZALANDO),
    ),
    "cifar10": (
        _served("cifar-10-binary.tar.gz", "md5:c32a1d4ab5d03f1284b67883e8d87530", _TORONTO),
    ),
    "cifar100": (
        _served("cifar-100-binary.tar.gz", "md5:03b5dce01913d631647c71ecec9e9cb8", _TORONTO),
    ),
    "imdb": (
        _served(
            "imdb.npz",
            "sha256:69664113be75683a8fe16e3ed0ab59fda8886cb3cd7ada244f7d9544e4676b9f",
            _KERAS,
        ),
    ),
    "cifar10_c": (
        Remote(
            "CIFAR-10-C.tar",
            ("https://zenodo.org/records/2535967/files/CIFAR-10-C.tar",),
            "md5:56bf5dcef84df0e2308c6dcbcbbd8499",
        ),
    ),
    # HMC predictive probabilities of Izmailov et al. (2021), test points x classes.
    "cifar10_hmc": (
        Remote(
            "probs.csv",
            (_BDL_KIT + "cifar10/probs.csv",),
            "sha256:4299e2e90a445fcdc6b20ebfc6f233cb214c1930635c11b3bf9c4b7e1c23b4c6",
        ),
    ),
    "imdb_hmc": (
        Remote(
            "probs.csv",
            (_BDL_KIT + "imdb/probs.csv",),
            "sha256:7308a108ed1e411faed7f2bd25f74228f8e96d3baabc6b3da0e8229b5d7798db",
        ),
    ),
}

LICENCES: dict[str, str] = {
    "mnist": "MNIST (LeCun, Cortes & Burges); commonly cited as CC BY-SA 3.0",
    "fashion_mnist": "MIT, Copyright 2017 Zalando SE",
    "cifar10": "CIFAR-10 (Krizhevsky 2009); no explicit licence, free for research",
    "cifar100": "CIFAR-100 (Krizhevsky 2009); no explicit licence, free for research",
    "cifar10_c": "CIFAR-10-C (Hendrycks & Dietterich 2019), CC BY 4.0",
    "imdb": "Large Movie Review Dataset (Maas et al. 2011); Keras preprocessing",
    "cifar10_jpeg_proxy": "derived from CIFAR-10 (no explicit licence)",
    "cifar10_hmc": "HMC predictions released with the NeurIPS 2021 BDL competition starter kit "
    "(Izmailov et al. 2021); no explicit licence",
    "imdb_hmc": "HMC predictions released with the NeurIPS 2021 BDL competition starter kit "
    "(Izmailov et al. 2021); no explicit licence",
}
