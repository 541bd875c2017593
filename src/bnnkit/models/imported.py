"""Networks that are not in the registry: an importable Flax module, or a user's own objects.

A model is named in one of three ways, each turned into the same :class:`~bnnkit.models.Model`
(``init(key, x)``, ``apply(params, x, *, key=None)``) that the registry's models are:

- a registry name (``"mlp_regression_small"``, :mod:`bnnkit.models.registry`);
- an import path ``"package.module:ClassName"`` of a ``flax.linen.Module`` subclass, built with
  its constructor arguments (a JSON object, ``--model-args``); a ``num_outputs`` field the
  arguments leave out is set to what the likelihood needs, as for the registry's models;
- from Python (:meth:`bnnkit.Problem.from_arrays`), a ``flax.linen.Module`` instance, or an
  ``apply(params, x)`` function with its initial parameters (a pytree, or an ``init(key, x)``
  function).

A run records its model by name so that it can be rebuilt in another process
(:func:`describe`): a module instance by its class's import path and the constructor
arguments that differ from the defaults, when the class can be imported again (not defined in
``__main__`` or inside a function) and the arguments are JSON (numbers, strings, lists, ...).
Anything else is recorded as ``"<in memory: why>"``, which :func:`module_from_path` refuses in
one line saying why and how to pass the model back in.

Reading a run imports no code the run names. A recorded import path whose module is not
bnnkit's own (installed code) is imported only on the user's word on that call: ``--model
package.module:ClassName`` on the reading command, ``trust_model="package.module:ClassName"``
on a Python reader, or :func:`trusting_model` around any other (:func:`check_trusted`, which
:func:`bnnkit.problem.build_recorded` applies). A user's import is sandboxed (:func:`load_class`):
``sys.argv`` is only the module's name while it imports, and anything it raises, ``SystemExit``
and ``KeyboardInterrupt`` included, becomes one :class:`~bnnkit.errors.ConfigError`.

The current folder is searched for a module (after the installed packages, and only while that
module imports) because the user named it: ``--model my_models:CNN`` finds a ``my_models.py``
beside the command, as ``python -m my_models`` would. Every import path reaches
:func:`load_class` that way, since one only recorded in a run is refused before it is looked
for.

A module whose ``__call__`` takes ``deterministic`` is stochastic (dropout), under the contract
of :mod:`bnnkit.models.registry`: it draws from the ``"dropout"`` stream when a key is given.

Example:
    >>> import flax.linen as nn
    >>> from bnnkit.models.mlp import MLP
    >>> describe(MLP(hidden=(8,), num_outputs=2))
    ('bnnkit.models.mlp:MLP', '{"hidden":[8],"num_outputs":2}')
    >>> module = module_from_path("bnnkit.models.mlp:MLP", '{"hidden":[8]}', num_outputs=3)
    >>> module.hidden, module.num_outputs
    ((8,), 3)
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import importlib
import inspect
import io
import json
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

import flax.linen as nn
import jax

from bnnkit.errors import ConfigError
from bnnkit.models.registry import RNG_STREAM, Model, allowed_names
from bnnkit.types import Key, Params

#: How a model that cannot be rebuilt in another process is named in ``run.json``.
IN_MEMORY = "<in memory: "
#: Constructor fields of every flax module that are not the network's settings.
_FLAX_FIELDS = ("parent", "name")
#: The model import path the user allowed for the runs read in this context
#: (:func:`trusting_model`).
_TRUSTED: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "bnnkit_trusted_model", default=None
)


def is_import_path(name: str) -> bool:
    """Whether ``name`` is ``package.module:ClassName`` (not a registry name).

    Example:
        >>> is_import_path("my_models:CNN"), is_import_path("lenet5")
        (True, False)
    """
    return ":" in name and not name.startswith("<")


def is_in_memory(name: str) -> bool:
    """Whether a recorded model name is one that cannot be rebuilt (see :func:`describe`)."""
    return name.startswith(IN_MEMORY)


def canonical_args(text: str | None) -> str | None:
    """Constructor arguments as canonical JSON (sorted keys, no spaces), so equal arguments
    compare equal in ``run.json`` and on ``--resume``.

    Raises:
        ConfigError: not a JSON object.

    Example:
        >>> canonical_args('{ "width": 8, "depth": 2 }')
        '{"depth":2,"width":8}'
    """
    if text is None:
        return None
    try:
        value = json.loads(text)
    except (TypeError, json.JSONDecodeError) as err:
        raise ConfigError(
            f"--model-args {text!r} is not JSON ({err}); allowed: a JSON object "
            "such as '{\"features\": 32}'"
        ) from None
    if not isinstance(value, dict):
        raise ConfigError(
            f"--model-args {text!r} is not a JSON object; allowed: one such as "
            "'{\"features\": 32}'"
        )
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _tuples(value: Any) -> Any:
    """JSON's lists back into tuples, as flax modules keep sequences (hashable, immutable)."""
    if isinstance(value, list):
        return tuple(_tuples(v) for v in value)
    if isinstance(value, dict):
        return {k: _tuples(v) for k, v in value.items()}
    return value


