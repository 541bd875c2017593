"""The posterior density on the plane through three parameter vectors (Izmailov et al. 2021).

Given positions θ_A, θ_B, θ_C (three runs' last samples, say), the plane through them is
spanned, as in bnn_hmc's ``make_posterior_surface_plot.py``, by Gram–Schmidt:

    u = θ_B − θ_A,   v = (θ_C − θ_A) − (⟨u, θ_C − θ_A⟩ / ‖u‖²) u,
    θ(a, b) = θ_A + a·u + b·v.

So the horizontal coordinate ``a`` is in units of ‖u‖ and the vertical ``b`` in units of ‖v‖,
the distance of C from the line AB: A = (0, 0), B = (1, 0) and C = (⟨u, θ_C − θ_A⟩/‖u‖², 1).
(bnn_hmc draws C at (0.5, 1) whatever its projection; here it sits where it is.) The default
window, −0.25..1.25 both ways on a 20 × 20 grid, is bnn_hmc's.

At every grid point the fields are taken from the problem's
:class:`~bnnkit.log_posterior.LogPosterior` on the full training set:

- log likelihood ``Σ_i log p(y_i | x_i, θ)`` (untempered, :meth:`LogPosterior.log_likelihood`),
- log prior ``log p(θ)`` (untempered, :meth:`LogPosterior.log_prior`),
- log posterior ``[log p(θ) + Σ_i log p(y_i | x_i, θ)] / T`` (the run's own temperature,
  :meth:`LogPosterior.__call__`).

bnn_hmc stores its likelihood and prior already divided by T; at T = 1 the two agree.

:func:`posterior_surface` evaluates ``chunk_size`` grid points per jitted, vmapped call and
writes each chunk atomically as it finishes, so a killed grid continues with ``resume=True``
where it stopped; ``bnnkit surface`` is its command line. The plane is made in
:mod:`~bnnkit.experiments.surface_plane` and the three points are read and checked in
:mod:`~bnnkit.experiments.surface_points`; this module evaluates the grid and writes it.

Example:
    >>> a, b, c = {"w": np.zeros(2)}, {"w": np.array([2.0, 0.0])}, {"w": np.array([1.0, 3.0])}
    >>> p = plane(a, b, c)
    >>> p.u_norm, p.v_norm, p.points.tolist()
    (2.0, 3.0, [[0.0, 0.0], [1.0, 0.0], [0.5, 1.0]])
    >>> p.position(0.5, 1.0)["w"].tolist()  # C itself
    [1.0, 3.0]
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from bnnkit import problem as problem_lib
from bnnkit import storage
from bnnkit.errors import ConfigError
from bnnkit.experiments.run_reuse import clear_outputs
from bnnkit.experiments.surface_plane import Plane, flatten, plane
from bnnkit.experiments.surface_points import SAME_POSTERIOR, load_points
from bnnkit.experiments.surface_points import points_problem as points_problem
from bnnkit.experiments.surface_points import split_point as split_point
from bnnkit.settings import check_at_least, check_numbers, flag, setting
from bnnkit.types import Params

# points_problem and split_point are named here too: ``bnnkit surface`` reads them from this
# module, the experiment's public face.

#: The files an output folder holds (besides its lock and the chunks' folder).
SETTINGS_FILE = "surface.json"
SURFACE_FILE = "surface.npz"
CHUNKS_DIR = "chunks"
FIELDS = ("log_posterior", "log_likelihood", "log_prior")
PLOTS = {name: f"{name}.png" for name in FIELDS}


@dataclasses.dataclass(frozen=True, kw_only=True)
class Config:
    """The grid: its window in plane coordinates, its size, and how many points per call."""

    #: At most 1024 points along an axis: the grid's 2^20 full-batch evaluations are already a
    #: long job (docs/performance.md), and a larger grid's arrays would not fit in memory.
    grid_size: int = setting(20, help="grid points along each axis", bounds=(2, 1024))
    limit_left: float = setting(
        -0.25, help="left end of the horizontal axis, in units of ‖θ_B − θ_A‖ (A at 0, B at 1)"
    )
    limit_right: float = setting(1.25, help="right end of the horizontal axis")
    limit_bottom: float = setting(
        -0.25,
        help="bottom of the vertical axis, in units of C's distance from the line AB (C at 1)",
    )
    limit_top: float = setting(1.25, help="top of the vertical axis")
    chunk_size: int = setting(
        20,
        help="grid points evaluated per jitted, vmapped call (bounds "
        "memory: each holds the network's outputs on the full "
        "training set)",
        bounds=(1, 2**20),
    )

    def __post_init__(self) -> None:
        cls = type(self)
        check_numbers(self)
        check_at_least(cls, "grid_size", self.grid_size, 2)
        check_at_least(cls, "chunk_size", self.chunk_size, 1)
        for low, high in (("limit_left", "limit_right"), ("limit_bottom", "limit_top")):
            if not getattr(self, low) < getattr(self, high):
                raise ConfigError(
                    f"{flag(cls, low)} {getattr(self, low)} must be below {flag(cls, high)} "
                    f"{getattr(self, high)}"
                )

    def grid(self) -> tuple[np.ndarray, np.ndarray]:
        """The horizontal and vertical coordinates, ``grid_size`` each (``linspace``)."""
        return (
            np.linspace(self.limit_left, self.limit_right, self.grid_size),
            np.linspace(self.limit_bottom, self.limit_top, self.grid_size),
        )

    def window(self) -> dict[str, Any]:
        """What decides the grid's values (not ``chunk_size``, which may change on resume)."""
        return {k: v for k, v in dataclasses.asdict(self).items() if k != "chunk_size"}


