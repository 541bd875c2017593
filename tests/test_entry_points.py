"""Each public entry point's table of argument checks is its signature: a parameter without a
check fails here (and in the entry point itself), a check without a parameter too."""

from __future__ import annotations

import inspect

import pytest

import bnnkit
from bnnkit.arguments import check_arguments, count_argument, with_options
from bnnkit.entry_points import ENTRY_POINTS


def public_function(where: str):
    return getattr(bnnkit, where.removeprefix("bnnkit."))


@pytest.mark.parametrize("where", sorted(ENTRY_POINTS))
def test_every_parameter_of_an_entry_point_has_a_check_and_every_check_a_parameter(where):
    parameters = set(inspect.signature(public_function(where)).parameters)
    checks = set(ENTRY_POINTS[where])
    assert parameters - checks == set(), f"{where}: parameters without a check"
    assert checks - parameters == set(), f"{where}: checks of no parameter"


def test_every_public_function_that_checks_its_arguments_has_a_table():
    # An entry point checks its arguments by calling check_call or check_arguments first thing;
    # each that does is a key of ENTRY_POINTS, so the test above covers it.
    checking = {
        f"bnnkit.{name}"
        for name in bnnkit.__all__
        if inspect.isfunction(function := getattr(bnnkit, name))
        and {"check_call", "check_arguments"} & set(function.__code__.co_names)
    }
    assert checking, "no public function calls check_call: the test looks in the wrong place"
    assert checking == set(ENTRY_POINTS)


def test_an_argument_without_a_check_is_an_error_not_skipped():
    # Checked by the row it has, then stopped at the one it lacks, whatever its value.
    checks = {"n": with_options(count_argument)}
    with pytest.raises(bnnkit.ConfigError, match="n='3'"):
        check_arguments("f", {"n": "3", "m": 1}, checks)
    with pytest.raises(TypeError, match="f has no check for its argument 'm'"):
        check_arguments("f", {"n": 3, "m": 1}, checks)
