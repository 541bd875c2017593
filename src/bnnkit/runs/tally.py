"""The sampler's acceptance, divergences and capped trajectories, counted as a run goes.

A stuck or unstable sampler should be named while it runs, not only when ``bnnkit evaluate``
reads the run back: the run driver (:mod:`bnnkit.runs.loop`) and :func:`bnnkit.runs.sample`
count every unit's log line in a :class:`SamplerTally`, whose status the progress bar shows,
whose warning is printed once there is enough to judge and given on the result, and whose
count of capped trajectories ``run.json`` keeps.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from bnnkit.command_flags import spelling
from bnnkit.inference.base import Loop
from bnnkit.metrics.sampler_health import capped_warning, sampler_warning


class SamplerTally:
    """Acceptance, divergences and capped trajectories of a run so far, burn-in and sampling
    counted apart.

    The progress status shows both (``burn-in div 21`` while burning in; ``div 0 (burn-in
    21)`` after), so it agrees with ``bnnkit evaluate``, which counts only what follows the
    burn-in. Methods that log no acceptance rate are not judged. A method that logs
    ``capped`` (HMC, NUTS: the trajectory hit the cap on its length) gets the share of capped
    iterations in the status once there are any, in the warning and in :meth:`record`.

    Example:
        >>> tally = SamplerTally(Loop("iterations", 20, num_members=2, burn_in=10))
        >>> for unit in range(20):
        ...     tally.add({"burn_in": unit < 10, "acceptance_rate": [0.0, 0.02],
        ...                "divergent": [True, False]})
        >>> tally.status({"burn_in": False, "acceptance_rate": [0.0, 0.02],
        ...               "divergent": [True, False]})
        'sampling | accept 0.01 | div 10 (burn-in 10)'
        >>> tally.warning()[:50]
        'the chains look stuck: acceptance 0.01 after burn-'
        >>> tally.news()[:21], tally.news()
        ('the chains look stuck', None)
    """

    def __init__(
        self,
        loop: Loop,
        method: str | None = None,
        spell: Callable[[str], str | None] | None = None,
        *,
        given_step_size: float | None = None,
    ):
        self.loop = loop
        self.method = method
        # How the warning names a setting (None: as the method's command spells it).
        self.spell = spelling(method) if spell is None else spell
        # The advice of a warning follows the step size the chains run at against this one.
        self.given_step_size = given_step_size
        self.step_size: float | None = None
        self.acceptance = 0.0
        self.sampled = 0
        self.divergent = 0
        self.burn_in_divergent = 0
        self.capped = 0
        self.burn_in_capped = 0
        self.burnt = 0
        self.logs_capped = False
        self.told = False

    def add(self, log: dict[str, Any]) -> None:
        if "acceptance_rate" not in log:
            return
        divergent = int(np.sum(log.get("divergent", 0)))
        # A run logged before trajectories reported their cap has no "capped": none counted.
        capped = int(np.sum(log.get("capped", 0)))
        self.logs_capped = self.logs_capped or "capped" in log
        if log.get("burn_in"):
            self.burn_in_divergent += divergent
            self.burn_in_capped += capped
            self.burnt += 1
            return
        self.sampled += 1
        self.acceptance += float(np.mean(log["acceptance_rate"]))
        self.divergent += divergent
        self.capped += capped
        if "step_size" in log:
            self.step_size = float(np.mean(log["step_size"]))

    def enough_to_judge(self) -> bool:
        """At least 10 sampling units, and a tenth of them, have run."""
        sampling = self.loop.num_units - self.loop.burn_in
        return self.sampled >= max(10, round(0.1 * sampling)) or (0 < sampling == self.sampled)

    def warning(self) -> str | None:
        """The stuck-or-unstable warning of the sampling so far (``None``: none)."""
        if not self.sampled:
            return None
        transitions = self.sampled * self.loop.num_members
        warnings = [
            sampler_warning(
                self.acceptance / self.sampled,
                self.divergent,
                transitions,
                step_size=self.step_size,
                given_step_size=self.given_step_size,
                spell=self.spell,
            ),
            capped_warning(self.capped, transitions, self.method, self.spell),
        ]
        return "; ".join(w for w in warnings if w is not None) or None

    def record(self) -> dict[str, Any]:
        """What ``run.json`` keeps of the tally: the capped iterations (all chains together)
        after and during burn-in, and their share, for a method that logs them (else
        nothing)."""
        if not self.logs_capped:
            return {}
        members = self.loop.num_members
        return {
            "capped": {
                "num_capped": self.capped,
                "share": self.capped / max(self.sampled * members, 1),
                "burn_in_capped": self.burn_in_capped,
                "burn_in_share": self.burn_in_capped / max(self.burnt * members, 1),
            }
        }

    def news(self) -> str | None:
        """The warning, the first time there is enough to judge and one to give (then
        ``None``): what a running loop shows once."""
        if self.told or not self.enough_to_judge():
            return None
        warning = self.warning()
        self.told = warning is not None
        return warning

    def status(self, log: dict[str, Any]) -> str:
        """The progress bar's status: phase and the quantities a method logs."""
        sampler = "acceptance_rate" in log
        parts = ["burn-in" if log.get("burn_in") else "sampling"] if sampler else []
        if sampler:
            parts.append(f"accept {np.mean(log['acceptance_rate']):.2f}")
        if "step_size" in log:
            parts.append(f"step {np.mean(log['step_size']):.2e}")
        if "num_leapfrog" in log:
            parts.append(f"L {int(np.max(log['num_leapfrog']))}")
        for key, label in (("log_posterior", "log post"), ("elbo", "elbo")):
            if key in log:
                parts.append(f"{label} {np.mean(log[key]):.4g}")
        if sampler and "divergent" in log:
            if log.get("burn_in"):
                parts.append(f"burn-in div {self.burn_in_divergent}")
            else:
                parts.append(f"div {self.divergent} (burn-in {self.burn_in_divergent})")
        if sampler and self.capped + self.burn_in_capped:
            members = self.loop.num_members
            if log.get("burn_in"):
                parts.append(f"burn-in capped {self.burn_in_capped / (self.burnt * members):.0%}")
            else:
                parts.append(f"capped {self.capped / max(self.sampled * members, 1):.0%}")
        for key, value in log.get("test", {}).items():
            if key != "ece":
                parts.append(f"test {key} {value:.4g}")
        return " | ".join(parts)
