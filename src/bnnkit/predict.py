"""Predictive distributions of a posterior: the Bayesian model average and the linearised one.

- :func:`predict`, the Bayesian model average (BMA) over posterior samples. Classification:
  ``p(y | x, D) ≈ (1/S) Σ_s softmax(f(x; θ_s))``. Regression: the equal-weight mixture
  ``(1/S) Σ_s N(y | μ(x; θ_s), σ(x; θ_s)²)``, reported in the original units of the targets
  (the dataset's standardisation is undone); an inferred noise std σ₀ is each sample's own.
- :func:`glm_predict`, the linearised (GLM) predictive of a Laplace approximation:
  ``f(x; θ) ≈ f(x; θ*) + J(x)(θ − θ*)`` is Gaussian in output space with covariance
  ``J Λ⁻¹ Jᵀ``. Regression adds the observation noise, ``N(μ*, J Λ⁻¹ Jᵀ + σ²)``;
  classification uses the probit approximation ``softmax(f*_k / √(1 + π/8 · (J Λ⁻¹ Jᵀ)_kk))``
  (MacKay 1992).
- :func:`posterior_predictive`: whichever of the two a stored posterior asks for.

A model with randomness of its own (dropout, :mod:`bnnkit.models.registry`) is averaged over
it too when a key is given: posterior draw s makes its pass with its own key, so the model
average is ``(1/S) Σ_s p(y | x, θ_s, ε_s)`` over draws of the weights and the model's noise
together. Without a key, or for a model without randomness, every pass is deterministic.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from bnnkit.inference.laplace import output_covariance as cov
from bnnkit.log_posterior import network_variables
from bnnkit.posterior import Samples
from bnnkit.posterior.laplace import DiagLaplace, KFACLaplace, LastLayerLaplace
from bnnkit.types import Key, Params

#: ``fold_in`` data of the model's randomness within the key of :func:`posterior_predictive`
#: (the draws of an approximation use the key itself, the linearised predictive 1).
MODEL_PASSES = 2


@dataclasses.dataclass(frozen=True)
class Prediction:
    """A BMA predictive on one input set, plus per-sample values for diagnostics.

    Attributes:
        task: ``"regression"`` or ``"classification"``.
        probs: (N, K) BMA class probabilities (classification).
        means, stds: (S, N) per-sample Gaussian means and stds in original units (regression).
        per_sample: (chains, samples, M[, K]) per-sample function values on the first M inputs
            (regression means, classification probabilities) for function-space diagnostics.
        expected_entropy: (N,) the draws' mean entropy ``(1/S) Σ_s H[p_s(· | x)]``
            (classification): the aleatoric part of the predictive entropy, whose difference
            from ``H[p̄]`` is the mutual information (:mod:`bnnkit.metrics.ood`).
    """

    task: str
    probs: np.ndarray | None = None
    means: np.ndarray | None = None
    stds: np.ndarray | None = None
    per_sample: np.ndarray | None = None
    expected_entropy: np.ndarray | None = None

    @property
    def mean(self) -> np.ndarray:
        """Point prediction: BMA mean (regression) or BMA probabilities (classification)."""
        return self.probs if self.task == "classification" else self.means.mean(axis=0)


def predict(
    problem,
    samples: Samples,
    x: np.ndarray,
    *,
    key: Key | None = None,
    test_chunk: int = 2048,
    max_diagnostic_points: int = 1000,
) -> Prediction:
    """BMA predictive of ``problem``'s model over ``samples`` at inputs ``x``.

    Memory stays bounded: inputs are processed ``test_chunk`` at a time and, for
    classification, only the running BMA plus the per-sample outputs on the first
    ``max_diagnostic_points`` inputs are kept.

    With a ``key`` and a stochastic model, the pass of draw s (counted chain-major) over
    chunk c of the inputs draws the model's randomness with ``fold_in(fold_in(key, s), c)``;
    otherwise ``key`` is not used.

    Example:
        >>> from bnnkit.problem import ProblemConfig, build
        >>> problem = build(ProblemConfig("yacht_0", "mlp_regression_small"))
        >>> keys = jax.random.split(jax.random.PRNGKey(0), 4)
        >>> samples = Samples.from_single_chain(jax.vmap(problem.init_params)(keys))
        >>> pred = predict(problem, samples, problem.dataset.x_test)
        >>> pred.means.shape, pred.mean.shape  # (S, N) per sample; (N,) the BMA mean
        ((4, 31), (31,))
    """
    flat = samples.flat()
    chains, per_chain = samples.num_chains, samples.num_samples
    likelihood = problem.likelihood
    classification = problem.dataset.task == "classification"
    passes = _passes(problem, flat, key, chains * per_chain)

    prob_chunks, mean_chunks, std_chunks, entropy_chunks = [], [], [], []
    for c, start in enumerate(range(0, len(x), test_chunk)):
        out = passes(problem.to_device(x[start : start + test_chunk]), c)  # (S, n, O)
        if classification:
            probs = jax.nn.softmax(out.astype(jnp.float32), axis=-1)
            logp = jax.nn.log_softmax(out.astype(jnp.float32), axis=-1)
            prob_chunks.append(np.asarray(probs.mean(axis=0)))
            entropy_chunks.append(np.asarray(-jnp.sum(probs * logp, axis=-1).mean(axis=0)))
            if start < max_diagnostic_points:
                mean_chunks.append(np.asarray(probs[:, : max_diagnostic_points - start]))
        else:
            if "noise" in flat:
                # An inferred noise std is part of each sample, not of the likelihood.
                mean, std = jax.vmap(
                    lambda noise, o: problem.likelihood_at({"noise": noise}).mean_std(o)
                )(flat["noise"], out)
            else:
                mean, std = likelihood.mean_std(out)
            mean_chunks.append(np.asarray(mean, np.float64))
            std_chunks.append(np.asarray(std, np.float64))

    def per_sample(values: np.ndarray) -> np.ndarray:
        values = values[:, :max_diagnostic_points]
        return values.reshape((chains, per_chain, *values.shape[1:]))

    if classification:
        return Prediction(
            task="classification",
            probs=np.concatenate(prob_chunks, axis=0),
            per_sample=per_sample(np.concatenate(mean_chunks, axis=1)),
            expected_entropy=np.concatenate(entropy_chunks, axis=0),
        )
    scale, shift = problem.dataset.target_scale, problem.dataset.target_shift
    means = np.concatenate(mean_chunks, axis=1) * scale + shift
    stds = np.concatenate(std_chunks, axis=1) * scale
    return Prediction(task="regression", means=means, stds=stds, per_sample=per_sample(means))


def _passes(problem, flat: Params, key: Key | None, num_draws: int) -> Callable:
    """``f(xb, c)``: every draw's network outputs (S, n, O) on chunk ``c`` of the inputs, ``xb``.

    With a ``key`` and a stochastic model, draw s makes its pass with the key
    ``fold_in(fold_in(key, s), c)``; otherwise every pass is deterministic.
    """

    @jax.jit
    def outputs(params, xb):
        return jax.lax.map(lambda p: problem.apply(p, xb), params)

    @jax.jit
    def random_outputs(params, keys, xb):  # one pass per draw, each with its own key
        return jax.lax.map(lambda pk: problem.apply(pk[0], xb, key=pk[1]), (params, keys))

    draw_keys = None
    if key is not None and problem.log_posterior.stochastic:
        draw_keys = jax.vmap(lambda s: jax.random.fold_in(key, s))(jnp.arange(num_draws))

    def passes(xb: jax.Array, c: int) -> jax.Array:
        if draw_keys is None:
            return outputs(flat, xb)
        return random_outputs(
            flat, jax.vmap(lambda k, c=c: jax.random.fold_in(k, c))(draw_keys), xb
        )

    return passes


#: Smallest probability a draw's log density is taken of (as the categorical NLL clips).
_MIN_PROB = 1e-12


def draw_log_density(prediction: Prediction, y: np.ndarray) -> np.ndarray:
    """``log p(y_i | x_i, θ_s)`` of every draw s at every test point i, per chain.

    Regression: the Gaussian log density of each draw's mean and std (original units) at the
    target, on every point; classification: the log probability of the label, on the first M
    points whose per-draw probabilities the prediction keeps (clipped at 1e-12, as the NLL is).
    What the test LPD of each draw, a slow functional the verdict checks for drift, is made of
    (:func:`bnnkit.metrics.levels.functionals`).

    Args:
        prediction: a model average over Markov chains (:func:`predict`).
        y: the targets (original units) or labels of the inputs it was made at.

    Returns:
        (chains, samples, points).

    Example:
        >>> pred = Prediction("regression", means=np.zeros((2, 3)), stds=np.ones((2, 3)),
        ...                   per_sample=np.zeros((1, 2, 3)))
        >>> draw_log_density(pred, np.zeros(3)).shape, round(float(
        ...     draw_log_density(pred, np.zeros(3))[0, 0, 0]), 4)  # log N(0 | 0, 1)
        ((1, 2, 3), -0.9189)
    """
    chains, samples = prediction.per_sample.shape[:2]
    if prediction.task == "classification":
        probs = np.asarray(prediction.per_sample, np.float64)
        labels = np.asarray(y)[: probs.shape[2]].astype(int)
        picked = np.take_along_axis(probs, labels[None, None, :, None], axis=-1)[..., 0]
        return np.log(np.clip(picked, _MIN_PROB, None))
    mean = np.asarray(prediction.means, np.float64)
    std = np.asarray(prediction.stds, np.float64)
    z = (np.asarray(y, np.float64)[None] - mean) / std
    log_density = -0.5 * z**2 - np.log(std) - 0.5 * math.log(2 * math.pi)
    return log_density.reshape(chains, samples, -1)


def output_covariance_fn(posterior, apply):
    """``x -> (outputs, J Λ⁻¹ Jᵀ)`` of the linearised network at θ*, jitted."""
    mean = network_variables(posterior.mean)
    dtype = jax.tree.leaves(mean)[0].dtype
    if isinstance(posterior, DiagLaplace):
        fn = jax.jit(lambda m, v, x: cov.diag_output_covariance(apply, m, x, v))
        variance = network_variables(posterior.variance())
        return lambda x: fn(mean, variance, x)
    if isinstance(posterior, LastLayerLaplace):
        path = posterior.path
        fn = jax.jit(lambda m, s, x: cov.block_output_covariance(apply, m, x, path, s))
        sqrt_cov = posterior.sqrt_cov.astype(dtype)
        return lambda x: fn(mean, sqrt_cov, x)
    if isinstance(posterior, KFACLaplace):
        fn = jax.jit(lambda m, layers, x: cov.kfac_output_covariance(apply, m, x, layers))
        layers = jax.tree.map(lambda a: jnp.asarray(a, dtype), posterior.layers)
        return lambda x: fn(mean, layers, x)
    raise TypeError(f"no linearised predictive for {type(posterior).__name__}")


def glm_predict(
    problem,
    posterior,
    x: np.ndarray,
    *,
    key: Key | None = None,
    num_samples: int | None = None,
    test_chunk: int = 1024,
    max_diagnostic_points: int = 1000,
) -> Prediction:
    """The linearised (GLM) predictive of a Laplace ``posterior`` at inputs ``x``.

    Returns:
        A :class:`Prediction`: for regression one Gaussian per input (``means``/``stds`` of
        shape (1, N), original units); for classification the probit probabilities.
        ``per_sample`` holds ``num_samples`` (default: the posterior's ``num_draws``) draws of
        the linearised outputs on the first ``max_diagnostic_points`` inputs, for
        function-space diagnostics.

    Example:
        >>> from bnnkit.problem import ProblemConfig, build
        >>> problem = build(ProblemConfig("yacht_0", "mlp_regression_small", noise_std=0.35))
        >>> theta = problem.init_params(jax.random.PRNGKey(0))
        >>> precision = jax.tree.map(lambda p: jnp.full_like(p, 100.0), theta)
        >>> pred = glm_predict(problem, DiagLaplace(theta, precision, num_draws=8),
        ...                    problem.dataset.x_test)
        >>> noise = 0.35 * problem.dataset.target_scale  # σ in the units of the targets
        >>> pred.means.shape, bool((pred.stds > noise).all())  # stds: √(J Λ⁻¹ Jᵀ + σ²) > σ
        ((1, 31), True)
    """
    key = jax.random.PRNGKey(0) if key is None else key
    num_samples = posterior.num_draws if num_samples is None else num_samples
    covariance = output_covariance_fn(posterior, problem.log_posterior.apply)
    outs, covs = [], []
    for start in range(0, len(x), test_chunk):
        out, cov = covariance(problem.to_device(x[start : start + test_chunk]))
        outs.append(np.asarray(out, np.float64))
        covs.append(np.asarray(cov, np.float64))
    out, cov = np.concatenate(outs), np.concatenate(covs)
    cov = 0.5 * (cov + np.swapaxes(cov, 1, 2))
    m = min(len(x), max_diagnostic_points)
    classification = problem.dataset.task == "classification"
    # Classification draws every input (their entropies); regression only the first m.
    drawn = len(x) if classification else m
    w, v = np.linalg.eigh(cov[:drawn])
    k = out.shape[-1]
    z = np.asarray(jax.random.normal(key, (num_samples, m, k)), np.float64)
    if drawn > m:  # the first m as without the rest, so diagnostics keep their draws
        rest = jax.random.normal(jax.random.fold_in(key, 1), (num_samples, drawn - m, k))
        z = np.concatenate([z, np.asarray(rest, np.float64)], axis=1)
    draws = out[None, :drawn] + np.einsum("nij,nj,snj->sni", v, np.sqrt(np.clip(w, 0, None)), z)
    if classification:
        kappa = 1.0 / np.sqrt(1.0 + math.pi / 8.0 * np.diagonal(cov, axis1=1, axis2=2))
        probs = np.asarray(jax.nn.softmax(jnp.asarray(out * kappa), axis=-1), np.float64)
        logp = np.asarray(jax.nn.log_softmax(jnp.asarray(draws), axis=-1), np.float64)
        sample_probs = np.exp(logp)
        expected_entropy = -np.sum(sample_probs * logp, axis=-1).mean(axis=0)
        return Prediction(
            task="classification",
            probs=probs,
            per_sample=sample_probs[None, :, :m],
            expected_entropy=expected_entropy,
        )
    # An inferred noise std is taken at θ*; the linearisation covers the network's outputs.
    likelihood = problem.log_posterior.likelihood_for(posterior.mean)
    mean, noise = (np.asarray(a, np.float64) for a in likelihood.mean_std(jnp.asarray(out)))
    std = np.sqrt(np.clip(cov[:, 0, 0], 0, None) + noise**2)
    scale, shift = problem.dataset.target_scale, problem.dataset.target_shift
    per_sample = draws[..., 0] * scale + shift
    return Prediction(
        task="regression",
        means=(mean * scale + shift)[None],
        stds=(std * scale)[None],
        per_sample=per_sample[None],
    )


def posterior_predictive(problem, posterior, x: np.ndarray, key: Key) -> Prediction:
    """The predictive a posterior stands for at ``x``: the linearised one for a Laplace
    approximation built with ``predictive="glm"`` (of the deterministic network), otherwise
    the model average over its draws (its samples, or ``posterior.draws(key)``), with one pass
    of a stochastic model's randomness per draw (``fold_in(key, MODEL_PASSES)``)."""
    if getattr(posterior, "predictive", "mc") == "glm":
        return glm_predict(problem, posterior, x, key=jax.random.fold_in(key, 1))
    return predict(problem, posterior.draws(key), x, key=jax.random.fold_in(key, MODEL_PASSES))
