"""Every storable kind of posterior satisfies the Posterior protocol, structurally and by
behaviour, and a new kind needs only its class and one entry in the store's KINDS."""

from __future__ import annotations

import dataclasses
import inspect
import json
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bnnkit import models, storage
from bnnkit.posterior import DiagGaussian, Mixture, Posterior, Samples, store
from bnnkit.posterior.laplace import DiagLaplace, KFACLaplace, LastLayerLaplace
from bnnkit.posterior.low_rank_gaussian import LowRankGaussian
from bnnkit.posterior.mc_dropout import MCDropout
from bnnkit.predict import posterior_predictive
from bnnkit.problem import ProblemConfig, build
from bnnkit.runs.initial import _positions
from bnnkit.runs.stored import combine
from bnnkit.types import Key, Params

# The members the protocol states, read from the protocol itself.
MEMBERS = sorted(
    {name for name in vars(Posterior) if not name.startswith("_")} | set(Posterior.__annotations__)
)


def template() -> Params:
    """A position of the linear model on 3 inputs with 2 outputs."""
    model = models.get("linear", num_outputs=2)
    return model.init(jax.random.PRNGKey(0), jnp.zeros((1, 3)))


def positive_like(key: Key, tree: Params) -> Params:
    leaves, treedef = jax.tree.flatten(tree)
    keys = jax.random.split(key, len(leaves))
    return treedef.unflatten(
        [jnp.exp(jax.random.normal(k, leaf.shape)) for k, leaf in zip(keys, leaves, strict=True)]
    )


def orthogonal(key: Key, n: int) -> jax.Array:
    return jnp.linalg.qr(jax.random.normal(key, (n, n)))[0]


def samples(t: Params) -> Samples:
    return Samples(
        jax.tree.map(
            lambda a: np.arange(2 * 3 * a.size, dtype=np.float32).reshape((2, 3, *a.shape)), t
        )
    )


# One instance of every kind the store knows, with nothing at a default that could hide a
# field the round trip loses.
FACTORIES = {
    "samples": samples,
    "diag_gaussian": lambda t: DiagGaussian(
        t, positive_like(jax.random.PRNGKey(1), t), num_draws=3
    ),
    "laplace_diag": lambda t: DiagLaplace(
        t,
        positive_like(jax.random.PRNGKey(2), t),
        info={"prior_precision": 2.0},
        num_draws=3,
        predictive="glm",
    ),
    "laplace_last_layer": lambda t: LastLayerLaplace(
        t,
        ("params", "Dense_0"),
        0.1 * orthogonal(jax.random.PRNGKey(3), 8),
        info={"damping": 0.0},
        num_draws=4,
    ),
    "laplace_kfac": lambda t: KFACLaplace(
        t,
        {
            "Dense_0": (
                orthogonal(jax.random.PRNGKey(4), 4),
                orthogonal(jax.random.PRNGKey(5), 2),
                positive_like(jax.random.PRNGKey(6), {"e": jnp.zeros((4, 2))})["e"],
            )
        },
        num_draws=2,
    ),
    "low_rank_gaussian": lambda t: LowRankGaussian(
        t,
        positive_like(jax.random.PRNGKey(11), t),
        jax.tree.map(lambda a: jax.random.normal(jax.random.PRNGKey(12), (3, *a.shape)), t),
        num_draws=3,
    ),
    "mc_dropout": lambda t: MCDropout(positive_like(jax.random.PRNGKey(13), t), 0.25, 3),
}


def test_every_kind_has_a_factory_here():
    assert sorted(FACTORIES) == sorted(store.KINDS), "add an instance of the new kind"


def test_the_protocol_states_what_is_read():
    assert MEMBERS == ["arrays", "draws", "from_arrays", "kind", "mean", "meta", "sample"]


def leaves_equal(a, b) -> bool:
    return jax.tree.structure(a) == jax.tree.structure(b) and all(
        np.array_equal(np.asarray(x), np.asarray(y))
        for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
    )


def check_signature(cls: type, name: str) -> None:
    """``cls.name`` takes the protocol's parameters, in order; any more have defaults."""
    wanted = list(inspect.signature(getattr(Posterior, name)).parameters)
    got = list(inspect.signature(getattr(cls, name)).parameters.values())
    assert [p.name for p in got[: len(wanted)]] == wanted, (cls.__name__, name)
    assert all(p.default is not inspect.Parameter.empty for p in got[len(wanted) :]), name


