"""The public Python API's arguments, checked at the door.

Every entry point (:func:`bnnkit.run`, :func:`bnnkit.sample`, :func:`bnnkit.evaluate`,
:func:`bnnkit.export_samples`, :func:`bnnkit.load_chains`, :func:`bnnkit.build_problem`,
:func:`bnnkit.load_dataset`, :meth:`bnnkit.Problem.from_arrays`, and the draws of the MCMC
diagnostics, :func:`bnnkit.rhat` to :func:`bnnkit.summary`) first checks the type of each
argument it is given, so a
value of the wrong kind (a dataset's name where a :class:`~bnnkit.problem.ProblemConfig` goes,
``None`` for a run directory, a ragged list for an array) is refused in one
:class:`~bnnkit.errors.ConfigError` naming the entry point, the argument and what is allowed,
before anything is built, compiled or written; never as an ``AttributeError`` from deep inside.
The Configs check their own fields (:func:`bnnkit.settings.check_numbers`).

Each ``*_argument`` function checks one kind of value and returns it as the entry point uses it
(an array as a NumPy array); :mod:`bnnkit.entry_points` says which check each argument of each
entry point gets.

Example:
    >>> array_argument([[1.0, 2.0], [3.0]], "x_train", where="Problem.from_arrays")
    Traceback (most recent call last):
    ...
    bnnkit.errors.ArgumentError: Problem.from_arrays: x_train=[[1.0, 2.0], [3.0]] is a ragged \
list (its rows differ in length); allowed: a rectangular array of integers or real numbers \
(a NumPy or JAX array, or nested lists of equal lengths)
    >>> path_argument(None, "run_dir", where="bnnkit.run")
    Traceback (most recent call last):
    ...
    bnnkit.errors.ArgumentError: bnnkit.run: run_dir is None; allowed: a path (a str or an \
os.PathLike such as pathlib.Path)
"""

from __future__ import annotations

import math
import numbers
import os
import reprlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn

import numpy as np

from bnnkit.errors import ArgumentError
from bnnkit.storage import path_to_str

#: NumPy dtype kinds of the arrays a user gives as data: signed and unsigned integers, reals.
NUMERIC_KINDS = "iuf"
#: How messages name the dtype kinds an array may have.
_KIND_WORDS = {"b": "booleans", "i": "integers", "u": "integers", "f": "real numbers"}

_SHORT = reprlib.Repr()
_SHORT.maxstring = _SHORT.maxother = 40
_SHORT.maxlist = _SHORT.maxtuple = _SHORT.maxdict = 4
_SHORT.maxlevel = 3


def shown(value: Any) -> str:
    """A value as a one-line message shows it: short, arrays by dtype and shape.

    Example:
        >>> shown("yacht_0"), shown(np.zeros((2, 3), np.float16)), shown(list(range(100)))
        ("'yacht_0'", 'array(float16, shape (2, 3))', '[0, 1, 2, 3, ...]')
    """
    if isinstance(value, np.ndarray) or (
        hasattr(value, "shape") and hasattr(value, "dtype") and not isinstance(value, np.generic)
    ):
        return f"array({value.dtype}, shape {tuple(value.shape)})"
    if isinstance(value, type):
        api = getattr(value, "API_NAME", "")
        return f"bnnkit.{api}" if api else f"<class {value.__qualname__}>"
    text = _SHORT.repr(value)
    return " ".join(text.split())


def type_words(value: Any) -> str:
    """What a value is, with its article.

    Example:
        >>> type_words("r"), type_words(np.float32(1)), type_words(3)
        ('a str', 'a numpy.float32', 'an int')
    """
    cls = type(value)
    if isinstance(value, type):
        return "a class, not an instance"
    module = "" if cls.__module__ == "builtins" else f"{cls.__module__.split('.')[0]}."
    text = f"{module}{cls.__qualname__}"
    return f"{'an' if text[0] in 'aeiou' else 'a'} {text}"


def refuse(
    value: Any,
    name: str,
    allowed: str,
    *,
    where: str = "",
    what: str | None = None,
    optional: bool = False,
) -> NoReturn:
    """Raise the one-line refusal of an argument, in parts, so that the command line can name
    the flag the value came from (:class:`~bnnkit.errors.ArgumentError`).

    Args:
        value: the value given.
        name: the argument's name.
        allowed: what the argument may be, in words.
        where: the entry point, prefixed to the message (``"bnnkit.run"``).
        what: what the value is, in words (default: its type, ``a str``).
        optional: ``None`` is allowed too, which the Python message adds (a flag left out is
            ``None`` already, so the command line's does not).

    Raises:
        ArgumentError: always.
    """
    given = None if value is None else f"{shown(value)} is {what or type_words(value)}"
    raise ArgumentError(where, name, given, allowed, " or None" if optional else "")


def flag_argument(value: Any, name: str, *, where: str = "", optional: bool = False) -> bool | None:
    """``True`` or ``False`` (a NumPy bool too), as a Python bool; ``None`` where
    ``optional``.

    Example:
        >>> flag_argument(np.bool_(True), "resume"), flag_argument(None, "x", optional=True)
        (True, None)
    """
    if value is None and optional:
        return None
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    refuse(value, name, "True or False", where=where, optional=optional)


