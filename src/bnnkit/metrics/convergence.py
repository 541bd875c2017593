"""A convergence verdict a user can act on, from function-space diagnostics of Markov chains.

Weights of a BNN are not identifiable (hidden-unit permutations and sign flips), so the verdict
looks at the predictions on test inputs, as Izmailov et al. (2021) do. A run has converged when

- split R-hat (:func:`bnnkit.metrics.diagnostics.split_rhat`) is below ``RHAT_THRESHOLD`` on at
  least ``RHAT_SHARE`` of the test predictions: the chains (and both halves of each) agree;
- the smallest function-space bulk ESS (:func:`bnnkit.metrics.diagnostics.ess`) is at least
  ``MIN_ESS`` (Vehtari et al. 2021 recommend about 100 per chain before trusting R-hat and
  Monte Carlo errors; 100 in all is the least that makes the Monte Carlo error of an average a
  tenth of its posterior spread);
- the sampler is not stuck: acceptance after burn-in at least ``MIN_ACCEPTANCE`` and
  divergences at most ``MAX_DIVERGENT_SHARE`` of the kept iterations;
- no chain's log posterior is still rising while its samples are kept (:func:`rising_chains`):
  a chain that climbs has not reached the typical set when burn-in ends;
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

from bnnkit.metrics import diagnostics, mcmc

#: Split R-hat below this counts as agreement between chains (Vehtari et al. 2021 use 1.01 for
#: final results; BNN predictions rarely reach it, and the paper reports ~1.05-1.1).
RHAT_THRESHOLD = 1.05
#: Share of test predictions that must be below the threshold.
RHAT_SHARE = 0.95
#: Smallest acceptable function-space bulk ESS (all chains together).
MIN_ESS = 100.0
#: A chain whose acceptance rate after burn-in is below this is stuck.
MIN_ACCEPTANCE = 0.05
#: Divergences above this share of the kept iterations mean the step size is unstable.
MAX_DIVERGENT_SHARE = 0.10


#: A kept half's mean log posterior this many standard errors above the first half's means the
#: chain is still climbing. Under stationarity a one-sided excess of 4 standard errors has
#: probability about 3e-5 per chain, so the check practically never fires on a chain that has
#: settled; the standard errors come from each half's ESS, which a trend shrinks, so a trend
#: makes the check conservative rather than trigger-happy.
RISE_Z = 4.0

#: What to do about chains still climbing after burn-in.
RISING_ADVICE = ("run a longer --num-burn-in, or start the chains near the posterior's modes: "
                 "train an ensemble (bnnkit ensemble) and pass its run to --init-checkpoint")

#: What to do about a stuck or unstable sampler (when the step size it ran at is unknown).
STUCK_ADVICE = ("use a smaller --step-size, a longer --num-burn-in so the step size adapts, or "
                "--adapt mass")
#: An adapted step size this many times the given one counts as raised by burn-in.
RAISED = 1.5


def stuck_advice(step_size: float | None = None, given_step_size: float | None = None,
                 burn_in: int | None = None) -> str:
    """What to do about a stuck or unstable sampler, following the step size it ran at.

    When burn-in raised the step size above the given ``--step-size`` (dual averaging on a
    short burn-in can overshoot), a smaller ``--step-size`` would change nothing: the advice
    is then a longer burn-in, a higher target acceptance, or keeping the given step size.

    Args:
        step_size: the step size the chains ran at after burn-in (their mean).
        given_step_size: the ``--step-size`` the run was given.
        burn_in: the burn-in iterations the adaptation had.

    Example:
        >>> stuck_advice(1.4e-4, 1e-5, 10)[:66]
        'burn-in raised the step size to 0.00014 (from --step-size 1e-05), '
        >>> stuck_advice(1e-5, 1e-5).startswith("use a smaller --step-size (the chains ran at")
        True
    """
    if step_size is None:
        return STUCK_ADVICE
    if given_step_size is not None and step_size > RAISED * given_step_size:
        longer = f" (it had {burn_in} iterations)" if burn_in is not None else ""
        return (f"burn-in raised the step size to {step_size:.2g} (from --step-size "
                f"{given_step_size:.2g}), too large for the chains after it: a longer "
                f"--num-burn-in{longer} lets the adaptation settle, a higher "
                "--target-accept-rate makes it choose a smaller step, or --adapt none keeps "
                "--step-size as given")
    return (f"use a smaller --step-size (the chains ran at {step_size:.2g}), a longer "
            "--num-burn-in so the step size adapts, or --adapt mass")


def sampler_warning(acceptance_rate: float, num_divergent: int,
                    num_transitions: int, *, step_size: float | None = None,
                    given_step_size: float | None = None,
                    burn_in: int | None = None) -> str | None:
    """A warning naming the numbers when a sampler is stuck or unstable after burn-in.

    The thresholds are the verdict's (:data:`MIN_ACCEPTANCE`, :data:`MAX_DIVERGENT_SHARE`), so a
    run warned about during sampling is one whose verdict will fail.

    Args:
        acceptance_rate: mean acceptance after burn-in.
        num_divergent: divergent transitions after burn-in, all chains together.
        num_transitions: transitions after burn-in, all chains together.
        step_size: the step size the chains ran at after burn-in (the advice follows it,
            :func:`stuck_advice`).
        given_step_size: the step size the run was given.
        burn_in: the run's burn-in iterations.

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
    advice = stuck_advice(step_size, given_step_size, burn_in)
    return f"the chains look {what}: {'; '.join(problems)}; {advice}"


