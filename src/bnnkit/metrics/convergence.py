"""A convergence verdict a user can act on, from function-space diagnostics of Markov chains.

Weights of a BNN are not identifiable (hidden-unit permutations and sign flips), so the verdict
looks at the predictions on test inputs, as Izmailov et al. (2021) do. A run has converged when

- split R-hat (Vehtari et al. 2021) is below ``RHAT_THRESHOLD`` on at least ``RHAT_SHARE`` of
  the test predictions: the chains (and both halves of each) agree;
- the smallest function-space ESS is at least ``MIN_ESS`` (Vehtari et al. recommend about 100
  per chain before trusting R-hat and Monte Carlo errors; 100 in all is the least that makes
  the Monte Carlo error of an average a tenth of its posterior spread);
- the sampler is not stuck: acceptance after burn-in at least ``MIN_ACCEPTANCE`` and
  divergences at most ``MAX_DIVERGENT_SHARE`` of the kept iterations;
- the run finished.

Each failed check comes with what to do about it.

Example:
    >>> import numpy as np
    >>> draws = np.random.default_rng(0).normal(size=(4, 500, 20))  # independent, mixed
    >>> v = verdict(draws)
    >>> v["converged"], v["problems"]
    (True, [])
    >>> v = verdict(draws + np.arange(4)[:, None, None])  # every chain somewhere else
    >>> v["converged"], v["advice"][0][:24]
    (False, 'run more iterations (--r')
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bnnkit.metrics import diagnostics

#: Split R-hat below this counts as agreement between chains (Vehtari et al. 2021 use 1.01 for
#: final results; BNN predictions rarely reach it, and the paper reports ~1.05-1.1).
RHAT_THRESHOLD = 1.05
#: Share of test predictions that must be below the threshold.
RHAT_SHARE = 0.95
#: Smallest acceptable function-space ESS (all chains together).
MIN_ESS = 100.0
#: A chain whose acceptance rate after burn-in is below this is stuck.
MIN_ACCEPTANCE = 0.05
#: Divergences above this share of the kept iterations mean the step size is unstable.
MAX_DIVERGENT_SHARE = 0.10


#: What to do about a stuck or unstable sampler.
STUCK_ADVICE = ("use a smaller --step-size, a longer --num-burn-in so the step size adapts, or "
                "--adapt mass")


def sampler_warning(acceptance_rate: float, num_divergent: int,
                    num_transitions: int) -> str | None:
    """A warning naming the numbers when a sampler is stuck or unstable after burn-in.

    The thresholds are the verdict's (:data:`MIN_ACCEPTANCE`, :data:`MAX_DIVERGENT_SHARE`), so a
    run warned about during sampling is one whose verdict will fail.

    Args:
        acceptance_rate: mean acceptance after burn-in.
        num_divergent: divergent transitions after burn-in, all chains together.
        num_transitions: transitions after burn-in, all chains together.

    Returns:
        One sentence with the advice, or ``None`` when the sampler looks healthy.

    Example:
        >>> warning = sampler_warning(0.0, 70, 360)
        >>> warning.split(";")[:2]
        ['the chains look stuck: acceptance 0.00 after burn-in (below 0.05)', \
' 70 divergences in 360 transitions (19%, above 10%)']
        >>> warning.endswith("or --adapt mass")
        True
        >>> sampler_warning(0.85, 1, 360) is None
        True
    """
    problems = []
    if acceptance_rate < MIN_ACCEPTANCE:
        problems.append(f"acceptance {acceptance_rate:.2f} after burn-in (below "
                        f"{MIN_ACCEPTANCE})")
    if num_transitions and num_divergent > MAX_DIVERGENT_SHARE * num_transitions:
        problems.append(f"{num_divergent} divergences in {num_transitions} transitions "
                        f"({num_divergent / num_transitions:.0%}, above "
                        f"{MAX_DIVERGENT_SHARE:.0%})")
    if not problems:
        return None
    what = "stuck" if acceptance_rate < MIN_ACCEPTANCE else "unstable"
    return f"the chains look {what}: {'; '.join(problems)}; {STUCK_ADVICE}"


def verdict(function_draws: np.ndarray, *, acceptance_rate: float | None = None,
            num_divergent: int | None = None, finished: bool = True) -> dict[str, Any]:
    """Whether a run's chains have converged in function space, and what to do if not.

    Args:
        function_draws: predictions on test inputs, shaped (chains, samples, ...), at least 4
            samples per chain.
        acceptance_rate: mean acceptance after burn-in (samplers that have one).
        num_divergent: divergent transitions after burn-in, all chains together.
        finished: whether the run ran all its iterations.

    Returns:
        ``{"converged", "problems", "advice", "criteria", "rhat_share_below",
        "ess_min"}``: JSON-serialisable; ``problems`` and ``advice`` are sentences.
    """
    draws = np.asarray(function_draws, np.float64)
    chains, samples = draws.shape[:2]
    draws = draws.reshape((chains, samples, -1))
    rhat = diagnostics.split_rhat(draws)
    ess = diagnostics.ess(draws)
    # Constant predictions (saturated probabilities) have no R-hat or ESS: they cannot disagree.
    defined = np.isfinite(rhat)
    share = float(np.mean(rhat[defined] < RHAT_THRESHOLD)) if defined.any() else 1.0
    ess_min = float(np.min(ess[np.isfinite(ess)])) if np.isfinite(ess).any() else float("nan")
    problems: list[str] = []
    advice: list[str] = []
    if not finished:
        problems.append("the run is unfinished (interrupted or still running)")
        advice.append("finish it with the same command and --resume")
    stuck = acceptance_rate is not None and acceptance_rate < MIN_ACCEPTANCE
    unstable = (num_divergent is not None
                and num_divergent > MAX_DIVERGENT_SHARE * chains * samples)
    if stuck:
        problems.append(f"acceptance after burn-in is {acceptance_rate:.3f} < "
                        f"{MIN_ACCEPTANCE}: the chains are stuck")
    if unstable:
        problems.append(f"{num_divergent} divergences in {chains * samples} kept iterations "
                        f"(> {MAX_DIVERGENT_SHARE:.0%})")
    if stuck or unstable:
        advice.append(STUCK_ADVICE)
    if share < RHAT_SHARE:
        problems.append(f"split R-hat < {RHAT_THRESHOLD} on only {share:.0%} of test "
                        f"predictions (needs {RHAT_SHARE:.0%})")
        advice.append("run more iterations (--resume with a larger --num-iterations) so the "
                      "chains can meet, or a longer burn-in")
    if not ess_min >= MIN_ESS:
        problems.append(f"function-space ESS is {ess_min:.0f} at its smallest (needs "
                        f"{MIN_ESS:.0f})")
        advice.append("keep more samples: more iterations, or more chains (--num-chains)")
    if chains < 2:
        problems.append("one chain cannot show that independent chains agree")
        advice.append("run at least 2 chains (4 is usual)")
    return {
        "converged": not problems,
        "problems": problems,
        "advice": list(dict.fromkeys(advice)),
        "criteria": {"rhat_threshold": RHAT_THRESHOLD, "rhat_share": RHAT_SHARE,
                     "min_ess": MIN_ESS, "min_acceptance": MIN_ACCEPTANCE,
                     "max_divergent_share": MAX_DIVERGENT_SHARE},
        "rhat_share_below": share,
        "ess_min": ess_min,
    }
