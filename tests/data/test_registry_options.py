"""The registry: every loader takes subset_train_to / data_dir; unknown options are refused."""

from __future__ import annotations

import numpy as np
import pytest

import bnnkit.data as data
from bnnkit.errors import ConfigError


def test_new_families_are_registered():
    names = data.available()
    for name in ("mnist", "fashion_mnist", "cifar10", "cifar100", "imdb", "cifar10_proxy", "yacht"):
        assert name in names


def test_uci_accepts_the_generic_options(tmp_path):
    full = data.load("yacht_0")
    ds = data.load("yacht_0", subset_train_to=50, data_dir=tmp_path, validation_size=27)
    assert ds.num_train == 50
    np.testing.assert_array_equal(ds.x_train, full.x_train[:50])
    np.testing.assert_array_equal(ds.info["validation"][0], full.x_train[-27:])
    assert data.load("yacht_0", subset_train_to=None, data_dir=None).num_train == 277


def test_unknown_option_is_refused():
    with pytest.raises(ConfigError, match="option 'batch'"):
        data.load("yacht_0", batch=3)
    with pytest.raises(ConfigError, match="validation_size 277"):
        data.load("yacht_0", validation_size=277)