def passed_on(value: Any, name: str, *, where: str = "") -> Any:
    """Any value, unchecked at the door: the entry point passes it on to what judges it (a
    dataset loader refusing an option it does not know, a reader comparing a pytree's leaves
    with the stored ones). A row of its own says so, since an argument without a row is an
    error (:func:`check_arguments`).

    Example:
        >>> passed_on({"subset_train_to": 100}, "options")
        {'subset_train_to': 100}
    """
    return value


def count_argument(
    value: Any, name: str, *, where: str = "", low: int = 1, optional: bool = False
) -> int | None:
    """An integer ``>= low`` (a NumPy integer too; not a bool), as a Python int; ``None``
    where ``optional``.

    Example:
        >>> count_argument(np.int64(3), "log_every"), count_argument(None, "n", optional=True)
        (3, None)
    """
    if value is None and optional:
        return None
    allowed = f"an integer >= {low}"
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        refuse(value, name, allowed, where=where, optional=optional)
    if int(value) < low:
        refuse(value, name, allowed, where=where, what="too small", optional=optional)
    return int(value)


def number_argument(
    value: Any, name: str, *, where: str = "", optional: bool = False
) -> float | None:
    """A finite real number (an int, a NumPy number; not a bool), as a Python float;
    ``None`` where ``optional``.

    Example:
        >>> number_argument(np.float32(0.5), "conformal")
        0.5
    """
    if value is None and optional:
        return None
    allowed = "a finite real number"
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        refuse(value, name, allowed, where=where, optional=optional)
    try:
        number = float(value)
    except OverflowError:  # an int beyond any float
        number = math.inf
    if not math.isfinite(number):
        refuse(value, name, allowed, where=where, what="not finite", optional=optional)
    return number


def text_argument(
    value: Any,
    name: str,
    *,
    where: str = "",
    optional: bool = False,
    choices: Sequence[str] | None = None,
) -> str | None:
    """A string (one of ``choices`` if given); ``None`` where ``optional``.

    Example:
        >>> text_argument("data", "shard", choices=("auto", "data"))
        'data'
    """
    if value is None and optional:
        return None
    allowed = "a string" if choices is None else f"one of {', '.join(map(repr, choices))}"
    if not isinstance(value, str):
        refuse(value, name, allowed, where=where, optional=optional)
    if choices is not None and value not in choices:
        refuse(value, name, allowed, where=where, what="unknown", optional=optional)
    return str(value)


def path_argument(
    value: Any, name: str, *, where: str = "", optional: bool = False
) -> str | os.PathLike | None:
    """A file system path: a ``str`` or an ``os.PathLike`` of one (``bytes`` paths are not
    taken) without a NUL character; ``None`` where ``optional``. What the path names (an empty
    one names nothing) is for the entry point to judge, in the words its command line uses.

    Example:
        >>> import pathlib
        >>> path_argument(pathlib.Path("runs/hmc"), "run_dir")
        PosixPath('runs/hmc')
    """
    if value is None and optional:
        return None
    allowed = "a path (a str or an os.PathLike such as pathlib.Path)"
    text = None
    if isinstance(value, str):
        text = value
    elif isinstance(value, os.PathLike):
        try:
            text = os.fspath(value)
        except TypeError:
            text = None
    if not isinstance(text, str):
        refuse(value, name, allowed, where=where, optional=optional)
    if "\0" in text:
        refuse(
            value, name, allowed, where=where, what="a path with a NUL character", optional=optional
        )
    return value


def callable_argument(
    value: Any, name: str, *, where: str = "", optional: bool = False
) -> Callable | None:
    """A function (anything callable); ``None`` where ``optional``."""
    if value is None and optional:
        return None
    if not callable(value) or isinstance(value, type):
        refuse(value, name, "a function", where=where, optional=optional)
    return value


def _dtype_words(kinds: str) -> str:
    words = list(dict.fromkeys(_KIND_WORDS[k] for k in kinds))
    return " or ".join(words)


