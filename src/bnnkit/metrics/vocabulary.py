"""The words a convergence verdict speaks in: what it measures, and how it names settings.

The same checks judge a network's predictions on test inputs (``bnnkit evaluate``, function
space) and the parameters of any log density (:func:`bnnkit.sample`), and their advice goes to
someone at a command line (flags: ``--num-iterations``) or in Python (Config fields:
``num_iterations``). A :class:`Vocabulary` is both choices; the verdict builds every sentence
from it, so no sentence is rewritten after the fact.

Example:
    >>> FUNCTION_CLI.more_iterations()
    'run more iterations (--resume with a larger --num-iterations)'
    >>> PARAMETERS_PYTHON.more_iterations()
    'run more iterations (a larger num_iterations; resume=True continues a stored run)'
    >>> PARAMETERS_PYTHON.quantities, FUNCTION_CLI.ess
    ('parameters', 'function-space ESS')
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Settings:
    """How the verdict's advice names the settings a user can change.

    Attributes:
        num_iterations, num_burn_in, num_chains, step_size: the settings' names.
        adapt_mass: how to ask for the mass-matrix adaptation.
        target_accept_rate: the step-size adaptation's target acceptance.
        adapt_none: how to keep the given step size (no adaptation).
        resume: how to continue a stored run with more iterations (a phrase).
        finish: how to finish an unfinished run (a sentence).
        until_converged: how to let a run extend itself until each chain mixes (``None``: not
            offered to this caller).
        good_start: how to start chains near the posterior's modes.
    """

    num_iterations: str
    num_burn_in: str
    num_chains: str
    step_size: str
    adapt_mass: str
    target_accept_rate: str
    adapt_none: str
    resume: str
    finish: str
    until_converged: str | None
    good_start: str


#: Command-line flags.
FLAGS = Settings(
    num_iterations="--num-iterations", num_burn_in="--num-burn-in", num_chains="--num-chains",
    step_size="--step-size", adapt_mass="--adapt mass",
    target_accept_rate="--target-accept-rate", adapt_none="--adapt none",
    resume="--resume with a larger --num-iterations",
    finish="finish it with the same command and --resume",
    until_converged="--until-converged --max-time DURATION",
    good_start="train an ensemble (bnnkit ensemble) and pass its run to --init-checkpoint")

#: Config fields, for a caller in Python.
FIELDS = Settings(
    num_iterations="num_iterations", num_burn_in="num_burn_in", num_chains="num_chains",
    step_size="step_size", adapt_mass='adapt="mass"',
    target_accept_rate="target_accept_rate", adapt_none='adapt="none"',
    resume="a larger num_iterations; resume=True continues a stored run",
    finish="finish it: the same call with resume=True",
    until_converged=None,
    good_start="start the chains nearer the posterior's modes (initial_positions)")


@dataclasses.dataclass(frozen=True)
class Vocabulary:
    """What a verdict measures and how it names settings.

    Attributes:
        quantities: what the draws are, plural (``"test predictions"``, ``"parameters"``).
        ess: the name of their effective sample size (``"function-space ESS"``, ``"ESS"``).
        pooled: what pooling chains in several modes gives (ends the verdict's summary).
        settings: how the advice names the settings (:data:`FLAGS` or :data:`FIELDS`).
    """

    quantities: str
    ess: str
    pooled: str
    settings: Settings

    def more_iterations(self) -> str:
        """The advice to run longer, in this caller's words."""
        return f"run more iterations ({self.settings.resume})"

    def extend_until_mixed(self) -> str:
        """More iterations, and where offered the way to let the run extend itself."""
        offered = self.settings.until_converged
        extend = "" if offered is None else (f", or {offered} to extend the run until each "
                                             "chain mixes")
        return f"run more iterations ({self.settings.resume}{extend})"


#: What pooling chains in several modes gives a network's predictive: MILE's model average,
#: a valid reference for it.
_MODEL_AVERAGE = "the model average pools them, a valid reference for it"
#: What pooling chains in several modes gives a density's draws: each mode weighs as many
#: chains as sit in it, not its probability.
_POOLED_DRAWS = ("pooled, their draws weigh each mode by the chains in it, not by its "
                 "probability")

#: A network's predictions on test inputs, advice in flags (``bnnkit evaluate``).
FUNCTION_CLI = Vocabulary("test predictions", "function-space ESS", _MODEL_AVERAGE, FLAGS)
#: A network's predictions on test inputs, advice in Config fields.
FUNCTION_PYTHON = Vocabulary("test predictions", "function-space ESS", _MODEL_AVERAGE, FIELDS)
#: The parameters of a log density, advice in flags.
PARAMETERS_CLI = Vocabulary("parameters", "ESS", _POOLED_DRAWS, FLAGS)
#: The parameters of a log density, advice in Config fields (:func:`bnnkit.sample`).
PARAMETERS_PYTHON = Vocabulary("parameters", "ESS", _POOLED_DRAWS, FIELDS)