def is_own(path: str) -> bool:
    """Whether the import path ``path`` names bnnkit's own code (installed with it, so
    importing it runs nothing a run could bring along).

    Example:
        >>> is_own("bnnkit.models.mlp:MLP"), is_own("bnnkit_extra:Net"), is_own("mymod:Net")
        (True, False, False)
    """
    module = path.partition(":")[0]
    return module == "bnnkit" or module.startswith("bnnkit.")


def needs_trust(path: str) -> bool:
    """Whether rebuilding a model recorded as ``path`` would import code outside bnnkit.

    Example:
        >>> needs_trust("mymod:Net"), needs_trust("mlp_regression_small")
        (True, False)
    """
    return is_import_path(path) and not is_in_memory(path) and not is_own(path)


@contextlib.contextmanager
def trusting_model(path: str | None) -> Iterator[None]:
    """Allow, inside the block, rebuilding runs that record the model ``path`` (see
    :func:`check_trusted`): the word of a user who names the model for a reader that takes no
    ``trust_model=`` of its own (``bnnkit report``, ``shift``, ``surface`` and the
    experiments behind them). ``None`` allows nothing.

    Example:
        >>> with trusting_model("mymod:Net"):
        ...     check_trusted("mymod:Net", None, where="the run 'r'")
    """
    token = _TRUSTED.set(path)
    try:
        yield
    finally:
        _TRUSTED.reset(token)


def check_trust_argument(trust_model: Any) -> None:
    """Refuse a ``trust_model`` that is neither ``None`` nor an import path's string.

    Raises:
        ConfigError: naming its type and what is allowed.

    Example:
        >>> check_trust_argument(["mymod:Net"])
        Traceback (most recent call last):
        ...
        bnnkit.errors.ConfigError: trust_model ['mymod:Net'] is a list; allowed: ...
    """
    if trust_model is not None and not isinstance(trust_model, str):
        raise ConfigError(
            f"trust_model {trust_model!r:.60} is a {type(trust_model).__name__}; "
            "allowed: the model's import path as a string ('package.module:"
            "ClassName') or None"
        )


