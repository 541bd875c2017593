"""The joint prior of a whole position: network weights, latent prior scales, noise std.

A *position* is the one pytree every method moves: the flax variables dict
``{"params": weights}``, plus ``{"prior": latents}`` when a hierarchical family is used (the
log-variances, nested like the parameters they scale: ``position["prior"]["Dense_0"]["kernel"]``)
and ``{"noise": {"log_std": u}}`` when the regression noise std is inferred. The joint log
density is

    log p(position) = Σ_leaves log p_leaf(w_leaf, u_leaf) + log p(u_noise)

where each leaf's family is chosen by the rules of :func:`make`: the last matching layer rule,
else the bias prior for leaves named ``bias``, else the default prior.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import math
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from bnnkit.errors import ConfigError
from bnnkit.priors import spec as spec_lib
from bnnkit.priors.families import gaussian_kl
from bnnkit.priors.isotropic import Gaussian
from bnnkit.priors.noise import NoiseFamily
from bnnkit.storage import path_to_str

Position = Any
PRIOR = "prior"
NOISE = "noise"
PARAMS = "params"


def _weights(position: Position) -> Any:
    """The network parameters of a position (a bare params tree is its own weights)."""
    if isinstance(position, Mapping) and PARAMS in position:
        return position[PARAMS]
    return position


def _path_keys(path: tuple) -> tuple[str, ...]:
    return tuple(path_to_str((entry,)) for entry in path)


def _nested_get(tree: Mapping, keys: tuple[str, ...]) -> Any:
    for key in keys:
        tree = tree[key]
    return tree


def _nested_set(tree: dict, keys: tuple[str, ...], value: Any) -> None:
    for key in keys[:-1]:
        tree = tree.setdefault(key, {})
    tree[keys[-1]] = value


def matches(pattern: str, path: str) -> bool:
    """A layer pattern covers the path itself or anything under it.

    Example:
        >>> matches("Dense_0", "Dense_0/bias"), matches("Dense_*/kernel", "Dense_1/kernel")
        (True, True)
    """
    return fnmatch.fnmatchcase(path, pattern) or fnmatch.fnmatchcase(path, pattern + "/*")


@dataclasses.dataclass(frozen=True)
class JointPrior:
    """Per-leaf families over the weights, their latent scales, and the noise std.

    Attributes:
        default: family of every leaf no other rule covers.
        bias: family of leaves named ``bias`` (``None``: the default's).
        layers: ``(pattern, family)`` rules; the last matching one wins over ``bias``.
        noise: prior of the regression noise std (``None``: not inferred).
        description: the specs it was made from, for messages and ``str``.

    Example:
        >>> prior = make("laplace:scale=0.1", bias="gaussian:scale=1")
        >>> params = {"params": {"Dense_0": {"kernel": jnp.zeros((3, 2)), "bias": jnp.zeros(2)}}}
        >>> float(prior.log_prob(params))  # 6 log(1/0.2) + 2 log N(0; 0, 1)
        7.81875
    """

    default: Any
    bias: Any = None
    layers: tuple[tuple[str, Any], ...] = ()
    noise: NoiseFamily | None = None
    description: str = ""

    def __str__(self) -> str:
        return self.description

    @property
    def name(self) -> str:
        return self.description

    def family_for(self, path: str) -> Any:
        """The family of the parameter at ``path`` (e.g. ``"Dense_0/kernel"``)."""
        for pattern, family in reversed(self.layers):
            if matches(pattern, path):
                return family
        if self.bias is not None and path.rsplit("/", 1)[-1] == "bias":
            return self.bias
        return self.default

    def _leaves(self, weights: Any):
        for path, leaf in jax.tree_util.tree_flatten_with_path(weights)[0]:
            keys = _path_keys(path)
            yield keys, leaf, self.family_for("/".join(keys))

    def check_layers(self, like: Position) -> None:
        """Refuse a layer pattern that matches none of the parameters of ``like``.

        Raises:
            ConfigError: naming the pattern and listing the parameter paths.
        """
        paths = ["/".join(keys) for keys, _, _ in self._leaves(_weights(like))]
        for pattern, _ in self.layers:
            if not any(matches(pattern, p) for p in paths):
                raise ConfigError(
                    f"layer prior pattern {pattern!r} matches no parameter; "
                    f"allowed: a glob over {', '.join(paths)}"
                )

    @property
    def has_latents(self) -> bool:
        families = [self.default, self.bias, *(f for _, f in self.layers)]
        return any(hasattr(f, "latent_log_prob") for f in families if f is not None)

    def log_prob(self, position: Position) -> jax.Array:
        """``log p`` of the weights, their latent log-variances and the noise log-std.

        Jacobians of the log parameterisations are included, so this is the density of the
        unconstrained position that samplers move.
        """
        latents = position.get(PRIOR, {}) if isinstance(position, Mapping) else {}
        total = jnp.zeros(())
        for keys, w, family in self._leaves(_weights(position)):
            if family.latent_shape(w.shape) is None:
                total = total + family.leaf_log_prob(w)
            else:
                try:
                    u = _nested_get(latents, keys)
                except (KeyError, TypeError):
                    raise ValueError(
                        f"position lacks the latent {PRIOR}/{'/'.join(keys)} of prior "
                        f"{family.name!r}; start from Problem.init_params or prior.init_latents"
                    ) from None
                total = total + family.leaf_log_prob(w, u)
        if self.noise is not None:
            total = total + self.noise.log_std_log_prob(position[NOISE]["log_std"])
        return total

    def init_latents(self, like: Position) -> dict:
        """Extra collections of a position, at the mode of their prior; ``{}`` if none.

        ``like`` is a position or params tree (arrays or ``jax.ShapeDtypeStruct``).
        """
        out: dict[str, Any] = {}
        latents: dict[str, Any] = {}
        for keys, leaf, family in self._leaves(_weights(like)):
            if family.latent_shape(leaf.shape) is not None:
                _nested_set(latents, keys, family.init_latent(leaf.shape, leaf.dtype))
        if latents:
            out[PRIOR] = latents
        if self.noise is not None:
            dtype = jax.tree.leaves(_weights(like))[0].dtype
            out[NOISE] = {"log_std": jnp.asarray(self.noise.init_log_std(), dtype)}
        return out

    def sample(self, key: jax.Array, like: Position) -> Position:
        """A draw from the prior shaped like ``like``.

        With a ``params`` collection in ``like`` the result is a full position (latents and
        noise included); for a bare params tree it is the weights alone, which are then draws
        from the marginal prior of the weights.
        """
        weights = _weights(like)
        leaves = list(self._leaves(weights))
        keys = jax.random.split(key, len(leaves) + 1)
        draws, latents = [], {}
        for k, (path, leaf, family) in zip(keys[:-1], leaves, strict=True):
            w, u = family.leaf_sample(k, leaf.shape, leaf.dtype)
            draws.append(w)
            if u is not None:
                _nested_set(latents, path, u)
        sampled = jax.tree.unflatten(jax.tree.structure(weights), draws)
        if not (isinstance(like, Mapping) and PARAMS in like):
            return sampled
        out = {PARAMS: sampled}
        if latents:
            out[PRIOR] = latents
        if self.noise is not None:
            out[NOISE] = {"log_std": self.noise.sample_log_std(keys[-1], (), draws[0].dtype)}
        return out

    @property
    def has_closed_form_kl(self) -> bool:
        """Whether :meth:`kl_closed_form` exists: Gaussian families only, nothing inferred."""
        families = [self.default, self.bias, *(f for _, f in self.layers)]
        gaussian = all(f is None or f.gaussian_std((1, 1)) is not None for f in families)
        return gaussian and self.noise is None

    def kl_closed_form(self, mean: Position, std: Position) -> jax.Array:
        """``KL(q || p)`` for the mean-field Gaussian ``q = N(mean, std²)`` over the weights.

        Per weight, ``log(σ_p/σ_q) + (σ_q² + μ_q²)/(2σ_p²) - ½``.

        Raises:
            ConfigError: the prior is not Gaussian everywhere (use a Monte Carlo estimate from
                :meth:`log_prob` instead).
        """
        if not self.has_closed_form_kl:
            raise ConfigError(
                f"prior {self.description!r} has no closed-form KL; allowed: "
                "gaussian and fanin_gaussian families without --noise-prior"
            )
        total = jnp.zeros(())
        for (keys, m, family), s in zip(
            self._leaves(_weights(mean)), jax.tree.leaves(_weights(std)), strict=True
        ):
            del keys
            total = total + gaussian_kl(m, s, family.gaussian_std(m.shape))
        return total


Prior = Gaussian | JointPrior


def _bare_gaussian(spec: spec_lib.Spec | None) -> bool:
    return spec is None or (spec.family == "gaussian" and not spec.params)


def uses_weight_decay(
    prior: str | spec_lib.Spec | None = None,
    bias: str | spec_lib.Spec | None = None,
    layers: str | Sequence[str] | None = None,
) -> bool:
    """Whether a weight decay λ reaches any part of the prior these specs make: the default
    Gaussian, or a bare ``gaussian`` for the weights, the biases or a layer; a family with its
    own scale ignores it.

    Raises:
        ConfigError: a bad spec.

    Example:
        >>> uses_weight_decay(), uses_weight_decay("laplace:scale=0.1")
        (True, False)
        >>> uses_weight_decay("laplace:scale=0.1", layers="Dense_2=gaussian")
        True
    """
    specs = [None if prior is None else spec_lib.parse(prior)]
    specs += [spec_lib.parse(bias)] if bias is not None else []
    specs += [rule.spec for rule in spec_lib.parse_layer_rules(layers)]
    return _bare_gaussian(specs[0]) or any(s is not None and _bare_gaussian(s) for s in specs[1:])


def make(
    prior: str | spec_lib.Spec | None = None,
    *,
    bias: str | spec_lib.Spec | None = None,
    layers: str | Sequence[str] | None = None,
    noise: str | spec_lib.Spec | None = None,
    weight_decay: float = 1.0,
    like: Position | None = None,
) -> Prior:
    """Build the prior from specs.

    Args:
        prior: default family for every parameter (``None``: ``gaussian``, σ² = 1/λ).
        bias: family for leaves named ``bias``.
        layers: ``PATTERN=SPEC`` rules (a ``;``-joined string or a sequence); the last match
            wins, also over ``bias``.
        noise: prior on the regression noise std σ₀, inferred as ``log σ₀``.
        weight_decay: λ, the precision of every ``gaussian`` given without a scale.
        like: parameter shapes (a position, params tree or ``jax.eval_shape`` of one); when
            given, every layer pattern must match a parameter.

    Returns:
        :class:`~bnnkit.priors.isotropic.Gaussian` for a plain Gaussian prior (exactly the
        weight-decay prior), otherwise a :class:`JointPrior`.

    Raises:
        ConfigError: a bad spec, a non-positive weight decay, a weight decay that no family
            uses, or a layer pattern that matches nothing.

    Example:
        >>> make()
        Gaussian(weight_decay=1.0)
        >>> str(make("laplace:scale=0.1", layers="Dense_2=gaussian:scale=0.5"))
        'laplace:scale=0.1; Dense_2=gaussian:scale=0.5'
    """
    if not (weight_decay > 0 and math.isfinite(weight_decay)):
        raise ConfigError(f"weight decay {weight_decay} must be a finite number > 0")
    default = None if prior is None else spec_lib.parse(prior)
    bias_spec = None if bias is None else spec_lib.parse(bias)
    rules = spec_lib.parse_layer_rules(layers)
    noise_spec = None if noise is None else spec_lib.parse(noise, kind="noise")
    if weight_decay != 1.0 and not uses_weight_decay(prior, bias, layers):
        raise ConfigError(
            f"weight decay {weight_decay} is not used by prior {str(default)!r}; allowed: "
            "give the scale in the prior spec, or weight decay with a plain 'gaussian'"
        )
    if bias_spec is None and not rules and noise_spec is None:
        if default is None:
            return Gaussian(weight_decay=weight_decay)
        if default.family == "gaussian" and "scale" not in default.values:
            return Gaussian(weight_decay=default.values.get("weight_decay", weight_decay))
    build = lambda s: s.build(weight_decay=weight_decay)  # noqa: E731
    parts = [str(default or "gaussian")]
    if bias_spec is not None:
        parts.append(f"bias={bias_spec}")
    parts += [str(r) for r in rules]
    if noise_spec is not None:
        parts.append(f"noise={noise_spec}")
    joint = JointPrior(
        default=build(default or spec_lib.parse("gaussian")),
        bias=None if bias_spec is None else build(bias_spec),
        layers=tuple((r.pattern, build(r.spec)) for r in rules),
        noise=None if noise_spec is None else noise_spec.build(),
        description="; ".join(parts),
    )
    if like is not None:
        joint.check_layers(like)
    return joint
