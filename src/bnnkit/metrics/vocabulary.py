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
import functools
import json


@dataclasses.dataclass(frozen=True)
class Settings:
    """How the verdict's advice names the settings a user can change.

    A field that is ``None`` is a setting the caller cannot change (a command without that
    flag): the advice then leaves it out rather than name something that is refused.

    Attributes:
        num_iterations, num_burn_in, num_chains, step_size: the settings' names.
        adapt_mass: how to ask for the mass-matrix adaptation.
        target_accept_rate: the step-size adaptation's target acceptance.
        adapt_none: how to keep the given step size (no adaptation).
        resume: how to continue a stored run with more iterations (a phrase).
        finish: how to finish an unfinished run (a sentence).
        until_converged: how to let a run extend itself until each chain mixes.
        good_start: how to start chains near the posterior's modes.
        posterior_change: what changes the posterior itself (noise, prior, model): what helps
            a chain that more iterations do not make mix.
        budget_unit: what the budget counts (``"iterations"``, ``"epochs"``, ``"draws"``).
    """

    num_iterations: str | None
    num_burn_in: str | None
    num_chains: str | None
    step_size: str | None
    adapt_mass: str | None
    target_accept_rate: str | None
    adapt_none: str | None
    resume: str | None
    finish: str
    until_converged: str | None
    good_start: str | None
    posterior_change: str | None = None
    budget_unit: str = "iterations"


#: A duration the advice gives ``--max-time`` (the docs' example).
ADVICE_DURATION = "2h"
#: The noise std the advice offers for a network that learns its own: on standardised targets
#: it is what made chains mix where a learned one did not (docs/concepts/reference.md).
ADVICE_NOISE_STD = 0.35
#: A tighter prior than N(0, 1) the advice offers, in ``--prior``'s syntax.
ADVICE_PRIOR = "gaussian:scale=0.5"

#: Command-line flags.
FLAGS = Settings(
    num_iterations="--num-iterations",
    num_burn_in="--num-burn-in",
    num_chains="--num-chains",
    step_size="--step-size",
    adapt_mass="--adapt mass",
    target_accept_rate="--target-accept-rate",
    adapt_none="--adapt none",
    resume="--resume with a larger --num-iterations",
    finish="finish it with the same command and --resume",
    until_converged=f"--until-converged --max-time {ADVICE_DURATION}",
    good_start="train an ensemble (bnnkit ensemble) and pass its run as --init-checkpoint DIR",
    posterior_change=(
        f"a fixed noise std (--noise-std {ADVICE_NOISE_STD} on standardised "
        f"targets), a tighter prior (--prior {ADVICE_PRIOR}), or another model "
        "(--model)"
    ),
)

#: Config fields, for a caller in Python.
FIELDS = Settings(
    num_iterations="num_iterations",
    num_burn_in="num_burn_in",
    num_chains="num_chains",
    step_size="step_size",
    adapt_mass='adapt="mass"',
    target_accept_rate="target_accept_rate",
    adapt_none='adapt="none"',
    resume="a larger num_iterations; resume=True continues a stored run",
    finish="finish it: the same call with resume=True",
    until_converged=None,
    good_start="start the chains nearer the posterior's modes (initial_positions)",
    posterior_change="another log density: its prior, its likelihood or its parametrisation",
)

#: For each setting the advice names, the flags that may spell it, in order: a command's
#: advice uses the first its parser takes (``--num-samples`` and ``--num-tuning`` are
#: ``bnnkit reference``'s budget, ``--num-epochs`` the minibatch methods').
CANDIDATES: dict[str, tuple[str, ...]] = {
    "budget": ("--num-iterations", "--num-epochs", "--num-samples"),
    "num_burn_in": ("--num-burn-in", "--num-tuning"),
    "num_chains": ("--num-chains", "--members"),
    "step_size": ("--step-size", "--init-step-size"),
    "target_accept_rate": ("--target-accept-rate",),
    "adapt": ("--adapt",),
    "until_converged": ("--until-converged",),
    "max_time": ("--max-time",),
    "init_checkpoint": ("--init-checkpoint",),
    "noise_std": ("--noise-std",),
    "prior": ("--prior",),
    "model": ("--model",),
}
#: What each budget flag counts.
BUDGET_UNITS = {
    "--num-iterations": "iterations",
    "--num-epochs": "epochs",
    "--num-samples": "draws",
}


@functools.cache
def _table() -> dict[str, dict[str, list[str] | None]]:
    from importlib import resources

    text = resources.files("bnnkit.metrics").joinpath("command_flags.json").read_text()
    return json.loads(text)


def command_flags(command: str) -> dict[str, list[str] | None]:
    """The flags ``bnnkit COMMAND`` takes, each with its allowed values (``None``: any), as its
    parser has them (:mod:`bnnkit.flag_table` writes and checks the table).

    Raises:
        ConfigError: no such command.

    Example:
        >>> command_flags("samples")["--format"], command_flags("hmc")["--num-iterations"]
        (['npz', 'netcdf'], None)
        >>> "--members" in command_flags("hmc"), "--members" in command_flags("reference")
        (False, True)
    """
    from bnnkit.errors import ConfigError

    flags = _table()
    if command not in flags:
        raise ConfigError(f"no bnnkit command {command!r}; allowed: {', '.join(flags)}")
    return flags[command]


def _accepted(flags: dict[str, list[str] | None], key: str) -> str | None:
    return next((f for f in CANDIDATES[key] if f in flags), None)


