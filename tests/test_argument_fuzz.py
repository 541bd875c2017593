"""Every argument of every public entry point, given values of every type: the call succeeds
or raises one ConfigError, never AttributeError, TypeError, IndexError or NumPy's errors.

A value of a kind the argument does not take (by the table of kinds below, written here and
not read from :mod:`bnnkit.arguments`) must be refused at the door: the message names the entry
point and the argument, and a refused :func:`bnnkit.run` leaves no directory. A value of a kind
it takes passes the door and meets a cheap refusal set up after it (a batch larger than the
training set, a directory that already holds something), so that nothing trains or compiles.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import numbers
import os
import pathlib
from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bnnkit
from bnnkit.errors import ConfigError
from bnnkit.inference import METHODS
from bnnkit.problem import Problem, ProblemConfig
from bnnkit.settings import flag
from config_values import required


class _Opaque:
    """An object of no type the API knows."""

    def __repr__(self) -> str:
        return "<opaque>"


#: Values of every kind a user can pass, by name.
VALUES: dict[str, Any] = {
    "str": "r",
    "empty str": "",
    "NUL str": "a\0b",
    "None": None,
    "True": True,
    "False": False,
    "int 0": 0,
    "int 3": 3,
    "int -1": -1,
    "int 2**70": 2**70,
    "float 0.5": 0.5,
    "nan": math.nan,
    "inf": math.inf,
    "complex": 1 + 2j,
    "bytes": b"r",
    "list": [1.0, 2.0],
    "ragged list": [[1.0, 2.0], [3.0]],
    "nested list": [[[1.0]]],
    "list of str": ["a", "b"],
    "tuple": (1, 2),
    "dict": {"a": 1.0},
    "object": _Opaque(),
    "function": lambda *a, **k: None,
    "class": dict,
    "path": pathlib.Path("p"),
    "date": datetime.date(2020, 1, 1),
    "np.float16": np.float16(0.5),
    "np.float32": np.float32(0.5),
    "np.float64 nan": np.float64("nan"),
    "np.int8": np.int8(3),
    "np.int64": np.int64(3),
    "np.uint8": np.uint8(3),
    "np.bool_": np.bool_(True),
    "np.complex64": np.complex64(1),
    "np.str_": np.str_("s"),
    "np.datetime64": np.datetime64("2020-01-01"),
    "0-d array": np.array(0.5),
    "0-d int array": np.array(3),
    "jax scalar": jnp.float32(0.5),
    "empty array": np.zeros((0,)),
    "3-d array": np.zeros((2, 2, 2), np.float32),
    **{
        f"array {dtype}": np.ones(4, dtype)
        for dtype in (
            "bool",
            "int8",
            "int16",
            "int32",
            "int64",
            "uint8",
            "float16",
            "float32",
            "float64",
            "complex64",
        )
    },
    "array object": np.array([1.0, None], dtype=object),
    "array str_": np.array(["a", "b"]),
    "array datetime64": np.array(["2020-01-01"], dtype="datetime64[D]"),
    "array nan": np.array([1.0, np.nan]),
}


# Kinds of value, decided here independently of the code under test.
def is_flag(v: Any) -> bool:
    return isinstance(v, (bool, np.bool_))


def is_count(v: Any) -> bool:
    return isinstance(v, numbers.Integral) and not is_flag(v) and v >= 1


def is_number(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not is_flag(v) and math.isfinite(v)


def is_text(v: Any) -> bool:
    return isinstance(v, str)


def is_path(v: Any) -> bool:
    return isinstance(v, (str, os.PathLike))


def is_function(v: Any) -> bool:
    return callable(v) and not isinstance(v, type)


def is_array(v: Any) -> bool:
    """Rectangular, of integers or reals (NaN is the data checks' to refuse, after the door)."""
    if isinstance(v, (str, bytes, dict, type, _Opaque, datetime.date)) or v is None:
        return False
    try:
        a = np.asarray(v)
    except ValueError:
        return False
    return a.dtype.kind in "iuf"


def optional(kind: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda v: v is None or kind(v)


PROBLEM = ProblemConfig("yacht_0", "mlp_regression_small", noise_std=0.35)
#: Passes every check of its own, refused once the problem is built: larger than the data.
SGD_TOO_BIG = bnnkit.SGD(init_step_size=1e-4, num_epochs=1, batch_size=100_000)
HMC_2 = bnnkit.HMC(step_size=1e-2, trajectory_len=2e-2, num_iterations=2, num_chains=2)
HMC_TIMED = dataclasses.replace(HMC_2, max_time=60)  # sample() refuses it


def _density(p):
    # Any pytree: what the door lets through meets bnnkit's checks, not this function's.
    return -0.5 * sum(jnp.sum(jnp.square(leaf)) for leaf in jax.tree.leaves(p))


def _run_call(tmp: pathlib.Path, arg: str, value: Any) -> Callable[[], Any]:
    kwargs = {
        "problem": PROBLEM,
        "config": SGD_TOO_BIG,
        "run_dir": tmp / "run",
        "progress": False,
        arg: value,
    }
    return lambda: bnnkit.run(**kwargs)


def _sample_call(tmp: pathlib.Path, arg: str, value: Any) -> Callable[[], Any]:
    full = tmp / "full"
    full.mkdir(exist_ok=True)
    (full / "something").write_text("x")
    kwargs = {
        "log_density": _density,
        "initial_positions": {"x": np.zeros((2, 3), np.float32)},
        "config": HMC_2,
        "run_dir": full,
    }
    if arg in ("run_dir", "name", "progress"):  # refused after the door, before compiling
        kwargs["config"] = HMC_TIMED
    kwargs[arg] = value
    return lambda: bnnkit.sample(**kwargs)


def _evaluate_call(tmp: pathlib.Path, arg: str, value: Any) -> Callable[[], Any]:
    kwargs = {"run_dir": tmp / "no_run", arg: value}
    return lambda: bnnkit.evaluate(**kwargs)


def _export_call(tmp: pathlib.Path, arg: str, value: Any) -> Callable[[], Any]:
    kwargs = {"run_dir": tmp / "no_run", "out": tmp / "out.npz", arg: value}
    return lambda: bnnkit.export_samples(**kwargs)


_RNG = np.random.default_rng(0)
_X = _RNG.normal(size=(12, 3)).astype(np.float32)
_Y = _X @ np.array([1.0, -1.0, 0.5], np.float32)


def _arrays_call(tmp: pathlib.Path, arg: str, value: Any) -> Callable[[], Any]:
    # x_train of one row: any other value given passes or fails the shapes cheaply.
    kwargs = {
        "x_train": _X[:8],
        "y_train": _Y[:8],
        "x_test": _X[8:],
        "y_test": _Y[8:],
        "model": nn.Dense(1),
        "noise_std": 0.5,
        arg: value,
    }
    if arg in ("x_val", "y_val"):
        kwargs.setdefault(
            "y_val" if arg == "x_val" else "x_val", _X[:2] if arg == "y_val" else _Y[:2]
        )
    return lambda: Problem.from_arrays(**kwargs)


#: (entry point, its call, name in messages) -> argument -> kind of value it takes.
ENTRY_POINTS: dict[tuple[str, Callable, str], dict[str, Callable[[Any], bool]]] = {
    ("run", _run_call, "bnnkit.run"): {
        "problem": lambda v: v is None,  # nothing in VALUES is a problem
        "config": lambda v: False,
        "run_dir": is_path,
        "resume": is_flag,
        "overwrite": is_flag,
        "progress": is_flag,
        "log_every": optional(is_count),
        "shard": is_text,
        "on_unit": optional(is_function),
    },
    ("sample", _sample_call, "bnnkit.sample"): {
        "log_density": is_function,
        "initial_positions": lambda v: None,  # a pytree: many kinds pass, checked by value
        "config": lambda v: False,
        "run_dir": optional(is_path),
        "resume": is_flag,
        "overwrite": is_flag,
        "progress": is_flag,
        "name": optional(is_text),
    },
    ("evaluate", _evaluate_call, "bnnkit.evaluate"): {
        "run_dir": is_path,
        "reference": optional(is_path),
        "reference_probs": optional(is_path),
        "corruption": optional(is_text),
        "severity": optional(is_count),
        "calibrate": is_flag,
        "write": is_flag,
        "conformal": optional(is_number),
        "ood": optional(is_text),
        "problem": lambda v: v is None,
        "trust_model": optional(is_text),
    },
    ("export_samples", _export_call, "bnnkit.export_samples"): {
        "run_dir": is_path,
        "out": is_path,
        "trust_model": optional(is_text),
    },
    ("from_arrays", _arrays_call, "Problem.from_arrays"): {
        "x_train": is_array,
        "y_train": is_array,
        "x_test": is_array,
        "y_test": is_array,
        "x_val": optional(is_array),
        "y_val": optional(is_array),
    },
}

CASES = [
    (entry, arg, name) for entry, args in ENTRY_POINTS.items() for arg in args for name in VALUES
]


def _id(case) -> str:
    (entry, _, _), arg, name = case
    return f"{entry}-{arg}-{name}"


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_an_entry_point_refuses_a_value_of_another_kind_at_the_door(case, tmp_path, monkeypatch):
    (_, make, where), arg, name = case
    monkeypatch.chdir(tmp_path)  # a value taken as a relative path stays in here
    value = VALUES[name]
    before = sorted(p.name for p in tmp_path.iterdir())
    taken = ENTRY_POINTS[case[0]][arg](value)
    try:
        make(tmp_path, arg, value)()
    except ConfigError as err:
        message = str(err)
        assert "\n" not in message
        if taken is False:
            assert message.startswith(f"{where}: {arg}"), message
            assert "allowed: " in message, message
    else:
        assert taken is not False, f"{where} took {arg}={name}"
    if where == "bnnkit.run":  # refused before the first file
        assert sorted(p.name for p in tmp_path.iterdir()) == before


#: Values no setting of any Config takes: neither a number, a bool, a string nor None.
NEVER_A_SETTING = [
    name
    for name, v in VALUES.items()
    if not (
        v is None
        or isinstance(v, (bool, np.bool_, str, numbers.Real))
        or (getattr(v, "shape", None) == () and v.dtype.kind in "biuf")
    )
]

CONFIGS = [*(m.Config for _, m in sorted(METHODS.items())), ProblemConfig]


def _field_cases(cls) -> list:
    return [(cls, f.name, name) for f in dataclasses.fields(cls) for name in VALUES]


@pytest.mark.parametrize("cls", CONFIGS, ids=[f"{c.__module__}.{c.__name__}" for c in CONFIGS])
@pytest.mark.parametrize("name", list(VALUES))
def test_a_config_takes_or_refuses_every_value_of_every_field(cls, name):
    value = VALUES[name]
    base = required(cls)
    for field in dataclasses.fields(cls):
        try:
            cls(**{**base, field.name: value})
        except ConfigError as err:
            assert "\n" not in str(err)
        else:
            assert name not in NEVER_A_SETTING, f"{cls.__name__}({field.name}={name}) taken"


@pytest.mark.parametrize("cls", CONFIGS[:-1], ids=[c.__module__ for c in CONFIGS[:-1]])
def test_a_config_refuses_text_none_and_bools_for_its_numbers_naming_the_field(cls):
    base = required(cls)
    hints = {f.name: f.type for f in dataclasses.fields(cls)}
    checked = 0
    for field in dataclasses.fields(cls):
        hint = str(hints[field.name])
        if "str" in hint or "bool" in hint:
            continue
        named = f"^({field.name}=|{flag(cls, field.name)} )"
        for value in ("r", True, np.bool_(False), math.nan, np.float32("inf"), [1], np.ones(2)):
            with pytest.raises(ConfigError, match=named):
                cls(**{**base, field.name: value})
            checked += 1
        if "None" not in hint and field.default is not dataclasses.MISSING:
            with pytest.raises(ConfigError, match=named):
                cls(**{**base, field.name: None})
    assert checked > 0


def test_numpy_and_jax_scalars_are_taken_as_python_numbers():
    config = bnnkit.HMC(
        step_size=jnp.float32(0.25),
        trajectory_len=np.array(0.5),
        num_chains=np.array(2),
        num_iterations=np.uint16(10),
    )
    assert (type(config.step_size), type(config.trajectory_len)) == (float, float)
    assert (config.step_size, config.num_chains, config.num_iterations) == (0.25, 2, 10)
    assert type(config.num_chains) is int


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda tmp: bnnkit.run("yacht_0", HMC_2, tmp / "r"),
            "bnnkit.run: problem='yacht_0' is a str; allowed: "
            "bnnkit.ProblemConfig('yacht_0', MODEL)",
        ),
        (
            lambda tmp: Problem.from_arrays(
                [[1.0, 2.0], [3.0]], [1.0, 2.0], [[1.0]], [1.0], model=nn.Dense(1)
            ),
            "Problem.from_arrays: x_train=[[1.0, 2.0], [3.0]] is a ragged list",
        ),
        (
            lambda tmp: bnnkit.run(PROBLEM, HMC_2, None),
            "bnnkit.run: run_dir is None; allowed: a path",
        ),
        (
            lambda tmp: bnnkit.run(PROBLEM, bnnkit.HMC, tmp / "r"),
            "bnnkit.run: config=bnnkit.HMC is a class, not an instance",
        ),
        (
            lambda tmp: bnnkit.build_problem("yacht_0"),
            "bnnkit.build_problem: config='yacht_0' is a str; allowed: a bnnkit.ProblemConfig",
        ),
        (lambda tmp: bnnkit.load_chains(3), "bnnkit.load_chains: run_dir=3 is an int"),
        (lambda tmp: bnnkit.load_dataset(None), "bnnkit.load_dataset: name is None"),
        (
            lambda tmp: bnnkit.rhat([[1.0, 2.0], [3.0]]),
            "rhat: draws=[[1.0, 2.0], [3.0]] is a ragged list",
        ),
        (
            lambda tmp: bnnkit.mcse_quantile(np.zeros((2, 8)), "0.5"),
            "mcse_quantile: prob='0.5' is a str",
        ),
        (
            lambda tmp: bnnkit.summary({"w": np.array(["a"])}),
            "summary: positions['w']=array(<U1, shape (1,)) is an array of dtype <U1",
        ),
    ],
)
def test_the_message_names_the_entry_point_the_argument_and_what_is_allowed(
    call, message, tmp_path
):
    with pytest.raises(ConfigError) as refused:
        call(tmp_path)
    assert str(refused.value).startswith(message), refused.value
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("name", list(VALUES))
def test_the_diagnostics_take_draws_or_refuse_them(name):
    value = VALUES[name]
    for fn in (
        bnnkit.rhat,
        bnnkit.ess_bulk,
        bnnkit.ess_tail,
        bnnkit.mcse_mean,
        bnnkit.mcse_sd,
        bnnkit.summary,
        lambda v: bnnkit.mcse_quantile(np.ones((2, 8)), v),
        bnnkit.load_chains,
        bnnkit.build_problem,
        bnnkit.load_dataset,
    ):
        try:
            fn(value)
        except ConfigError as err:
            assert "\n" not in str(err)


def test_a_run_on_valid_arguments_still_runs(tmp_path):
    result = bnnkit.run(
        PROBLEM,
        bnnkit.SGD(init_step_size=1e-4, num_epochs=1, batch_size=64, seed=np.int64(1)),
        pathlib.Path(tmp_path / "run"),
        progress=np.bool_(False),
        log_every=np.int64(1),
        on_unit=None,
    )
    assert result.record["status"] == "finished"


def test_arrays_of_any_integer_or_real_dtype_make_a_problem():
    for dtype in (np.float16, np.float64, np.int8, np.uint8):
        problem = Problem.from_arrays(
            (_X[:8] * 10).astype(dtype), _Y[:8], _X[8:], _Y[8:], model=nn.Dense(1), noise_std=0.5
        )
        assert problem.dataset.num_train == 8