@pytest.mark.parametrize("kind", sorted(store.KINDS))
def test_kind_satisfies_the_protocol(kind, tmp_path):
    cls = store.KINDS[kind]
    t = template()
    posterior = FACTORIES[kind](t)
    assert type(posterior) is cls and cls.kind == kind

    # Structurally: every member, with the protocol's signatures; from_arrays a classmethod.
    assert isinstance(posterior, Posterior)
    for name in MEMBERS:
        assert hasattr(posterior, name), (kind, name)
    for name in ("sample", "draws", "arrays", "meta", "from_arrays"):
        check_signature(cls, name)
    assert isinstance(inspect.getattr_static(cls, "from_arrays"), classmethod)

    # By behaviour: draws, model-average draws and the centre have the position's structure.
    draws = posterior.sample(jax.random.PRNGKey(7), 5)
    assert jax.tree.structure(draws) == jax.tree.structure(t)
    for d, leaf in zip(jax.tree.leaves(draws), jax.tree.leaves(t), strict=True):
        assert d.shape == (5, *leaf.shape)
    average = posterior.draws(jax.random.PRNGKey(8))
    assert isinstance(average, Samples) and average.num_samples >= 1
    assert jax.tree.structure(average.params) == jax.tree.structure(t)
    for name, (m, leaf) in enumerate(
        zip(jax.tree.leaves(posterior.mean), jax.tree.leaves(t), strict=True)
    ):
        assert np.shape(m) == leaf.shape, name
    assert jax.tree.structure(posterior.mean) == jax.tree.structure(t)

    # It rebuilds from its arrays and meta (as JSON, which is how the store keeps the meta):
    # the same arrays bit for bit, the same meta, and the same draws for the same key.
    arrays = {k: np.asarray(v) for k, v in posterior.arrays().items()}
    meta = json.loads(json.dumps(posterior.meta()))
    again = cls.from_arrays(t, arrays, meta)
    assert type(again) is cls
    assert again.arrays().keys() == arrays.keys()
    for k, v in again.arrays().items():
        np.testing.assert_array_equal(np.asarray(v), arrays[k], err_msg=k)
    assert again.meta() == meta
    assert leaves_equal(
        again.sample(jax.random.PRNGKey(9), 4), posterior.sample(jax.random.PRNGKey(9), 4)
    )
    assert leaves_equal(
        again.draws(jax.random.PRNGKey(10)).params, posterior.draws(jax.random.PRNGKey(10)).params
    )

    # And through the one store, unchanged.
    store.save(tmp_path / "p.npz", [posterior])
    (loaded,) = store.load(tmp_path / "p.npz", t)
    assert type(loaded) is cls
    for k, v in loaded.arrays().items():
        np.testing.assert_array_equal(np.asarray(v), arrays[k], err_msg=k)


@dataclasses.dataclass(frozen=True)
class PointMass:
    """A kind the library does not have: δ(θ − θ*), drawn ``num_draws`` times."""

    mean: Params
    num_draws: int = 2

    kind: ClassVar[str] = "point_mass_under_test"

    def sample(self, key: Key, n: int) -> Params:
        del key
        return jax.tree.map(lambda a: jnp.broadcast_to(a, (n, *np.shape(a))), self.mean)

    def draws(self, key: Key) -> Samples:
        return Samples.from_single_chain(jax.tree.map(np.asarray, self.sample(key, self.num_draws)))

    def arrays(self) -> dict[str, np.ndarray]:
        return storage.flatten_tree(self.mean, "mean/")

    def meta(self) -> dict[str, Any]:
        return {"num_draws": self.num_draws}

    @classmethod
    def from_arrays(cls, template: Params, arrays: dict, meta: dict) -> PointMass:
        return cls(storage.unflatten_tree(template, arrays, "mean/"), meta["num_draws"])


def test_a_new_kind_needs_only_its_class_and_one_entry(tmp_path, monkeypatch):
    monkeypatch.setitem(store.KINDS, PointMass.kind, PointMass)
    problem = build(ProblemConfig("yacht_0", "linear", noise_std=0.5))
    t = problem.init_params(jax.random.PRNGKey(0))
    centres = [jax.tree.map(lambda a, i=i: np.asarray(a) + i, t) for i in range(2)]
    assert isinstance(PointMass(centres[0]), Posterior)

    # Stored per member, one file per kept unit; read back and combined like VI's posteriors.
    for unit, centre in enumerate(centres):
        store.save(tmp_path / f"sample_{unit}.npz", [PointMass(centre), PointMass(centre)])
    units = [store.load(tmp_path / f"sample_{unit}.npz", t) for unit in range(2)]
    posterior = combine(units)
    assert isinstance(posterior, Mixture) and len(posterior.components) == 4

    # The predictive averages the model over its draws: here 4 components x 2 equal draws.
    x = problem.dataset.x_test
    prediction = posterior_predictive(problem, posterior, x, jax.random.PRNGKey(1))
    assert prediction.means.shape == (8, len(x)) and np.all(np.isfinite(prediction.means))
    by_hand = np.concatenate(
        [
            np.asarray(problem.apply(c, problem.to_device(x)))[None]
            for c in (centres[0], centres[0], centres[1], centres[1])
        ]
    )
    scale, shift = problem.dataset.target_scale, problem.dataset.target_shift
    np.testing.assert_allclose(
        prediction.means[::2], by_hand[..., 0] * scale + shift, rtol=1e-5, atol=1e-5
    )

    # A run started from it starts at each component's centre.
    starts = _positions(posterior, -1)
    for c, centre in enumerate((centres[0], centres[0], centres[1], centres[1])):
        assert leaves_equal(jax.tree.map(lambda a, c=c: a[c], starts), centre)