#: What to do about trajectories cut short by the cap on their length, per sampler.
CAPPED_ADVICE = {
    "hmc": "raise --max-num-leapfrog-steps (the tuning asked for longer trajectories), or "
           "standardise badly scaled or strongly correlated parameters",
    "nuts": "raise --max-tree-depth, or standardise badly scaled or strongly correlated "
            "parameters",
}


def capped_warning(num_capped: int, num_transitions: int,
                   method: str | None = None) -> str | None:
    """A sentence naming the share of iterations after burn-in whose trajectory hit the cap on
    its length (HMC's ``max_num_leapfrog_steps``, NUTS's ``max_tree_depth``), with the advice
    that applies.

    A capped trajectory is still a valid transition (the cap is fixed), so this is no
    convergence failure: the chains mix more slowly than the tuning asked for and every capped
    iteration costs the cap's gradients, which is where such a run's time goes.

    Args:
        num_capped: capped iterations after burn-in, all chains together.
        num_transitions: iterations after burn-in, all chains together.
        method: ``"hmc"`` or ``"nuts"``, whose advice applies (``None``: HMC's).

    Returns:
        The sentence, or ``None`` when no trajectory was capped.

    Example:
        >>> capped_warning(970, 1000, "hmc")[:72]
        '970 of 1000 iterations after burn-in (97%) hit the cap on trajectory len'
        >>> capped_warning(0, 1000, "hmc") is None
        True
    """
    if not num_capped or not num_transitions:
        return None
    advice = CAPPED_ADVICE.get(str(method), CAPPED_ADVICE["hmc"])
    return (f"{num_capped} of {num_transitions} iterations after burn-in "
            f"({num_capped / num_transitions:.0%}) hit the cap on trajectory length: they were "
            f"cut short, so the chains mix more slowly than tuned; {advice}")