def check_trusted(path: str, trust_model: str | None, *, where: str) -> None:
    """Refuse to rebuild a model that a run only records, when that imports code outside
    bnnkit and the user did not name it on this call.

    A run folder can carry a ``mymod.py`` of anyone's, and a ``run.json`` can name any module:
    reading a run must not run it. The user's word is ``trust_model`` (``--model`` on the
    command), or else the enclosing :func:`trusting_model`; it must be the recorded path
    exactly. A model of the registry or of bnnkit's own modules needs no word.

    Args:
        path: the model the run records (``run.json``'s ``problem.model``).
        trust_model: the import path the user allowed, or ``None``.
        where: the run, for messages (``"the run 'runs/hmc'"``).

    Raises:
        ConfigError: ``path`` needs importing a module outside bnnkit and no word allows it,
            or the word names another model; one line naming the module and how to allow it.

    Example:
        >>> check_trusted("mlp_regression_small", None, where="the run 'r'")
        >>> check_trusted("mymod:Net", None, where="the run 'r'")
        Traceback (most recent call last):
        ...
        bnnkit.errors.ConfigError: the run 'r' records the model mymod:Net, whose module ...
        allowed: --model mymod:Net on this command (from Python: trust_model='mymod:Net', ...
    """
    check_trust_argument(trust_model)
    if not needs_trust(path):
        return
    given = _TRUSTED.get() if trust_model is None else trust_model
    module = path.partition(":")[0]
    allow = (
        f"--model {path} on this command (from Python: trust_model={path!r}, or a block "
        f"with bnnkit.models.imported.trusting_model({path!r}))"
    )
    if given is None:
        raise ConfigError(
            f"{where} records the model {path}, whose module {module!r} is code "
            "outside bnnkit, and reading a run imports nothing it names; allowed: "
            f"{allow} if you trust module {module!r}"
        )
    if given != path:
        raise ConfigError(
            f"--model {given} is not the model of {where}, which records {path}; "
            f"allowed: {allow} if you trust module {module!r}"
        )


def load_class(path: str) -> type[nn.Module]:
    """The ``flax.linen.Module`` subclass that ``package.module:ClassName`` names.

    The import is the user's code, run so that it cannot take the process over: while it
    imports, ``sys.argv`` is ``[module name]`` (a script that parses its flags at import sees
    none of bnnkit's), what it prints is held back and shown only if it imports, and anything
    it raises (``SystemExit``, ``KeyboardInterrupt`` included) is one ConfigError. The current
    directory is searched after the installed packages, as ``python -m`` would, and only during
    this import: callers reach here only for a model the user named (:func:`check_trusted`).

    Raises:
        ConfigError: a malformed path, a module that does not import, a missing name, or
            something that is not a flax module class; one line naming it.
    """
    module_name, _, qualname = path.partition(":")
    allowed = f"allowed: a registered model ({allowed_names()}) or package.module:ClassName"
    if (
        not module_name
        or not qualname
        or not all(part.isidentifier() for part in [*module_name.split("."), *qualname.split(".")])
    ):
        raise ConfigError(f"--model {path!r} is not package.module:ClassName; {allowed}")
    if module_name == "__main__":
        raise ConfigError(
            f"--model {path!r} names a class of __main__ (a script or notebook), "
            "which another process cannot import; move it into a module"
        )
    module = _import(module_name, path, allowed)
    value: Any = module
    for part in qualname.split("."):
        value = getattr(value, part, None)
        if value is None:
            raise ConfigError(f"--model {path!r}: {module_name!r} has no {qualname!r}")
    if not (inspect.isclass(value) and issubclass(value, nn.Module)):
        raise ConfigError(
            f"--model {path!r} is {type(value).__name__} {value!r:.60}, not a "
            "flax.linen.Module subclass"
        )
    return value