@dataclasses.dataclass(frozen=True)
class Surface:
    """The three fields on the grid, and where the points are.

    Attributes:
        u: (n,) horizontal coordinates, in units of ``u_norm`` = ‖θ_B − θ_A‖.
        v: (n,) vertical coordinates, in units of ``v_norm`` (C's distance from the line AB).
        log_posterior: (n, n) tempered log posterior; ``[i, j]`` is at ``(u[i], v[j])``.
        log_likelihood: (n, n) ``Σ_i log p(y_i | x_i, θ)`` on the full training set.
        log_prior: (n, n) ``log p(θ)``.
        points: (3, 2) coordinates of A, B, C.
        labels: what the three points are (the arguments given).
        u_norm: ‖θ_B − θ_A‖.
        v_norm: C's distance from the line AB.
        temperature: T of the log posterior.
    """

    u: np.ndarray
    v: np.ndarray
    log_posterior: np.ndarray
    log_likelihood: np.ndarray
    log_prior: np.ndarray
    points: np.ndarray
    labels: tuple[str, ...]
    u_norm: float
    v_norm: float
    temperature: float

    def arrays(self) -> dict[str, np.ndarray]:
        """What ``surface.npz`` holds (``grid`` is (n, n, 2), bnn_hmc's layout)."""
        grid = np.stack(np.meshgrid(self.u, self.v, indexing="ij"), axis=-1)
        return {
            "u": self.u,
            "v": self.v,
            "grid": grid,
            **{name: getattr(self, name) for name in FIELDS},
            "points": self.points,
            "labels": np.asarray(self.labels),
            "u_norm": np.asarray(self.u_norm),
            "v_norm": np.asarray(self.v_norm),
            "temperature": np.asarray(self.temperature),
        }


def field_function(problem: problem_lib.Problem, surface_plane: Plane):
    """``f(ab) -> (k, 3)``: log posterior, log likelihood and log prior at ``k`` plane points,
    one jitted call vmapped over them, on the full training set."""
    lp = problem.log_posterior
    batch = problem.train_batch()
    origin, u, v = (
        jnp.asarray(x, problem.dtype)
        for x in (surface_plane.origin, surface_plane.u, surface_plane.v)
    )
    _, unravel = ravel_pytree(
        jax.tree.map(
            lambda x: jnp.zeros(np.shape(x), problem.dtype),
            surface_plane.unravel(surface_plane.origin),
        )
    )

    def one(ab: jax.Array) -> jax.Array:
        theta = unravel(origin + ab[0] * u + ab[1] * v)
        return jnp.stack([lp(theta, batch), lp.log_likelihood(theta, batch), lp.log_prior(theta)])

    return jax.jit(jax.vmap(one))