def rising_chains(log_posterior: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""Which chains' log posterior still rises over the kept iterations.

    Each chain's kept trace is cut in halves ``a`` and ``b``; the rise ``b̄ − ā`` is compared
    with its Monte Carlo standard error

    .. math:: \mathrm{se} = \sqrt{\operatorname{Var}(a)/\mathrm{ESS}(a)
              + \operatorname{Var}(b)/\mathrm{ESS}(b)},

    and a chain rises when ``b̄ − ā > RISE_Z · se``. ESS is the ESS of a half's mean on its own
    (:func:`bnnkit.metrics.mcmc.ess_mean`, not split), at most the half's length.

    Args:
        log_posterior: the log posterior of each kept iteration, shaped (chains, samples),
            at least 8 samples per chain.

    Returns:
        ``(rising, z)``: per chain, whether it rises and its rise in standard errors.

    Example:
        >>> import numpy as np
        >>> rng = np.random.default_rng(0)
        >>> settled = rng.normal(size=(2, 200))
        >>> climbing = settled + np.linspace(0.0, 10.0, 200)  # still rising by 10 nats
        >>> rising_chains(np.concatenate([settled, climbing]))[0].tolist()
        [False, False, True, True]
    """
    trace = np.asarray(log_posterior, np.float64)
    half = trace.shape[1] // 2
    a, b = trace[:, :half], trace[:, trace.shape[1] - half:]

    def mean_var(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        # The ESS of each half's mean on its own (every chain one quantity of a single chain),
        # not split: a drift within the half would count as disagreement between its halves
        # and hide the very rise this checks for.
        ess = mcmc.ess_mean(x.T[None], split=False)
        ess = np.where(np.isfinite(ess), np.clip(ess, 1.0, x.shape[1]), 1.0)
        return x.mean(axis=1), x.var(axis=1, ddof=1) / ess

    (mean_a, var_a), (mean_b, var_b) = mean_var(a), mean_var(b)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = (mean_b - mean_a) / np.sqrt(var_a + var_b)
    z = np.where(np.isfinite(z), z, 0.0)  # a constant trace (a stuck chain) does not rise
    return z > RISE_Z, z


def verdict(function_draws: np.ndarray, *, acceptance_rate: float | None = None,
            num_divergent: int | None = None, finished: bool = True,
            log_posterior: np.ndarray | None = None, step_size: float | None = None,
            given_step_size: float | None = None,
            burn_in: int | None = None) -> dict[str, Any]:
    """Whether a run's chains have converged in function space, and what to do if not.

    Args:
        function_draws: predictions on test inputs, shaped (chains, samples, ...), at least 4
            samples per chain.
        acceptance_rate: mean acceptance after burn-in (samplers that have one).
        num_divergent: divergent transitions after burn-in, all chains together.
        finished: whether the run ran all its iterations.
        log_posterior: the log posterior of each kept iteration, (chains, samples), to check
            that no chain is still climbing (skipped with fewer than 8 per chain).
        step_size: the step size the chains ran at after burn-in (the advice for a stuck
            sampler follows it, :func:`stuck_advice`).
        given_step_size: the step size the run was given.
        burn_in: the run's burn-in iterations.

    Returns:
        ``{"converged", "problems", "advice", "criteria", "rhat_share_below", "ess_min",
        "rising_chains"}``: JSON-serialisable; ``problems`` and ``advice`` are sentences;
        ``rising_chains`` is ``None`` when no log posterior was given.
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
        advice.append(stuck_advice(step_size, given_step_size, burn_in))
    rising = None
    if log_posterior is not None and np.shape(log_posterior)[1] >= 8:
        up, z = rising_chains(log_posterior)
        rising = int(up.sum())
        if rising:
            trace = np.asarray(log_posterior, np.float64)
            half = trace.shape[1] // 2
            climb = trace[:, trace.shape[1] - half:].mean(1) - trace[:, :half].mean(1)
            problems.append(
                f"the log posterior was still rising in {rising} of {len(up)} chains while "
                f"samples were kept (by up to {float(climb[up].max()):.3g} from the first to the "
                f"second half, {float(z[up].max()):.0f} standard errors): burn-in ended before "
                "they reached the typical set")
            advice.append(RISING_ADVICE)
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
                     "max_divergent_share": MAX_DIVERGENT_SHARE, "rise_z": RISE_Z},
        "rhat_share_below": share,
        "ess_min": ess_min,
        "rising_chains": rising,
    }
