"""Every setting of every registered method's Config and of the problem knows its type, its
shape limit and its dtype's range: a property over all of them, derived from ``METHODS`` and
the fields' annotations, so a new method or setting is covered without editing this file.

- an integer setting refuses the first value past its upper bound (declared, or
  :data:`~bnnkit.settings.MAX_INT32`) and 10^23, in one line naming its flag, and a non-integer;
- a real setting refuses what float32 turns into inf (1e39) or into 0 (1e-45, a subnormal that
  XLA flushes) once the run's dtype is float32, naming its flag, and accepts it in float64
  where its declared bounds allow it;
- every setting refuses a value of another type (``object()``), naming the field.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from bnnkit.errors import ConfigError
from bnnkit.inference import METHODS
from bnnkit.problem import ProblemConfig
from bnnkit.settings import MAX_INT32, _kinds, _outside, check_dtype, field_types, flag
from config_values import minimal

CONFIGS = [*(module.Config for module in METHODS.values()), ProblemConfig]


def fields_of(kind: type) -> list[tuple[type, str]]:
    out = []
    for cls in CONFIGS:
        hints = field_types(cls)
        for field in dataclasses.fields(cls):
            kinds = _kinds(hints[field.name])[0]
            wanted = {
                int: int in kinds and float not in kinds,
                float: float in kinds,
                object: bool(kinds),
            }[kind]
            if wanted:
                out.append((cls, field.name))
    return out


def ids(cases):
    return [f"{cls.__module__.rsplit('.', 1)[-1]}.{cls.__name__}.{name}" for cls, name in cases]


def bounds(cls: type, name: str) -> tuple:
    field = {f.name: f for f in dataclasses.fields(cls)}[name]
    return field.metadata.get("bounds") or (None, None)


INTS = fields_of(int)
FLOATS = fields_of(float)
ALL = fields_of(object)


def test_the_properties_cover_every_method_and_the_problem():
    covered = {cls for cls, _ in ALL}
    assert covered == set(CONFIGS)
    assert len(INTS) >= 20 and len(FLOATS) >= 15


@pytest.mark.parametrize(("cls", "name"), INTS, ids=ids(INTS))
def test_an_integer_setting_refuses_what_a_shape_cannot_hold(cls, name):
    high = bounds(cls, name)[1]
    limit = MAX_INT32 if high is None else int(high)
    # int32 for shapes and counts, uint32 for the seed (what a PRNG key holds).
    assert limit <= 2**32 - 1, f"{name}'s upper bound {high} is more than 32 bits hold"
    for value in (limit + 1, 10**23):
        with pytest.raises(ConfigError) as refused:
            minimal(cls, **{name: value})
        message = str(refused.value)
        assert message.startswith(f"{flag(cls, name)} {value} out of range; allowed: "), message
        assert "\n" not in message
    with pytest.raises(ConfigError, match=f"^{name}=2.5 .*allowed: an integer"):
        minimal(cls, **{name: 2.5})
    # The limit itself is no range error (another setting's rule may still refuse it).
    try:
        minimal(cls, **{name: limit})
    except ConfigError as err:
        assert "out of range" not in str(err) or flag(cls, name) not in str(err), err


@pytest.mark.parametrize(("cls", "name"), FLOATS, ids=ids(FLOATS))
@pytest.mark.parametrize("value", [1e39, 1e-45], ids=["overflow", "underflow"])
def test_a_real_setting_refuses_what_float32_cannot_hold(cls, name, value):
    low, high = bounds(cls, name)
    if _outside(value, low, high):
        with pytest.raises(ConfigError, match=f"^{flag(cls, name)} "):
            minimal(cls, **{name: value})
        return
    name_flag = flag(cls, name)
    becomes = "inf" if value > 1 else "0"
    if cls is ProblemConfig:  # it knows its own dtype
        with pytest.raises(ConfigError) as refused:
            minimal(cls, **{name: value})
        assert str(refused.value).startswith(f"{name_flag} {value:g} is beyond float32"), (
            refused.value
        )
        assert f"(it would become {becomes})" in str(refused.value)
        assert getattr(minimal(cls, **{name: value, "float64": True}), name) == value
        return
    try:
        config = minimal(cls, **{name: value})
    except ConfigError:
        return  # refused by a rule between settings, before any run: refused all the same
    with pytest.raises(ConfigError) as refused:
        check_dtype(config, np.float32)
    assert str(refused.value).startswith(f"{name_flag} {value:g} is beyond float32"), refused.value
    assert f"(it would become {becomes})" in str(refused.value)
    check_dtype(config, np.float64)  # a float64 run holds it


@pytest.mark.parametrize(("cls", "name"), ALL, ids=ids(ALL))
def test_a_value_of_another_type_is_refused_naming_the_field(cls, name):
    with pytest.raises(ConfigError) as refused:
        minimal(cls, **{name: object()})
    assert str(refused.value).startswith(f"{name}=<object"), refused.value
    assert "allowed: " in str(refused.value) and "\n" not in str(refused.value)


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (
            lambda: METHODS["hmc"].Config(step_size=1e-3, trajectory_len=1e-2, num_chains=2.5),
            "num_chains",
        ),
        (
            lambda: METHODS["hmc"].Config(step_size=1e-3, trajectory_len=1e-2, num_iterations="4"),
            "num_iterations",
        ),
        (
            lambda: METHODS["hmc"].Config(step_size=1e-3, trajectory_len=1e-2, num_burn_in=2.5),
            "num_burn_in",
        ),
        (lambda: ProblemConfig("yacht_0", "linear", noise_std="abc"), "noise_std"),
        (lambda: ProblemConfig(123, "linear"), "dataset"),
        (lambda: ProblemConfig("yacht_0", "linear", subset_train_to=2.5), "subset_train_to"),
    ],
)
def test_python_callers_get_a_config_error_naming_the_field(make, field):
    with pytest.raises(ConfigError, match=f"^{field}="):
        make()


def test_numpy_numbers_are_taken_as_python_numbers():
    config = METHODS["hmc"].Config(
        step_size=np.float32(1e-3), trajectory_len=1e-2, num_chains=np.int64(2)
    )
    assert type(config.num_chains) is int and type(config.step_size) is float
    assert config.num_chains == 2