def points_digest(positions: Sequence[Params]) -> str:
    """sha256 of the three positions' float64 values (a resume must be of the same points)."""
    digest = hashlib.sha256()
    for p in positions:
        digest.update(flatten(p)[0].tobytes())
    return digest.hexdigest()


def check_out_dir(out: str | os.PathLike, *, resume: bool, overwrite: bool) -> None:
    """Check, writing nothing, that a surface may be written into (or continued in) ``out``
    (see :func:`bnnkit.output_folder.check`).

    Raises:
        ConfigError: both flags, an empty path, a file in the way, a folder that cannot be
            written, ``resume`` of a folder that holds no surface, a non-empty folder without
            either flag, or ``overwrite`` of a folder that holds no surface.
    """
    from bnnkit import output_folder

    output_folder.check(out, SETTINGS_FILE, "surface", resume=resume, overwrite=overwrite)


def _settings(
    config: Config, problem: problem_lib.ProblemConfig, specs: list[str], digest: str
) -> dict[str, Any]:
    posterior = dataclasses.asdict(problem)
    return {
        "grid": config.window(),
        "points": specs,
        "points_sha256": digest,
        "problem": {k: posterior[k] for k in SAME_POSTERIOR},
    }


def _check_resume(stored: dict, settings: dict, out: str) -> None:
    for key in ("grid", "problem", "points_sha256"):
        if stored.get(key) != settings[key]:
            what = "the three points' parameters" if key == "points_sha256" else f"its {key}"
            raise ConfigError(
                f"--resume of {out!r} with other settings: {what} differ from "
                "the stored surface's; allowed: the same points, problem and "
                "grid (only --chunk-size may change)"
            )


