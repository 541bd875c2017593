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
where it stopped; ``bnnkit surface`` is its command line.

Example:
    >>> a, b, c = {"w": np.zeros(2)}, {"w": np.array([2.0, 0.0])}, {"w": np.array([1.0, 3.0])}
    >>> p = plane(a, b, c)
    >>> p.u_norm, p.v_norm, p.points.tolist()
    (2.0, 3.0, [[0.0, 0.0], [1.0, 0.0], [0.5, 1.0]])
    >>> p.position(0.5, 1.0)["w"].tolist()  # C itself
    [1.0, 3.0]
"""

from __future__ import annotations

import contextlib
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
from bnnkit.settings import check_at_least, check_numbers, flag, setting
from bnnkit.types import Params

#: The files an output folder holds (besides its lock and the chunks' folder).
SETTINGS_FILE = "surface.json"
SURFACE_FILE = "surface.npz"
CHUNKS_DIR = "chunks"
FIELDS = ("log_posterior", "log_likelihood", "log_prior")
PLOTS = {name: f"{name}.png" for name in FIELDS}
#: Settings in which the three points' problems must agree: one posterior, one dataset.
SAME_POSTERIOR = (*problem_lib.DATA_SETTINGS, "standardize", *problem_lib.POSTERIOR_SETTINGS)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Config:
    """The grid: its window in plane coordinates, its size, and how many points per call."""

    #: At most 1024 points along an axis: the grid's 2^20 full-batch evaluations are already
    #: days of work, and a larger grid's arrays would not fit in memory.
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
class Plane:
    """The plane through three positions, in float64.

    Attributes:
        origin: θ_A, flat.
        u: θ_B − θ_A, flat.
        v: the part of θ_C − θ_A orthogonal to ``u``, flat.
        unravel: a flat vector back to the position's tree.
        points: (3, 2) coordinates of A, B, C.
    """

    origin: np.ndarray
    u: np.ndarray
    v: np.ndarray
    unravel: Any
    points: np.ndarray

    @property
    def u_norm(self) -> float:
        return float(np.linalg.norm(self.u))

    @property
    def v_norm(self) -> float:
        return float(np.linalg.norm(self.v))

    def position(self, a: float, b: float) -> Params:
        """θ(a, b) = θ_A + a·u + b·v as a tree (float64)."""
        return self.unravel(self.origin + a * self.u + b * self.v)


def _flatten(tree: Params) -> tuple[np.ndarray, Any]:
    """A tree as one float64 vector (NumPy: JAX would round it to float32 unless x64 is on),
    and the function that gives the tree back."""
    leaves, treedef = jax.tree.flatten(tree)
    shapes = [np.shape(x) for x in leaves]
    sizes = [int(np.prod(s)) for s in shapes]
    vector = np.concatenate([np.ravel(np.asarray(x, np.float64)) for x in leaves])

    def unravel(flat: np.ndarray) -> Params:
        parts = np.split(np.asarray(flat), np.cumsum(sizes)[:-1])
        return treedef.unflatten([p.reshape(s) for p, s in zip(parts, shapes, strict=True)])

    return vector, unravel


def plane(a: Params, b: Params, c: Params) -> Plane:
    """Gram–Schmidt on θ_B − θ_A and θ_C − θ_A, in float64 (see the module docstring).

    Raises:
        ConfigError: the three points span no plane (two coincide, or C is on the line AB).
    """
    (origin, unravel), (end_b, _), (end_c, _) = (_flatten(p) for p in (a, b, c))
    u, w = end_b - origin, end_c - origin
    uu = float(u @ u)
    if not uu > 0:
        raise ConfigError(
            "the points A and B are the same parameters; allowed: three points that span a plane"
        )
    along = float(u @ w) / uu
    v = w - along * u
    # Relative to C's own distance: rounding leaves a residue of ~1e-16 ‖w‖ on a collinear C.
    if not np.linalg.norm(v) > 1e-12 * max(np.linalg.norm(w), np.finfo(float).tiny):
        raise ConfigError(
            "the point C lies on the line through A and B; allowed: three points that span a plane"
        )
    points = np.array([[0.0, 0.0], [1.0, 0.0], [along, 1.0]])
    return Plane(origin, u, v, unravel, points)


def split_point(spec: str) -> tuple[str, int, int]:
    """``PATH[:SAMPLE]`` or ``PATH[:CHAIN:SAMPLE]`` as (path, chain, sample); chain 0 and the
    last sample by default.

    Example:
        >>> split_point("runs/hmc"), split_point("runs/hmc:3"), split_point("s.npz:1:-1")
        (('runs/hmc', 0, -1), ('runs/hmc', 0, 3), ('s.npz', 1, -1))
    """
    indices: list[int] = []
    path = str(spec)
    while len(indices) < 2:
        head, sep, tail = path.rpartition(":")
        if not (sep and head and tail.lstrip("-").isdigit()):
            break
        indices.insert(0, int(tail))
        path = head
    if len(indices) == 2:
        return path, indices[0], indices[1]
    return path, 0, indices[0] if indices else -1


def _pick(posterior: Any, chain: int, sample: int, spec: str) -> Params:
    """One position of a stored posterior: a sample of one chain, or one member's mean."""
    from bnnkit.posterior import Mixture, Samples

    if isinstance(posterior, Samples):
        chains, count = posterior.num_chains, posterior.num_samples
        if not 0 <= chain < chains:
            raise ConfigError(f"{spec}: chain {chain} out of range; allowed: 0..{chains - 1}")
        if not -count <= sample < count:
            raise ConfigError(
                f"{spec}: sample {sample} out of range: {count} kept per chain; "
                f"allowed: {-count}..{count - 1}"
            )
        return jax.tree.map(lambda x: np.asarray(x)[chain, sample], posterior.params)
    components = posterior.components if isinstance(posterior, Mixture) else (posterior,)
    if not 0 <= chain < len(components):
        raise ConfigError(f"{spec}: member {chain} out of range; allowed: 0..{len(components) - 1}")
    if sample not in (0, -1):
        raise ConfigError(
            f"{spec}: an approximate posterior gives one position per member, "
            "its mean; allowed: RUN or RUN:MEMBER:0"
        )
    return jax.tree.map(np.asarray, components[chain].mean)


