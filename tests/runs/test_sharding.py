"""Several devices (simulated CPU devices): chains or data split with jax.sharding.

What is guaranteed, and tested here:

- A full-batch gradient with the data split over devices is the same sum taken in another
  order (per-device partial sums, then a cross-device sum). In float32 two orders of a sum of n
  terms differ by at most ``2 γ_n Σ_i |x_i|`` with ``γ_n = n u / (1 − n u)``, ``u = 2⁻²⁴``
  (Higham 2002, §4.2). Each per-example term is itself a dot product over at most K hidden
  units, so n is taken as N + K. The test checks every gradient component against that bound,
  computed from the per-example terms in float64.
- Splitting chains over devices changes no sum within a chain, but XLA compiles the per-device
  program for a smaller batch of chains and may then order a reduction differently, so
  bit-equality is not promised either (it held on some machines, not on all).
- A whole run therefore agrees with the one-device run up to rounding: in float64 the rounding
  of each gradient is ~1e-14 relative, and 4 iterations of 5 near-identity leapfrog steps keep
  the accumulated difference below 1e-12; the runs are compared at rtol 1e-9, a thousand times
  that, which an error in placement (a chain on the wrong data, a missing device's share)
  exceeds by many orders of magnitude.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np

SCRIPT = r"""
import json, sys
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec, Mesh
from bnnkit import runs, storage
from bnnkit.inference import hmc
from bnnkit.problem import ProblemConfig, build
from bnnkit.runs import RunDir
from bnnkit.types import Batch

assert jax.device_count() == 2, jax.devices()
out = {}

# --- one full-batch gradient, float32, data split over the devices --------------------------
# 277 training rows do not split over 2 devices: the first 276.
problem = build(ProblemConfig("yacht_0", "mlp_regression_small", subset_train_to=276))
params = problem.init_params(jax.random.PRNGKey(0))
batch = problem.train_batch()
grad = jax.jit(jax.grad(problem.log_posterior))
one = grad(params, batch)
mesh = Mesh(np.array(jax.devices()), ("d",))
split = jax.device_put(batch, NamedSharding(mesh, PartitionSpec("d")))
two = grad(params, split)
# Per-example terms of the gradient, and the prior's, in float64: Σ|x_i| of each component.
with jax.enable_x64(True):
    lp = problem.log_posterior
    p64 = jax.tree.map(lambda a: jnp.asarray(a, jnp.float64), params)
    x64, y64 = (jnp.asarray(a, jnp.float64) for a in (batch.x, batch.y))
    def term(p, x, y):
        return lp.tempered_log_likelihood(p, Batch(x[None], y[None])) / lp.num_data
    per_example = jax.vmap(jax.grad(term), in_axes=(None, 0, 0))(p64, x64, y64)
    prior = jax.grad(lp.tempered_log_prior)(p64)
    magnitude = jax.tree.map(lambda g, q: jnp.sum(jnp.abs(g), 0) + jnp.abs(q), per_example,
                             prior)
n = 276 + 64
u = 2.0 ** -24
gamma = n * u / (1 - n * u)
ratios = [float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))
                       / (2 * gamma * np.asarray(m) + np.finfo(np.float64).tiny)))
          for a, b, m in zip(jax.tree.leaves(one), jax.tree.leaves(two),
                             jax.tree.leaves(magnitude))]
out["gradient_bound_ratio"] = max(ratios)
out["gradient_bit_identical"] = all(
    bool(np.array_equal(a, b)) for a, b in zip(jax.tree.leaves(one), jax.tree.leaves(two)))

# --- whole runs, float64, every placement -----------------------------------------------------
problem64 = ProblemConfig("yacht_0", "mlp_regression_small", subset_train_to=276, float64=True)
config = hmc.Config(step_size=2e-4, trajectory_len=1e-3, num_iterations=4, num_burn_in=1,
                    num_chains=2, seed=3)
for mode in ("none", "chains", "data"):
    path = f"{sys.argv[1]}/{mode}"
    runs.run(problem64, config, path, progress=False, shard=mode)
    rundir = RunDir(path)
    out[mode] = {f"{u}/{k}": v.tolist() for u in rundir.sample_units()
                 for k, v in storage.load_arrays(rundir.sample_file(u)).items()
                 if not k.startswith("__")}
print(json.dumps(out))
"""


def test_sharded_gradient_and_runs_match_one_device(tmp_path):
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=2",
           "JAX_PLATFORMS": "cpu"}
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path)], capture_output=True,
                          text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    # Within the float32 rounding bound of the sum, component by component.
    assert out["gradient_bound_ratio"] <= 1.0, out["gradient_bound_ratio"]
    assert sorted(out["none"]) == sorted(out["chains"]) == sorted(out["data"])
    assert len(out["none"]) == 3 * 4  # 3 kept iterations x 4 parameter leaves
    for key, value in out["none"].items():
        for mode in ("chains", "data"):
            np.testing.assert_allclose(out[mode][key], value, rtol=1e-9, atol=1e-12,
                                       err_msg=f"{mode} {key}")