def array_argument(
    value: Any,
    name: str,
    *,
    where: str = "",
    optional: bool = False,
    kinds: str = NUMERIC_KINDS,
    finite: bool = False,
) -> np.ndarray | None:
    """A rectangular array whose dtype is of ``kinds``, as a NumPy array.

    Taken: NumPy and JAX arrays (anything with ``__array__``), NumPy scalars, Python numbers
    and nested lists or tuples of equal lengths. Refused, in one line: other types (a str, a
    dict, ``None`` unless ``optional``), ragged lists, and dtypes outside ``kinds`` (by
    default integers and reals: no bool, complex, object, str or datetime arrays).

    Args:
        value: the value given.
        name: the argument's name.
        where: the entry point, for the message.
        optional: ``None`` is taken (and returned).
        kinds: the NumPy dtype kinds allowed (``"iuf"``: integers and reals; add ``"b"``
            for booleans).
        finite: refuse NaN and infinite values.

    Returns:
        The array (``np.asarray`` of the value), or ``None``.

    Raises:
        ConfigError: naming ``where``, ``name``, the value and what is allowed.

    Example:
        >>> array_argument([[1, 2], [3, 4]], "x_train").dtype.kind
        'i'
        >>> array_argument(np.array(["a", "b"]), "y_train", where="Problem.from_arrays")
        Traceback (most recent call last):
        ...
        bnnkit.errors.ArgumentError: Problem.from_arrays: y_train=array(<U1, shape (2,)) is an \
array of dtype <U1; allowed: a rectangular array of integers or real numbers
    """
    if value is None and optional:
        return None
    words = _dtype_words(kinds)
    allowed = f"a rectangular array of {words}"
    array = _as_array(value, name, where=where, allowed=allowed, optional=optional)
    if array.dtype.kind not in kinds:
        refuse(value, name, allowed, where=where, what=_dtype_what(value, array))
    if finite and array.dtype.kind == "f" and not np.all(np.isfinite(array)):
        bad = int(np.sum(~np.isfinite(array)))
        refuse(
            value,
            name,
            f"{words}, every one finite",
            where=where,
            what=f"an array holding {bad} NaN or infinite value{'s' * (bad != 1)}",
        )
    return array


def _as_array(value: Any, name: str, *, where: str, allowed: str, optional: bool) -> np.ndarray:
    """``np.asarray`` of a value of a kind an array is taken from; anything else, or a list
    NumPy cannot make rectangular, refused saying what it is."""
    taken = (
        isinstance(value, (np.ndarray, np.generic, list, tuple, numbers.Number))
        or hasattr(value, "__array__")
    ) and not isinstance(value, (str, bytes, type))
    if not taken:
        refuse(value, name, allowed, where=where, optional=optional)
    try:
        return np.asarray(value)
    except (ValueError, TypeError, OverflowError) as err:
        if isinstance(value, (list, tuple)) and "inhomogeneous" in str(err):
            refuse(
                value,
                name,
                f"{allowed} (a NumPy or JAX array, or nested lists of equal lengths)",
                where=where,
                what=f"a ragged {type(value).__name__} (its rows differ in length)",
            )
        refuse(
            value,
            name,
            allowed,
            where=where,
            what=f"not an array ({' '.join(str(err).split())[:80]})",
        )


def _dtype_what(value: Any, array: np.ndarray) -> str:
    """What a value of a dtype outside the allowed kinds is, as the refusal says it."""
    return (
        f"an array of dtype {array.dtype}"
        if isinstance(value, np.ndarray) or hasattr(value, "__array__")
        else f"a {type(value).__name__} of {array.dtype} values (not only numbers)"
        if array.dtype == object
        else f"a {type(value).__name__} that NumPy reads as dtype {array.dtype}"
    )


def positions_argument(value: Any, name: str = "initial_positions", *, where: str = "") -> Any:
    """A pytree whose every leaf is an array of integers or reals (the samplers' starting
    positions; :func:`bnnkit.runs.density.check_density` then asks for reals)."""
    import jax

    try:
        leaves = jax.tree_util.tree_flatten_with_path(value)[0]
    except Exception:  # a container whose flattening fails is not a pytree of arrays
        refuse(value, name, "a pytree (dict, list, tuple) of arrays", where=where)
    for path, leaf in leaves:
        leaf_name = f"{name}{'[' + repr(path_to_str(path)) + ']' if path else ''}"
        array_argument(leaf, leaf_name, where=where, kinds="biuf")
    return value


def with_options(check: Callable[..., Any], **options: Any) -> Callable[[Any, str, str], Any]:
    """``check`` as a row of a table of checks: called with (value, name, where)."""
    return lambda value, name, where: check(value, name, where=where, **options)


def check_arguments(
    where: str,
    arguments: Mapping[str, Any],
    checks: Mapping[str, Callable[[Any, str, str], Any]],
) -> None:
    """Check an entry point's arguments, each by its row of ``checks``; called first thing in
    the entry point on its ``locals()``, which then hold exactly its signature's parameters
    (:mod:`bnnkit.entry_points` holds every entry point's table).

    Every argument needs a row: one without is an error of bnnkit's, never skipped unchecked
    (``tests/test_entry_points.py`` holds each table to its entry point's signature).

    Raises:
        ConfigError: the first argument of a kind it does not take, in one line.
        TypeError: an argument without a row in ``checks``.

    Example:
        >>> check_arguments("f", {"n": "3"}, {"n": with_options(count_argument)})
        Traceback (most recent call last):
        ...
        bnnkit.errors.ArgumentError: f: n='3' is a str; allowed: an integer >= 1
        >>> check_arguments("f", {"n": 3, "m": 1}, {"n": with_options(count_argument)})
        Traceback (most recent call last):
        ...
        TypeError: f has no check for its argument 'm'
    """
    for name, value in arguments.items():
        if name not in checks:
            raise TypeError(f"{where} has no check for its argument {name!r}")
        checks[name](value, name, where)