def _check_shapes(stored: Params, template: Params, spec: str) -> None:
    for t, s in zip(jax.tree.leaves(template), jax.tree.leaves(stored), strict=True):
        if tuple(t.shape) != tuple(np.shape(s)):
            raise ConfigError(
                f"{spec}: parameters of shape {tuple(np.shape(s))} where the model "
                f"has {tuple(t.shape)}; allowed: points of the same model"
            )


@dataclasses.dataclass(frozen=True)
class _Source:
    spec: str
    path: Path
    chain: int
    sample: int
    record: dict | None  # run.json of a run directory; None for a sample file


def _source(spec: str) -> _Source:
    from bnnkit.runs import RunDir

    path, chain, sample = split_point(spec)
    p = Path(path)
    if p.is_dir():
        rundir = RunDir(p)
        if not rundir.run_file.is_file():
            raise ConfigError(
                f"{path!r} is not a bnnkit run directory (no run.json); allowed: "
                "a run directory or a .npz file of `bnnkit samples`"
            )
        record = rundir.read_record()
        if not isinstance(record.get("problem"), dict):
            raise ConfigError(f"{str(rundir.run_file)!r} is damaged: it has no 'problem' object")
        return _Source(spec, p, chain, sample, record)
    if p.is_file() and p.suffix == ".npz":
        return _Source(spec, p, chain, sample, None)
    raise ConfigError(
        f"point {spec!r} does not exist or is neither a run directory nor a .npz "
        "file; allowed: RUN[:SAMPLE], RUN:CHAIN:SAMPLE or FILE.npz[:...]"
    )


def _problem_config(record: dict, where: str) -> problem_lib.ProblemConfig:
    from bnnkit.runs.stored import recorded_problem

    return recorded_problem(record, where)


def common_problem(
    sources: Sequence[_Source], problem: problem_lib.ProblemConfig | str | os.PathLike | None
) -> problem_lib.ProblemConfig:
    """The one problem of the points: the runs' (and ``problem``'s), which must agree.

    Raises:
        ConfigError: two of them target different posteriors (naming the setting), or only
            sample files and no ``problem``.
    """
    named: list[tuple[str, problem_lib.ProblemConfig]] = []
    if isinstance(problem, problem_lib.ProblemConfig):
        named.append(("the given problem", problem))
    elif problem is not None:
        given = _source(os.fspath(problem))
        if given.record is None:
            raise ConfigError(
                f"--problem {os.fspath(problem)!r} is a file; allowed: a run directory"
            )
        named.append((f"--problem {given.path}", _problem_config(given.record, str(given.path))))
    named += [(s.spec, _problem_config(s.record, s.spec)) for s in sources if s.record]
    if not named:
        raise ConfigError(
            "sample files carry no problem; allowed: --problem RUN_DIR (the run "
            "they come from) or a run directory among the points"
        )
    first_name, first = named[0]
    for name, other in named[1:]:
        differ = problem_lib.differences(other, first, SAME_POSTERIOR, first_name)
        if differ:
            raise ConfigError(
                f"{name} targets another posterior: {differ[0]}; allowed: points "
                "of one posterior (same data, model, likelihood, prior and "
                "temperature)"
            )
    return first


