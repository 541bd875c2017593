"""One compiled copy of each network per test session: compiling ResNet-20 dominates test time."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import pytest

from bnnkit.models import Model, get

BATCH = 2


class Built(NamedTuple):
    """A model, two parameter draws, a batch of ``BATCH`` inputs and the jitted ``apply``."""

    model: Model
    p1: Any
    p2: Any
    x: jax.Array
    apply: Callable[[Any, jax.Array], jax.Array]


def example_inputs(shape: tuple[int, ...], tokens: bool, batch: int = BATCH) -> jax.Array:
    key = jax.random.PRNGKey(0)
    if tokens:
        return jax.random.randint(key, (batch, *shape), 0, 20_000)
    return jax.random.normal(key, (batch, *shape))


@pytest.fixture(scope="session")
def build() -> Callable[[str, int, tuple[int, ...], bool], Built]:
    cache: dict[tuple, Built] = {}

    def _build(name: str, num_outputs: int, shape: tuple[int, ...], tokens: bool) -> Built:
        key = (name, num_outputs, shape, tokens)
        if key not in cache:
            model = get(name, num_outputs)
            x = example_inputs(shape, tokens)
            init = jax.jit(model.init)
            cache[key] = Built(
                model,
                init(jax.random.PRNGKey(1), x[:1]),
                init(jax.random.PRNGKey(2), x[:1]),
                x,
                jax.jit(model.apply),
            )
        return cache[key]

    return _build