def _choice(flags: dict[str, list[str] | None], flag: str | None, value: str) -> str | None:
    """``FLAG VALUE`` when the command takes ``value`` for ``flag``."""
    if flag is None:
        return None
    choices = flags[flag]
    return f"{flag} {value}" if choices is None or value in choices else None


def command_settings(command: str, *, from_ensemble: bool = False) -> Settings:
    """The flags the advice names for a run made by ``bnnkit COMMAND``: only those its parser
    takes, so every suggestion can be typed after that command.

    Args:
        command: the command that made the run (a method, or ``"reference"``).
        from_ensemble: the chains already started from an ensemble's members (a reference's
            always do): the advice to start them there is left out.

    Example:
        >>> reference = command_settings("reference", from_ensemble=True)
        >>> reference.num_iterations, reference.num_chains, reference.step_size
        ('--num-samples', '--members', None)
        >>> reference.good_start is None, command_settings("sgmcmc").until_converged is None
        (True, True)
        >>> command_settings("hmc").resume
        '--resume with a larger --num-iterations'
    """
    flags = command_flags(command)
    names = {key: _accepted(flags, key) for key in CANDIDATES}
    budget = names["budget"]
    until = (
        f"{names['until_converged']} --max-time {ADVICE_DURATION}"
        if names["until_converged"] and names["max_time"]
        else None
    )
    good_start = (
        None
        if from_ensemble or names["init_checkpoint"] is None
        else f"train an ensemble (bnnkit ensemble) and pass its run as "
        f"{names['init_checkpoint']} DIR"
    )
    changes = [
        phrase
        for phrase, flag in (
            (
                f"a fixed noise std ({names['noise_std']} {ADVICE_NOISE_STD} on standardised "
                "targets)",
                names["noise_std"],
            ),
            (f"a tighter prior ({names['prior']} {ADVICE_PRIOR})", names["prior"]),
            (f"another model ({names['model']})", names["model"]),
        )
        if flag
    ]
    return Settings(
        num_iterations=budget,
        num_burn_in=names["num_burn_in"],
        num_chains=names["num_chains"],
        step_size=names["step_size"],
        adapt_mass=_choice(flags, names["adapt"], "mass"),
        target_accept_rate=names["target_accept_rate"],
        adapt_none=_choice(flags, names["adapt"], "none"),
        resume=None if budget is None else f"--resume with a larger {budget}",
        finish=FLAGS.finish,
        until_converged=until,
        good_start=good_start,
        posterior_change=either(changes) or None,
        budget_unit=BUDGET_UNITS.get(budget or "", "iterations"),
    )


def cli_vocabulary(
    command: str | None, *, from_ensemble: bool = False, base: Vocabulary | None = None
) -> Vocabulary:
    """``base`` (default :data:`FUNCTION_CLI`) speaking the flags of ``bnnkit COMMAND``, or as
    it is for a command bnnkit does not know (a run made by another version).

    Example:
        >>> cli_vocabulary("sgmcmc").more_iterations()
        'run more epochs (--resume with a larger --num-epochs)'
        >>> cli_vocabulary(None) is FUNCTION_CLI
        True
    """
    from bnnkit.errors import ConfigError

    base = FUNCTION_CLI if base is None else base
    if command is None:
        return base
    try:
        return base.for_command(command, from_ensemble=from_ensemble)
    except ConfigError:
        return base


def either(options: list[str | None]) -> str:
    """The options that are offered (not ``None``), joined as alternatives.

    Example:
        >>> either(["a", None, "b", "c"]), either(["a", "b"]), either(["a"]), either([None])
        ('a, b, or c', 'a, or b', 'a', '')
    """
    offered = [o for o in options if o]
    if len(offered) < 2:
        return "".join(offered)
    return f"{', '.join(offered[:-1])}, or {offered[-1]}"


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
        return f"run more {self.settings.budget_unit} ({self.settings.resume})"

    def extend_until_mixed(self) -> str:
        """More iterations, and where offered the way to let the run extend itself."""
        offered = self.settings.until_converged
        extend = (
            "" if offered is None else (f", or {offered} to extend the run until each chain mixes")
        )
        return f"run more {self.settings.budget_unit} ({self.settings.resume}{extend})"

    def for_command(self, command: str, *, from_ensemble: bool = False) -> Vocabulary:
        """This vocabulary with the flags of ``bnnkit COMMAND`` (:func:`command_settings`)."""
        return dataclasses.replace(
            self, settings=command_settings(command, from_ensemble=from_ensemble)
        )


#: What pooling chains in several modes gives a network's predictive: MILE's model average,
#: a valid reference for it.
_MODEL_AVERAGE = "the model average pools them, a valid reference for it"
#: What pooling chains in several modes gives a density's draws: each mode weighs as many
#: chains as sit in it, not its probability.
_POOLED_DRAWS = "pooled, their draws weigh each mode by the chains in it, not by its probability"

#: A network's predictions on test inputs, advice in flags (``bnnkit evaluate``).
FUNCTION_CLI = Vocabulary("test predictions", "function-space ESS", _MODEL_AVERAGE, FLAGS)
#: A network's predictions on test inputs, advice in Config fields.
FUNCTION_PYTHON = Vocabulary("test predictions", "function-space ESS", _MODEL_AVERAGE, FIELDS)
#: The parameters of a log density, advice in flags.
PARAMETERS_CLI = Vocabulary("parameters", "ESS", _POOLED_DRAWS, FLAGS)
#: The parameters of a log density, advice in Config fields (:func:`bnnkit.sample`).
PARAMETERS_PYTHON = Vocabulary("parameters", "ESS", _POOLED_DRAWS, FIELDS)