def points_problem(
    points: Sequence[str | os.PathLike], problem: str | os.PathLike | None = None
) -> problem_lib.ProblemConfig:
    """The problem settings of three points (:func:`common_problem`), nothing loaded.

    Raises:
        ConfigError: as :func:`load_points`.
    """
    return common_problem([_source(os.fspath(p)) for p in points], problem)


def _load_position(source: _Source, template: Params) -> Params:
    from bnnkit.posterior import Samples
    from bnnkit.runs import RunDir
    from bnnkit.runs.stored import stored_posterior

    if source.record is not None:
        posterior = stored_posterior(RunDir(source.path), source.record, template)
    else:
        arrays = storage.load_arrays(source.path)
        params = storage.unflatten_tree(template, arrays)
        if any(np.ndim(x) < 2 for x in jax.tree.leaves(params)):
            raise ConfigError(
                f"{source.spec}: not a file of `bnnkit samples` (arrays of chains, samples, ...)"
            )
        posterior = Samples(params)
    position = _pick(posterior, source.chain, source.sample, source.spec)
    _check_shapes(position, template, source.spec)
    return position


def load_points(
    points: Sequence[str | os.PathLike],
    problem: problem_lib.ProblemConfig | str | os.PathLike | None = None,
) -> tuple[problem_lib.Problem, list[Params]]:
    """The built problem and the three positions.

    Args:
        points: three of ``RUN``, ``RUN:SAMPLE``, ``RUN:CHAIN:SAMPLE`` (the last sample of
            chain 0 by default; an approximate posterior's member mean) or the same with a
            ``.npz`` file written by ``bnnkit samples``.
        problem: the problem for sample files, or a run directory holding it; the runs among
            ``points`` must agree with it.

    Raises:
        ConfigError: not three points, a missing or unreadable one, an index out of range,
            or points of different posteriors.
    """
    specs = [os.fspath(p) for p in points]
    if len(specs) != 3:
        raise ConfigError(f"{len(specs)} points given; allowed: exactly three (A, B, C)")
    sources = [_source(s) for s in specs]
    config = common_problem(sources, problem)
    # A run made from arrays in memory rebuilds its problem from the arrays it stored.
    runs = [s for s in sources if s.record is not None]
    if isinstance(problem, (str, os.PathLike)):
        runs.insert(0, _source(os.fspath(problem)))
    built = (
        problem_lib.build_recorded(config, runs[0].path, runs[0].record.get("dataset"))
        if runs
        else problem_lib.build(config)
    )
    template = jax.eval_shape(built.init_params, jax.random.PRNGKey(0))
    return built, [_load_position(s, template) for s in sources]


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
        digest.update(_flatten(p)[0].tobytes())
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


def _clear(path: Path) -> None:
    for name in (SETTINGS_FILE, SURFACE_FILE, *PLOTS.values()):
        with contextlib.suppress(FileNotFoundError):
            (path / name).unlink()
    for pattern in (f"{CHUNKS_DIR}/*.npz", ".*.tmp", f"{CHUNKS_DIR}/.*.tmp"):
        for f in path.glob(pattern):
            f.unlink()


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
        plots: draw the three PNGs (about a second each; :func:`write_plots` draws them later
            from the returned :class:`Surface`).

    Raises:
        ConfigError: bad points or output folder, see :func:`load_points` and
            :func:`check_out_dir`; a resume with other settings.

    Example:
        (Needs three stored runs; see docs/guides/surface.md.)

        >>> surface = posterior_surface(["runs/hmc1", "runs/hmc2", "runs/hmc3"],
        ...                             "runs/surface")  # doctest: +SKIP
    """
    from bnnkit.runs import lock
    from bnnkit.runs.progress import ProgressBar

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
    total = len(coords)
    path.mkdir(parents=True, exist_ok=True)
    with lock.hold(path):
        if not resume:
            _clear(path)
            storage.write_json(path / SETTINGS_FILE, settings)
        chunks = path / CHUNKS_DIR
        chunks.mkdir(exist_ok=True)
        values, done, num_files = _read_chunks(chunks, total)
        todo = np.flatnonzero(~done)
        starts = range(0, len(todo), config.chunk_size)
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
                index = todo[start : start + config.chunk_size]
                # Padded to the chunk size: one compiled shape for every call, the last too.
                padded = np.concatenate(
                    [index, np.repeat(index[-1:], config.chunk_size - len(index))]
                )
                batch = jnp.asarray(coords[padded], built.dtype)
                chunk = np.asarray(evaluate(batch), np.float64)[: len(index)]
                _write_chunk(chunks, index, chunk)
                values[index] = chunk
                bar.update(1, f"{int(done.sum()) + start + len(index):,}/{total:,} points")
        finally:
            bar.close()
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
