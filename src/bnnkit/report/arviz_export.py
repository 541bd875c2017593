"""A run directory as ArviZ InferenceData, for ``bnnkit samples RUN --format netcdf``.

ArviZ is an optional extra (``pip install 'bnnkit[arviz]'``); nothing here imports it until
a conversion is asked for, so the rest of bnnkit never needs it. Both ArviZ 0.x (an
``InferenceData``) and ArviZ >= 1.0 (an xarray ``DataTree``) are produced from the same
xarray datasets, so either one's ``az.summary`` and ``az.plot_trace`` read the result.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

import numpy as np

from bnnkit import storage
from bnnkit.errors import ConfigError
from bnnkit.evaluation import check_out_file, run_samples
from bnnkit.posterior import Samples
from bnnkit.predict import predict
from bnnkit.runs import RunDir, load_run
from bnnkit.runs.provenance import package_version

MISSING_ARVIZ = "--format netcdf needs ArviZ: pip install 'bnnkit[arviz]'"

# metrics.jsonl key -> sample_stats name (ArviZ's conventions, so its plots find them).
SAMPLE_STATS = {
    "acceptance_rate": "acceptance_rate",
    "divergent": "diverging",
    "step_size": "step_size",
    "num_leapfrog": "n_steps",
    "log_posterior": "lp",
}
_STAT_DTYPES = {"diverging": bool, "n_steps": np.int64}


def require_arviz() -> Any:
    """The ``arviz`` module, once it and a netCDF writer are importable.

    Raises:
        ConfigError: ArviZ or both netCDF back ends (h5netcdf, netCDF4) are missing.
    """
    try:
        import arviz
    except ImportError:
        raise ConfigError(MISSING_ARVIZ) from None
    # ArviZ imports without a netCDF back end; the failure would only come at writing time,
    # after the predictive was computed.
    for backend in ("h5netcdf", "netCDF4"):
        with contextlib.suppress(ImportError):
            __import__(backend)
            return arviz
    raise ConfigError(MISSING_ARVIZ)


def variable_names(paths: list[str]) -> dict[str, str]:
    """Variable name per flattened parameter path: ``params/Dense_0/kernel`` -> ``Dense_0.kernel``.

    The network's ``params/`` collection is left out of the names; latents of the prior (or an
    inferred noise) keep their collection. Should that make two names equal, full paths are used.

    Example:
        >>> variable_names(["params/Dense_0/kernel", "noise"])
        {'params/Dense_0/kernel': 'Dense_0.kernel', 'noise': 'noise'}
    """
    short = {p: p.removeprefix("params/").replace("/", ".") for p in paths}
    if len(set(short.values())) < len(paths):
        return {p: p.replace("/", ".") for p in paths}
    return short


def kept_sample_stats(log: list[dict], units: list[int], num_chains: int) -> dict[str, np.ndarray]:
    """Per-chain sampler statistics of the kept iterations, each ``(chains, draws)``.

    Args:
        log: the run's ``metrics.jsonl`` records.
        units: the kept iterations, in the order of the stored draws.
        num_chains: the number of chains.

    A statistic is left out unless every kept iteration logged it, per chain or as one value
    shared by the chains (broadcast); a partial column would misalign draws and iterations.

    Example:
        >>> log = [{"iteration": 0, "acceptance_rate": [0.5, 0.7]},
        ...        {"iteration": 1, "acceptance_rate": [0.9, 1.0], "step_size": 0.1}]
        >>> stats = kept_sample_stats(log, [1], 2)
        >>> stats["acceptance_rate"].tolist(), stats["step_size"].tolist()
        ([[0.9], [1.0]], [[0.1], [0.1]])
    """
    by_unit = {record["iteration"]: record for record in log}  # a resumed unit: its last line
    records = [by_unit.get(u) for u in units]
    stats = {}
    for key, name in SAMPLE_STATS.items():
        columns = []
        for record in records:
            value = None if record is None else record.get(key)
            if isinstance(value, list | tuple) and len(value) == num_chains:
                columns.append(value)
            elif isinstance(value, int | float):  # bool is an int
                columns.append([value] * num_chains)
            else:
                break
        else:
            if columns:
                values = np.asarray(columns, dtype=_STAT_DTYPES.get(name, np.float64))
                stats[name] = values.T  # (draws, chains) -> (chains, draws)
    return stats


def _netcdf_dtype(a: np.ndarray) -> np.ndarray:
    # netCDF has no bfloat16/float16-like extension types; everything else is kept exactly.
    a = np.asarray(a)
    if a.dtype in (np.float32, np.float64) or a.dtype.kind in "iub":
        return a
    return a.astype(np.float32)


def to_inference_data(run_dir: str | os.PathLike) -> Any:
    """A run's kept samples, sampler statistics and test-set predictive as ArviZ InferenceData.

    Groups (sample dims ``chain`` and ``draw``, as in ``Samples``' ``(chains, samples, ...)``):

    - ``posterior``: every parameter leaf, named by its flattened path without the network's
      ``params/`` collection (``Dense_0.kernel``; prior latents keep theirs), with dims
      ``chain, draw`` and the leaf's own dims (``Dense_0.kernel_dim_0``, ...). Values are the
      stored ones, in the run's dtype. Approximate posteriors (VI, Laplace) give the draws
      their model average uses, taken with the run's evaluation key.
    - ``sample_stats``: from ``metrics.jsonl``, the kept iterations only, dims ``chain, draw``:
      ``acceptance_rate``, ``diverging`` (logged ``divergent``), ``step_size``, ``n_steps``
      (logged ``num_leapfrog``) and ``lp`` (logged ``log_posterior``), each where the method
      logs it. Left out for approximate posteriors, whose draws are no iterations.
    - ``posterior_predictive``: the predictions of each posterior draw on the test set, dims
      ``chain, draw, test_point``: regression ``y_mean`` and ``y_std`` (the Gaussian of each
      draw, in the targets' original units); classification ``y_probs`` with a ``class`` dim.
      A Laplace run's linearised (GLM) predictive is not used here: these are the network's
      outputs at the draws in ``posterior``, so that both groups line up draw by draw.
    - ``observed_data``: ``y``, the test targets (original units; integer labels), dim
      ``test_point``.

    Args:
        run_dir: a run directory with kept samples.

    Returns:
        An ``arviz.InferenceData`` with ArviZ 0.x, an ``xarray.DataTree`` with ArviZ >= 1.0;
        either has ``to_netcdf(path)``.

    Raises:
        ConfigError: ArviZ is missing, or the run is no run, damaged, or has no kept samples.

    Example:
        >>> import arviz as az  # doctest: +SKIP
        >>> idata = to_inference_data("runs/yacht_0")  # doctest: +SKIP
        >>> az.summary(idata, var_names=["Dense_0.kernel"])  # doctest: +SKIP
    """
    az = require_arviz()
    import xarray as xr

    record, problem, posterior, _ = load_run(run_dir, network=True)
    samples = run_samples(record, posterior)
    coords = {"chain": np.arange(samples.num_chains), "draw": np.arange(samples.num_samples)}
    groups: dict[str, xr.Dataset] = {"posterior": _posterior_group(samples, coords)}
    stats = _sample_stats_group(run_dir, posterior, samples, coords)
    if stats is not None:
        groups["sample_stats"] = stats
    groups.update(_predictive_groups(problem, samples, coords))
    attrs = {
        "inference_library": "bnnkit",
        "inference_library_version": package_version(),
        "method": str(record.get("method", "")),
        "dataset": problem.dataset.name,
    }
    for ds in groups.values():
        ds.attrs.update(attrs)
    if int(az.__version__.split(".")[0]) >= 1:
        return xr.DataTree.from_dict(groups)
    return az.InferenceData(**groups)


def _posterior_group(samples: Any, coords: dict[str, np.ndarray]) -> Any:
    """Every parameter leaf as a variable with dims ``chain, draw`` and its own."""
    import xarray as xr

    arrays = storage.flatten_tree(samples.params)
    names = variable_names(list(arrays))
    return xr.Dataset(
        {
            names[path]: (
                ("chain", "draw", *(f"{names[path]}_dim_{i}" for i in range(a.ndim - 2))),
                _netcdf_dtype(a),
            )
            for path, a in arrays.items()
        },
        coords=coords,
    )


def _sample_stats_group(
    run_dir: str | os.PathLike, posterior: Any, samples: Any, coords: dict[str, np.ndarray]
) -> Any:
    """The sampler's statistics of the kept iterations, or ``None``: an approximate posterior's
    draws are no iterations, and a run may log none."""
    import xarray as xr

    rundir = RunDir(run_dir)
    units = rundir.sample_units()
    # Only a sampler's own draws are iterations: one kept unit per draw.
    if not (isinstance(posterior, Samples) and len(units) == samples.num_samples):
        return None
    stats = kept_sample_stats(rundir.read_log(), units, samples.num_chains)
    if not stats:
        return None
    return xr.Dataset(
        {name: (("chain", "draw"), values) for name, values in stats.items()}, coords=coords
    )


def _predictive_groups(problem: Any, samples: Any, coords: dict[str, np.ndarray]) -> dict:
    """``posterior_predictive`` (each draw's predictions on the test set) and
    ``observed_data`` (the test targets, in original units)."""
    import xarray as xr

    dataset = problem.dataset
    n_test = len(dataset.x_test)
    # Every test point, not the first 1000 that function-space diagnostics look at.
    prediction = predict(problem, samples, dataset.x_test, max_diagnostic_points=n_test)
    point_coords = {"test_point": np.arange(n_test)}
    if prediction.task == "classification":
        probs = prediction.per_sample
        predictive = xr.Dataset(
            {"y_probs": (("chain", "draw", "test_point", "class"), probs)},
            coords={**coords, **point_coords, "class": np.arange(probs.shape[-1])},
        )
        observed = np.asarray(dataset.y_test)
    else:
        shape = (samples.num_chains, samples.num_samples, n_test)
        predictive = xr.Dataset(
            {
                "y_mean": (("chain", "draw", "test_point"), prediction.means.reshape(shape)),
                "y_std": (("chain", "draw", "test_point"), prediction.stds.reshape(shape)),
            },
            coords={**coords, **point_coords},
        )
        observed = (
            np.asarray(dataset.y_test, np.float64) * dataset.target_scale + dataset.target_shift
        )
    return {
        "posterior_predictive": predictive,
        "observed_data": xr.Dataset({"y": (("test_point",), observed)}, coords=point_coords),
    }


def group_names(idata: Any) -> list[str]:
    """The groups of an InferenceData (ArviZ 0.x) or of a DataTree (ArviZ >= 1.0)."""
    import xarray as xr

    if isinstance(idata, getattr(xr, "DataTree", ())):
        return list(idata.children)
    return list(idata.groups())


def write_netcdf(run_dir: str | os.PathLike, out: str | os.PathLike) -> Any:
    """Write :func:`to_inference_data` of a run to the netCDF file ``out``.

    ``out`` is checked, and ArviZ looked for, before the run is read; the file appears only
    complete (written beside it, then renamed), so a failure leaves nothing behind.

    Returns:
        The InferenceData written.

    Raises:
        ConfigError: ArviZ is missing, ``out`` cannot be written, or the run cannot be read.
    """
    # The --out the user gave first: where it points is wrong with or without ArviZ.
    check_out_file(out, ".nc", "samples")
    require_arviz()
    idata = to_inference_data(run_dir)
    out = os.path.abspath(os.fspath(out))
    # Not mkstemp: its 0600 file would keep those permissions after the rename.
    tmp = os.path.join(os.path.dirname(out), f".{os.path.basename(out)}.{os.getpid()}.tmp")
    try:
        idata.to_netcdf(tmp)
        os.replace(tmp, out)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return idata
