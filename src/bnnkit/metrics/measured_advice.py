"""Advice that was followed and measured: which changes a verdict does not print, and what it
says instead.

A level's remedies (:class:`bnnkit.metrics.findings.Remedy`) name the changes of the run's
settings that would help it pass. Each change a default ``bnnkit reference`` printed on the
standard UCI splits was followed on its own, as a user would, within four times the
reference's wall time (``benchmarks/advice_followed.py``; the tables in
``benchmarks/results/xeon/advice_followed*.md`` and docs/uci-benchmark.md, "Advice followed").
A change after which the level that printed it passed on fewer than half of the splits where
that level printed it is in :data:`UNHELPFUL` for that level and that kind of run, and a
verdict of such a run leaves it out there (:func:`unhelpful`). A remedy left with no
change is not printed; where no remedy is left for a failed level, the verdict says what was
measured instead (:data:`NOTHING_MEASURED_HELPS`).

Example:
    >>> unhelpful("reference", learned_noise=True)["L0"][0]
    ('sampler', 'nuts')
    >>> unhelpful("reference", learned_noise=False), unhelpful("hmc", learned_noise=True)
    ({}, {})
"""

from __future__ import annotations

#: The changes measured not to help, by (command, whether the network learns its noise std),
#: then by the level that prints them: the default reference's runs on the UCI splits
#: (benchmarks/results/xeon/advice_followed.md for L0 and L1; for L2, the splits whose default
#: failed it at the default prior, advice_followed_precision3.md, where twice the members
#: made it pass on every split and twice the draws on one of three).
UNHELPFUL: dict[tuple[str, bool], dict[str, tuple[tuple[str, str], ...]]] = {
    ("reference", True): {
        "L0": (("sampler", "nuts"), ("num_tuning", "longer")),
        "L1": (("num_tuning", "longer"), ("num_samples", "larger")),
        "L2": (("num_samples", "larger"),),
    },
}

#: What a verdict says where every remedy of a failed level was measured not to help.
NOTHING_MEASURED_HELPS = (
    "no change measured reaches certified for a network that learns its noise std "
    "(each printed change followed on the UCI splits: benchmarks/results/xeon/"
    "advice_followed.md); certified is reached where the noise std is fixed"
)


def unhelpful(
    command: str | None, *, learned_noise: bool
) -> dict[str, tuple[tuple[str, str], ...]]:
    """By level, the changes a verdict of a run of ``command`` leaves out (``{}``: none
    measured).

    Args:
        command: the command that made the run (``None``: a Python call's, none measured).
        learned_noise: whether the network outputs its noise std (a Gaussian likelihood with
            no fixed ``noise_std``).
    """
    return dict(UNHELPFUL.get((command or "", learned_noise), {}))
