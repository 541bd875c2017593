"""Range checks declared with ``setting(bounds=...)``: each refuses its edge (or the first value
past it) in one line naming the flag and the range, and accepts the nearest allowed value."""

from __future__ import annotations

import pytest

from bnnkit import distributed
from bnnkit.errors import ConfigError
from bnnkit.inference import ensemble, sgd, sgmcmc, vi

EPOCHS = dict(init_step_size=1e-3, num_epochs=4, batch_size=8)

# (Config, required settings, field, refused value, allowed value, message)
CASES = [
    (
        sgd.Config,
        EPOCHS,
        "momentum_decay",
        1.0,
        0.999,
        "--momentum-decay 1.0 out of range; allowed: in [0, 1)",
    ),
    (sgd.Config, EPOCHS, "momentum_decay", -0.1, 0.0, "--momentum-decay -0.1 out of range"),
    (
        sgd.Config,
        EPOCHS,
        "clip_grad_norm",
        0.0,
        1e-12,
        "--clip-grad-norm 0.0 out of range; allowed: > 0",
    ),
    (
        ensemble.Config,
        dict(EPOCHS, num_members=2),
        "num_members",
        0,
        1,
        "--num-members 0 out of range; allowed: 1..65536",
    ),
    (sgmcmc.Config, EPOCHS, "momentum_decay", 1.0, 0.9, "--momentum-decay 1.0 out of range"),
    (
        sgmcmc.Config,
        EPOCHS,
        "rmsprop_decay",
        1.0,
        0.999,
        "--rmsprop-decay 1.0 out of range; allowed: in (0, 1)",
    ),
    (sgmcmc.Config, EPOCHS, "rmsprop_decay", 0.0, 1e-6, "--rmsprop-decay 0.0 out of range"),
    (
        sgmcmc.Config,
        EPOCHS,
        "final_step_size",
        0.0,
        1e-9,
        "--final-step-size 0.0 out of range; allowed: > 0",
    ),
    (
        sgmcmc.Config,
        EPOCHS,
        "ensemble_freq",
        0,
        1,
        "--ensemble-freq 0 out of range; allowed: 1..2147483647",
    ),
    (sgmcmc.Config, EPOCHS, "num_chains", 0, 1, "--num-chains 0 out of range; allowed: 1..65536"),
    (vi.Config, EPOCHS, "momentum_decay", 1.0, 0.5, "--momentum-decay 1.0 out of range"),
    (
        vi.Config,
        EPOCHS,
        "vi_sigma_init",
        0.0,
        1e-9,
        "--vi-sigma-init 0.0 out of range; allowed: > 0",
    ),
    (
        distributed.Hosts,
        {},
        "timeout",
        0,
        1,
        "--distributed-timeout 0 out of range; allowed: 1..604800",
    ),
    (
        distributed.Hosts,
        dict(coordinator_address="localhost:1", process_id=0),
        "num_processes",
        0,
        1,
        "--num-processes 0 out of range; allowed: 1..65536",
    ),
    (
        distributed.Hosts,
        dict(coordinator_address="localhost:1", num_processes=2),
        "process_id",
        -1,
        0,
        "--process-id -1 out of range; allowed: 0..65535",
    ),
]


@pytest.mark.parametrize(
    ("cls", "required", "name", "refused", "allowed", "message"),
    CASES,
    ids=[f"{c[0].__module__.rsplit('.', 1)[-1]}-{c[2]}-{c[3]}" for c in CASES],
)
def test_bound_refuses_its_edge_and_allows_inside(cls, required, name, refused, allowed, message):
    with pytest.raises(ConfigError) as raised:
        cls(**{**required, name: refused})
    assert str(raised.value).startswith(message), raised.value
    assert "\n" not in str(raised.value)
    assert getattr(cls(**{**required, name: allowed}), name) == allowed
