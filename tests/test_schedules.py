"""Step-size schedules: their values at the documented steps/epochs."""

from __future__ import annotations

import numpy as np
import pytest

from bnnkit import schedules
from bnnkit.errors import ConfigError


def test_cosine_values():
    s = schedules.cosine(0.1, 100)
    np.testing.assert_allclose(
        [s(0), s(25), s(50), s(100), s(150)],
        [0.1, 0.1 * 0.5 * (1 + np.cos(np.pi / 4)), 0.05, 0.0, 0.0],
        rtol=1e-6,
        atol=1e-12,
    )


def test_constant_after_cosine_burnin_values():
    s = schedules.constant_after_cosine_burnin(1e-2, 1e-4, burnin_steps=20)
    mid = 1e-4 + (1e-2 - 1e-4) * 0.5 * (1 + np.cos(np.pi / 2))
    np.testing.assert_allclose(
        [s(0), s(10), s(20), s(21), s(10_000)], [1e-2, mid, 1e-4, 1e-4, 1e-4], rtol=1e-5
    )


def test_cyclical_values_per_epoch():
    # 10 steps per epoch, 2 burn-in epochs, cycles of 3 epochs: constant through step 19, then
    # each cycle starts at η₀ (steps 20, 50, 80), is at half at 1.5 epochs into it (35), and
    # ends near 0 on its last step (49).
    spe = 10
    s = schedules.cyclical_cosine(0.2, burnin_steps=2 * spe, cycle_steps=3 * spe)
    np.testing.assert_allclose(
        [s(0), s(19), s(20), s(35), s(50), s(80)], [0.2, 0.2, 0.2, 0.1, 0.2, 0.2], rtol=1e-6
    )
    assert float(s(49)) == pytest.approx(0.2 * 0.5 * (1 + np.cos(np.pi * 29 / 30)), rel=1e-5)
    assert float(s(49)) < 1e-3


@pytest.mark.parametrize(
    "make",
    [
        lambda: schedules.cosine(0.0, 10),
        lambda: schedules.cosine(-1.0, 10),
        lambda: schedules.cosine(float("nan"), 10),
        lambda: schedules.cosine(0.1, 0),
        lambda: schedules.constant_after_cosine_burnin(0.1, 0.0, 5),
        lambda: schedules.cyclical_cosine(0.1, 0, 0),
    ],
)
def test_invalid_schedules_refused(make):
    with pytest.raises(ConfigError):
        make()