def _import(module_name: str, path: str, allowed: str) -> Any:
    """``importlib.import_module(module_name)``, sandboxed as :func:`load_class` says."""
    if module_name in sys.modules:  # imported already: nothing of it runs again
        return sys.modules[module_name]
    cwd = os.getcwd()
    added = cwd not in sys.path
    argv, out, err_out = sys.argv, io.StringIO(), io.StringIO()
    if added:
        sys.path.append(cwd)
    sys.argv = [module_name]
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err_out):
            module = importlib.import_module(module_name)
    except BaseException as err:  # an import runs the user's code: SystemExit too
        said = " ".join((out.getvalue() + err_out.getvalue()).split())
        said = f"; it printed {said[-160:]!r}" if said else ""
        if isinstance(err, (SystemExit, KeyboardInterrupt)):
            how = (
                f"exited ({type(err).__name__} {err})"
                if isinstance(err, SystemExit)
                else "was interrupted (KeyboardInterrupt)"
            )
            raise ConfigError(
                f"--model {path!r}: importing {module_name!r} {how}{said}; "
                "allowed: a module that defines the model without running a "
                "program (put that under if __name__ == '__main__')"
            ) from None
        raise ConfigError(
            f"--model {path!r}: cannot import {module_name!r} "
            f"({type(err).__name__}: {' '.join(str(err).split())}){said}; "
            f"{allowed} importable here"
        ) from None
    finally:
        sys.argv = argv
        if added and cwd in sys.path:
            sys.path.remove(cwd)
    # What the import printed (a warning, a banner) is the user's to see, once it worked.
    sys.stdout.write(out.getvalue())
    sys.stderr.write(err_out.getvalue())
    return module


def _init_fields(cls: type) -> dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(cls) if f.init and f.name not in _FLAX_FIELDS}


def module_from_path(path: str, args: str | None, *, num_outputs: int) -> nn.Module:
    """Build the module ``path`` names with ``args`` (JSON), ``num_outputs`` where it has
    that field and ``args`` leave it out.

    Raises:
        ConfigError: a model recorded as in memory (with how to pass it back), or the class
            or its arguments refused, in one line.
    """
    if is_in_memory(path):
        raise ConfigError(
            f"the run's model {path} cannot be re-created here; pass it back in: "
            "bnnkit.evaluate(run_dir, problem=bnnkit.Problem.from_arrays(...)) "
            "with the same model and arrays"
        )
    cls = load_class(path)
    kwargs = _tuples(json.loads(args)) if args else {}
    fields = _init_fields(cls)
    unknown = sorted(set(kwargs) - set(fields))
    if unknown:
        raise ConfigError(
            f"--model-args: {path} has no argument {', '.join(unknown)}; allowed: "
            f"{', '.join(fields) or 'none'}"
        )
    if "num_outputs" in fields and "num_outputs" not in kwargs:
        kwargs["num_outputs"] = num_outputs
    try:
        return cls(**kwargs)
    except Exception as err:  # the user's constructor refused its arguments
        raise ConfigError(
            f"--model {path} with --model-args {args!r}: "
            f"{type(err).__name__}: {' '.join(str(err).split())}"
        ) from None


