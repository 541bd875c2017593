"""Bayesian model average (BMA) of predictive distributions over posterior samples.

Classification: ``p(y | x, D) ≈ (1/S) Σ_s softmax(f(x; θ_s))``.
Regression: the equal-weight mixture ``(1/S) Σ_s N(y | μ(x; θ_s), σ(x; θ_s)²)``, reported in the
original units of the targets (the dataset's standardisation is undone); an inferred noise std
σ₀ is each sample's own.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from bnnkit.posterior import Samples

Params = Any


@dataclasses.dataclass(frozen=True)
class Prediction:
    """A BMA predictive on one input set, plus per-sample values for diagnostics.

    Attributes:
        task: ``"regression"`` or ``"classification"``.
        probs: (N, K) BMA class probabilities (classification).
        means, stds: (S, N) per-sample Gaussian means and stds in original units (regression).
        per_sample: (chains, samples, M[, K]) per-sample function values on the first M inputs
            (regression means, classification probabilities) for function-space diagnostics.
    """

    task: str
    probs: np.ndarray | None = None
    means: np.ndarray | None = None
    stds: np.ndarray | None = None
    per_sample: np.ndarray | None = None

    @property
    def mean(self) -> np.ndarray:
        """Point prediction: BMA mean (regression) or BMA probabilities (classification)."""
        return self.probs if self.task == "classification" else self.means.mean(axis=0)


def predict(
    problem,
    samples: Samples,
    x: np.ndarray,
    *,
    test_chunk: int = 2048,
    max_diagnostic_points: int = 1000,
) -> Prediction:
    """BMA predictive of ``problem``'s model over ``samples`` at inputs ``x``.

    Memory stays bounded: inputs are processed ``test_chunk`` at a time and, for
    classification, only the running BMA plus the per-sample outputs on the first
    ``max_diagnostic_points`` inputs are kept.

    Example:
        >>> pred = predict(problem, samples, problem.dataset.x_test)  # doctest: +SKIP
        >>> pred.mean.shape  # (N,) for regression, (N, K) for classification  # doctest: +SKIP
    """
    flat = samples.flat()
    chains, per_chain = samples.num_chains, samples.num_samples
    likelihood = problem.likelihood
    classification = problem.dataset.task == "classification"

    @jax.jit
    def outputs(params, xb):
        return jax.lax.map(lambda p: problem.apply(p, xb), params)

    prob_chunks, mean_chunks, std_chunks = [], [], []
    for start in range(0, len(x), test_chunk):
        out = outputs(flat, problem.to_device(x[start : start + test_chunk]))  # (S, n, O)
        if classification:
            probs = jax.nn.softmax(out.astype(jnp.float32), axis=-1)
            prob_chunks.append(np.asarray(probs.mean(axis=0)))
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
        )
    scale, shift = problem.dataset.target_scale, problem.dataset.target_shift
    means = np.concatenate(mean_chunks, axis=1) * scale + shift
    stds = np.concatenate(std_chunks, axis=1) * scale
    return Prediction(task="regression", means=means, stds=stds, per_sample=per_sample(means))
