"""Several devices (simulated CPU devices): chains or data split with jax.sharding."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np

SCRIPT = r"""
import json, sys
import jax
import numpy as np
from bnnkit import chains, io
from bnnkit.problem import ProblemConfig

assert jax.device_count() == 2, jax.devices()
problem = ProblemConfig(dataset="yacht_0", model="mlp_regression_small")
config = chains.HMCConfig(step_size=2e-4, trajectory_len=1e-3, num_iterations=4, num_burn_in=1,
                          num_chains=2, seed=3)
out = {}
for mode in ("none", "chains", "data"):
    path = f"{sys.argv[1]}/{mode}"
    # 277 training rows do not split over 2 devices: take the first 276 for the data split.
    pc = ProblemConfig(**{**problem.__dict__, "subset_train_to": 276})
    chains.run(pc, config, path, progress=False, shard=mode)
    rundir = io.RunDir(path)
    out[mode] = {f"{it}/{k}": v.tolist() for it in rundir.sample_iterations()
                 for k, v in io.load_arrays(rundir.sample_file(it)).items()}
print(json.dumps(out))
"""


def test_chains_and_data_sharding_match_one_device(tmp_path):
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=2",
           "JAX_PLATFORMS": "cpu"}
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path)], capture_output=True,
                          text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert sorted(out["none"]) == sorted(out["chains"]) == sorted(out["data"])
    for key, value in out["none"].items():
        # Chains split over devices do exactly the same arithmetic per chain.
        np.testing.assert_array_equal(out["chains"][key], value, err_msg=key)
        # A data split reorders the gradient's sum: equal up to float32 rounding.
        np.testing.assert_allclose(out["data"][key], value, rtol=1e-4, atol=1e-5, err_msg=key)