def _jsonable(value: Any) -> bool:
    if value is None or isinstance(value, (bool, int, float, str)):
        return not isinstance(value, float) or value == value  # NaN does not round-trip
    if isinstance(value, (list, tuple)):
        return all(_jsonable(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _jsonable(v) for k, v in value.items())
    return False


def describe(module: nn.Module) -> tuple[str, str | None]:
    """How a run records ``module``: ``(import path, constructor arguments as JSON)``, or
    ``("<in memory: why>", None)`` when another process could not rebuild it.

    Example:
        >>> class Local(nn.Module):
        ...     @nn.compact
        ...     def __call__(self, x):
        ...         return nn.Dense(1)(x)
        >>> describe(Local())[0]  # a class no import finds again
        '<in memory: class bnnkit.models.imported:Local does not import again as the same class>'
    """
    cls = type(module)
    where, qualname = cls.__module__, cls.__qualname__
    if "<locals>" in qualname:
        return f"{IN_MEMORY}class {cls.__name__} is defined inside a function>", None
    if where == "__main__":
        return (
            f"{IN_MEMORY}class {cls.__name__} is defined in __main__ (a script or notebook), "
            "which another process cannot import>",
            None,
        )
    path = f"{where}:{qualname}"
    try:
        importable = load_class(path) is cls
    except ConfigError:
        importable = False
    if not importable:
        return f"{IN_MEMORY}class {path} does not import again as the same class>", None
    args = {}
    for name, field in _init_fields(cls).items():
        value = getattr(module, name)
        if field.default is not dataclasses.MISSING and _tuples(value) == _tuples(field.default):
            continue
        if not _jsonable(value):
            return (f"{IN_MEMORY}{path} whose argument {name}={value!r:.40} is not JSON>", None)
        args[name] = value
    return path, (json.dumps(args, sort_keys=True, separators=(",", ":")) if args else None)


def _stochastic(module: nn.Module) -> bool:
    """A module whose ``__call__`` takes ``deterministic`` has randomness of its own."""
    return "deterministic" in inspect.signature(type(module).__call__).parameters


def from_module(module: nn.Module, name: str, num_outputs: int) -> Model:
    """A flax module as a :class:`~bnnkit.models.Model`."""
    stochastic = _stochastic(module)
    if not stochastic:

        def apply(params: Params, x: jax.Array, *, key: Key | None = None) -> Any:
            del key  # nothing random to draw
            return module.apply(params, x)
    else:

        def apply(params: Params, x: jax.Array, *, key: Key | None = None) -> Any:
            if key is None:
                return module.apply(params, x, deterministic=True)
            return module.apply(params, x, deterministic=False, rngs={RNG_STREAM: key})

    return Model(
        name=name, init=module.init, apply=apply, num_outputs=num_outputs, stochastic=stochastic
    )


def from_function(
    apply_fn: Callable[[Params, jax.Array], jax.Array],
    params: Params | Callable[[jax.Array, jax.Array], Params],
    num_outputs: int,
) -> Model:
    """An ``apply(params, x)`` function as a :class:`~bnnkit.models.Model`.

    Args:
        apply_fn: ``(params, x) -> outputs``, deterministic.
        params: the initial parameters every chain and member starts from, or an
            ``init(key, x)`` function that draws them (members then start apart).
        num_outputs: the outputs the likelihood needs.
    """
    name = getattr(apply_fn, "__qualname__", type(apply_fn).__name__)
    if callable(params):
        init = params
    else:

        def init(key: jax.Array, x: jax.Array) -> Params:
            del key, x  # the same given start for every member
            return params

    def apply(p: Params, x: jax.Array, *, key: Key | None = None) -> Any:
        del key  # a plain function has no randomness of its own
        return apply_fn(p, x)

    return Model(
        name=f"{IN_MEMORY}function {name} (an apply function)>",
        init=init,
        apply=apply,
        num_outputs=num_outputs,
    )


def check_outputs(model: Model, example: jax.Array, num_outputs: int, likelihood: str) -> None:
    """Refuse, before anything is compiled, a model whose outputs the likelihood cannot read.

    Args:
        model: the model.
        example: one input example with its batch axis (shapes only are traced).
        num_outputs: outputs per example the likelihood needs.
        likelihood: the likelihood, for the message (``"categorical with 3 classes"``).

    Raises:
        ConfigError: initialising or applying the model fails on the data's inputs, or its
            outputs are not ``(batch, num_outputs)``.
    """
    try:
        params = jax.eval_shape(model.init, jax.random.PRNGKey(0), example)
        out = jax.eval_shape(lambda p, x: model.apply(p, x), params, example)
    except Exception as err:  # the user's network refused the data
        raise ConfigError(
            f"model {model.name} fails on inputs of shape {tuple(example.shape)}: "
            f"{type(err).__name__}: {' '.join(str(err).split())[:200]}"
        ) from None
    shape = tuple(getattr(out, "shape", ()))
    if shape != (example.shape[0], num_outputs):
        raise ConfigError(
            f"model {model.name} gives outputs of shape {shape} for inputs of "
            f"shape {tuple(example.shape)}; the {likelihood} likelihood needs "
            f"({example.shape[0]}, {num_outputs})"
        )