def _read_chunks(folder: Path, total: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Values of the grid points already done, which are done, and how many chunk files."""
    values = np.full((total, len(FIELDS)), np.nan)
    done = np.zeros(total, bool)
    files = sorted(folder.glob("points_*.npz")) if folder.is_dir() else []
    for f in files:
        arrays = storage.load_arrays(f)
        index = np.asarray(arrays.get("index", []), np.int64)
        if index.size == 0 or index.min() < 0 or index.max() >= total or "values" not in arrays:
            raise ConfigError(
                f"{str(f)!r} is damaged or from another grid; allowed: the "
                f"chunks this grid wrote (start afresh with --overwrite)"
            )
        values[index] = arrays["values"]
        done[index] = True
    return values, done, len(files)


def _write_chunk(folder: Path, index: np.ndarray, values: np.ndarray) -> None:
    storage.save_arrays(
        folder / f"points_{int(index[0]):07d}.npz", {"index": index, "values": values}
    )


def posterior_surface(
    points: Sequence[str | os.PathLike],
    out: str | os.PathLike,
    config: Config | None = None,
    *,
    problem: problem_lib.ProblemConfig | str | os.PathLike | None = None,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
    plots: bool = True,
) -> Surface:
    """Evaluate the three fields on the plane through three points and write them to ``out``.

    Writes ``surface.json`` (settings), ``chunks/points_*.npz`` (each chunk atomically as it
    finishes), then ``surface.npz`` (:meth:`Surface.arrays`) and the contour plots
    ``log_posterior.png``, ``log_likelihood.png`` and ``log_prior.png``. Everything is checked
    before anything is written.

    Args:
        points: three points, as :func:`load_points` takes them.
        out: the output folder (new or empty, else ``resume`` or ``overwrite``).
        config: the grid (default :class:`Config`'s).
        problem: for sample files: the problem, or a run directory that holds it.
        resume: continue a grid in ``out`` that was cut off (the same points, problem and
            window; the chunk size may differ).
        overwrite: replace the surface in ``out``.
        progress: show progress (a bar on a terminal, lines otherwise).
        plots: draw the three PNGs (:func:`write_plots` draws them later from the returned
            :class:`Surface`).

    Raises:
        ConfigError: bad points or output folder, see :func:`load_points` and
            :func:`check_out_dir`; a resume with other settings.

    Example:
        (Needs three stored runs; see docs/guides/surface.md.)

        >>> surface = posterior_surface(["runs/hmc1", "runs/hmc2", "runs/hmc3"],
        ...                             "runs/surface")  # doctest: +SKIP
    """
    from bnnkit.runs import lock

    config = Config() if config is None else config
    check_out_dir(out, resume=resume, overwrite=overwrite)
    specs = [os.fspath(p) for p in points]
    built, positions = load_points(specs, problem)
    surface_plane = plane(*positions)
    settings = _settings(config, built.config, specs, points_digest(positions))
    path = Path(out)
    if resume:
        _check_resume(storage.read_json(path / SETTINGS_FILE), settings, os.fspath(out))

    u, v = config.grid()
    coords = np.stack(np.meshgrid(u, v, indexing="ij"), axis=-1).reshape(-1, 2)
    path.mkdir(parents=True, exist_ok=True)
    with lock.hold(path):
        if not resume:
            clear_outputs(path, (SETTINGS_FILE, SURFACE_FILE, *PLOTS.values()), CHUNKS_DIR, "*.npz")
            storage.write_json(path / SETTINGS_FILE, settings)
        values = _fill_grid(
            built, surface_plane, coords, path / CHUNKS_DIR, config.chunk_size, progress
        )
        surface = Surface(
            u=u,
            v=v,
            **{name: values[:, k].reshape(len(u), len(v)) for k, name in enumerate(FIELDS)},
            points=surface_plane.points,
            labels=tuple(specs),
            u_norm=surface_plane.u_norm,
            v_norm=surface_plane.v_norm,
            temperature=float(built.config.temperature),
        )
        storage.save_arrays(path / SURFACE_FILE, surface.arrays())
        if plots:
            write_plots(surface, path, title=_title(built))
    return surface


def _fill_grid(
    built: problem_lib.Problem,
    surface_plane: Plane,
    coords: np.ndarray,
    chunks: Path,
    chunk_size: int,
    progress: bool,
) -> np.ndarray:
    """The three fields at every grid point (``coords``, (n, 2)): those of the chunks already
    in ``chunks``, the rest evaluated ``chunk_size`` points per call, each chunk written as it
    finishes."""
    from bnnkit.runs.progress import ProgressBar

    total = len(coords)
    chunks.mkdir(exist_ok=True)
    values, done, num_files = _read_chunks(chunks, total)
    todo = np.flatnonzero(~done)
    starts = range(0, len(todo), chunk_size)
    bar = ProgressBar(
        "surface",
        total=num_files + len(starts),
        start=num_files,
        enabled=progress,
        unit_name="chunks",
    )
    try:
        if len(todo):
            evaluate = field_function(built, surface_plane)
        for start in starts:
            index = todo[start : start + chunk_size]
            # Padded to the chunk size: one compiled shape for every call, the last too.
            padded = np.concatenate([index, np.repeat(index[-1:], chunk_size - len(index))])
            batch = jnp.asarray(coords[padded], built.dtype)
            chunk = np.asarray(evaluate(batch), np.float64)[: len(index)]
            _write_chunk(chunks, index, chunk)
            values[index] = chunk
            bar.update(1, f"{int(done.sum()) + start + len(index):,}/{total:,} points")
    finally:
        bar.close()
    return values


def _title(built: problem_lib.Problem) -> str:
    name = built.dataset.name
    return f"{built.config.model} on {Path(name).stem if name.endswith('.npz') else name}"


def write_plots(surface: Surface, out: str | os.PathLike, title: str = "") -> list[Path]:
    """The three contour plots of ``surface`` into ``out``; returns their paths."""
    from bnnkit.report.surface_plots import contour_png

    names = {
        "log_posterior": f"log posterior (T = {surface.temperature:g})",
        "log_likelihood": "log likelihood Σ log p(y_i | x_i, θ)",
        "log_prior": "log prior log p(θ)",
    }
    written = []
    for name, label in names.items():
        target = Path(out) / PLOTS[name]
        storage.atomic_write_bytes(
            target,
            contour_png(
                surface.u,
                surface.v,
                getattr(surface, name),
                surface.points,
                surface.labels,
                title=f"{label}: {title}" if title else label,
                value_label=name.replace("_", " "),
                u_norm=surface.u_norm,
                v_norm=surface.v_norm,
            ),
        )
        written.append(target)
    return written
