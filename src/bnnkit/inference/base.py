"""The one interface every inference method implements, and how a method is configured.

A method module (``bnnkit.inference.hmc``, ``sgd``, ...) exposes two things:

- ``Config``: a frozen dataclass of every setting, with its default (defaults live there and
  nowhere else), validated once when it is built. Its fields carry their CLI help in
  :func:`setting`, so ``bnnkit <method>``'s flags are derived from it. ``config.loop(N)`` says
  how the one run driver (:mod:`bnnkit.runs`) drives the method on N training examples.
- ``build(log_posterior, config) -> Method``: the method as pure functions::

    method = bnnkit.inference.hmc.build(log_posterior, hmc.Config(step_size=1e-3, ...))
    state = method.init(key, params, batch)
    state, info = method.step(key, state, batch)     # jit-able; batch = full data for HMC
    posterior = method.posterior(kept_states)        # kept states of one chain, stacked

A method module writes ``init``, ``step``, ``posterior`` and ``position`` as module-level pure
functions that take their settings as keyword arguments, and ``build`` binds them with
``functools.partial`` (as :func:`bnnkit.inference.hmc.build` does): each piece can then be called
and tested on its own with settings of its caller's choice, what a step depends on is in its
signature rather than in a closure, and a method that shares another's update imports its
pieces (SWAG and MC dropout descend by SGD's :func:`bnnkit.inference.sgd.descend`). A new
method is its module, its line in :data:`bnnkit.inference.METHODS` and its row in the protocol
test (``tests/inference/test_protocol.py``).

Fields are declared with :func:`bnnkit.settings.setting`. ``State`` holds only what the next
step needs; diagnostics go into ``Info`` (a NamedTuple whose
field names are the run log's keys). Keys always come in as arguments. ``init`` takes the batch
too because methods that cache the log density and its gradient (HMC) need data to evaluate
them; methods that do not simply ignore it.

A model with randomness of its own (dropout, :mod:`bnnkit.models.registry`) draws it from
the key a minibatch method gives the log posterior, :func:`model_key` of its step's key, which
leaves the keys of the method's own noise as they were (runs stored before it resume bit for
bit). Full-batch samplers (HMC, NUTS) need an exact log density and give no key: they sample
the posterior of the model's deterministic mode.

Example:
    >>> loop = Loop("epochs", num_units=10, batch_size=32, burn_in=6, keep_every=2)
    >>> loop.kept_units()  # epochs 8 and 10, counted from 1
    [7, 9]
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, NamedTuple

import jax

from bnnkit import schedules
from bnnkit.errors import ConfigError
from bnnkit.metrics.levels import UNTIL
from bnnkit.posterior.base import Posterior
from bnnkit.posterior.samples import Samples
from bnnkit.settings import (
    MAX_INT32,
    MEMBERS,
    SEED_BOUNDS,
    UNITS,
    Exclusive,
    check_choice,
    check_numbers,
    parse_duration,
    resumable_settings,
    setting,
)
from bnnkit.types import Batch, Key, Params, Schedule

State = Any
Info = Any

LOOP_KINDS = ("iterations", "epochs", "chunks")

#: ``fold_in`` data of the model's randomness within a step's key: unlike anything a method
#: folds into its own key (small indices), so the method's own noise keeps its keys.
MODEL_STREAM = 0x6D6F64  # "mod"


def model_key(key: Key | None) -> Key | None:
    """The key a step gives the model's own randomness: ``fold_in(key, MODEL_STREAM)``
    (``None`` for ``None``). The log posterior passes it to a stochastic model only.

    Example:
        >>> model_key(None) is None
        True
        >>> bool((model_key(jax.random.PRNGKey(0)) != jax.random.PRNGKey(0)).any())
        True
    """
    return None if key is None else jax.random.fold_in(key, MODEL_STREAM)


class Method(NamedTuple):
    """An inference method as pure functions.

    Attributes:
        init: ``(key, params, batch) -> state``.
        step: ``(key, state, batch) -> (state, info)``; pure and jit-able.
        posterior: ``(kept_states) -> posterior``, where ``kept_states`` stacks the states one
            chain (or member) kept along a leading axis; the posterior is a
            :class:`~bnnkit.posterior.base.Posterior`, which the run driver stores.
        position: ``(state) -> params``, the parameters a state stands for.
        step_members: optional ``(keys, states, batch) -> (states, infos)`` over members
            stacked on a leading axis, called from Python, not jitted; the run driver calls
            it instead of compiling ``jax.vmap(step, axis_name=MEMBERS)`` when it is set. It
            must give what that vmapped ``step`` gives: the same bits for several members,
            and for one member at least the same values to rounding, always computed the same
            way (so a resumed run stays bit-exact). It is the hook for a method whose
            iteration is driven from the host: HMC's leapfrog loop on XLA:CPU
            (:mod:`bnnkit.inference.host_leapfrog`). ``None``: the driver vmaps ``step``.
        draw: optional ``(state) -> state`` keeping only what ``posterior`` reads of a state
            (:func:`position_only`, for a sampler whose kept draw is its position). With it,
            the run driver runs a sampler's iterations in blocks, each one compiled scan that
            returns every iteration's draw (:mod:`bnnkit.runs.blocks`), instead of one
            dispatch per iteration; ``None``: one iteration per dispatch.
    """

    init: Callable[[Key, Params, Batch | None], State]
    step: Callable[[Key, State, Batch], tuple[State, Info]]
    posterior: Callable[[State], Posterior]
    position: Callable[[State], Params]
    step_members: Callable[[Key, State, Batch], tuple[State, Info]] | None = None
    draw: Callable[[State], State] | None = None


def position_only(state: State) -> State:
    """A sampler's state (a NamedTuple) with only its ``position``, every other field ``None``:
    the draw a block of iterations returns for each iteration (``Method.draw``), a fraction of
    the whole state, which holds momenta, gradients and the tuning's statistics.

    Example:
        >>> from typing import NamedTuple
        >>> class S(NamedTuple):
        ...     position: int
        ...     momentum: int
        >>> position_only(S(1, 2))
        S(position=1, momentum=None)
    """
    return type(state)(**{f: (state.position if f == "position" else None) for f in state._fields})


def sampler(init: Callable, step: Callable, **hooks: Any) -> Method:
    """The :class:`Method` of a full-batch sampler, whose every kept state is a draw: its
    posterior is the kept positions (:func:`chain_samples`), its position the state's
    (:func:`state_position`), and a block of iterations returns only the positions
    (:func:`position_only`).

    Args:
        init: ``Method.init``.
        step: ``Method.step``.
        **hooks: the further fields of :class:`Method` the sampler sets (``step_members``).
    """
    return Method(init, step, chain_samples, state_position, draw=position_only, **hooks)


def state_position(state: State) -> Params:
    """The parameters a state stands for, its ``position`` field: ``Method.position`` of every
    method whose state (a NamedTuple) keeps them there.

    Example:
        >>> from typing import NamedTuple
        >>> class S(NamedTuple):
        ...     position: int
        ...     momentum: int
        >>> state_position(S(1, 2))
        1
    """
    return state.position


def chain_samples(kept: State) -> Samples:
    """The kept states' positions as the samples of one chain: ``Method.posterior`` of a
    sampler, whose every kept state is a draw.

    Example:
        >>> import jax.numpy as jnp
        >>> from typing import NamedTuple
        >>> class S(NamedTuple):
        ...     position: dict
        >>> chain_samples(S({"w": jnp.zeros((5, 3))})).num_samples
        5
    """
    return Samples.from_single_chain(kept.position)


@dataclasses.dataclass(frozen=True)
class Loop:
    """How the run driver runs a method: what one unit of work is, how many, what is kept.

    Attributes:
        kind: ``"iterations"`` (one step on the full training set per unit), ``"epochs"``
            (one pass of shuffled minibatches per unit, the last incomplete one dropped) or
            ``"chunks"`` (one step per consecutive chunk of the training set, one pass).
        num_units: iterations, epochs or chunks.
        num_members: chains or ensemble members, run together.
        batch_size: examples per minibatch (epochs) or per chunk (chunks).
        burn_in: units before the first kept one.
        keep_every: after the burn-in, keep every this many units (the posterior the method
            returns for them is stored).
        save_every: write the full state every this many units (and at the end).
        eval_every: log test metrics of the members' positions every this many units (0:
            never).
        vmap_members: run members in one vmapped step (else one after another).
        augment: randomly crop and flip each minibatch's images (epochs only).
    """

    kind: str
    num_units: int
    num_members: int = 1
    batch_size: int | None = None
    burn_in: int = 0
    keep_every: int = 1
    save_every: int = 1
    eval_every: int = 0
    vmap_members: bool = True
    augment: bool = False

    def __post_init__(self) -> None:
        if self.kind not in LOOP_KINDS:
            raise ValueError(f"loop kind {self.kind!r}; allowed: {', '.join(LOOP_KINDS)}")
        if self.kind != "iterations" and not (self.batch_size and self.batch_size >= 1):
            raise ValueError(f"a loop of {self.kind} needs a batch size >= 1")
        if self.augment and self.kind != "epochs":
            raise ValueError(f"a loop of {self.kind} cannot augment: it has no minibatches")

    def keeps(self, unit: int) -> bool:
        """Whether the posterior after ``unit`` (counted from 0) is stored."""
        return unit >= self.burn_in and (unit + 1 - self.burn_in) % self.keep_every == 0

    def kept_units(self) -> list[int]:
        return [u for u in range(self.num_units) if self.keeps(u)]


def _types_first(post_init: Callable[[Any], None]) -> Callable[[Any], None]:
    """A Config's own ``__post_init__``, run once every value has its field's type
    (:func:`~bnnkit.settings.check_numbers`), so that no rule between settings, nor a default
    derived from another setting, ever reads a value of another type (an array, a str)."""

    @functools.wraps(post_init)
    def checked(self: Any) -> None:
        check_numbers(self)
        post_init(self)

    return checked


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunSettings:
    """Settings every method's Config has. ``METHOD`` names the method in ``METHODS``;
    ``API_NAME`` names the Config in the public API (``bnnkit.HMC``), from which
    ``bnnkit.__all__`` and the docs are derived. It is ``METHOD`` in capitals unless the Config
    states another (``API_NAME = "Ensemble"``), and a Config never takes its parent's (the
    ensemble's extends SGD's); being a class's name, it starts with a capital letter.

    A run may start from another run (:meth:`source_run`), named by the setting
    ``SOURCE_FIELD``; ``SOURCE_FLAG`` and ``SOURCE_NAME`` name that run in messages,
    ``SOURCE_METHODS`` restricts its method, and ``PROBLEM_FROM_SOURCE`` says the problem is
    that run's (no data or model flags of its own).

    A subclass's own ``__post_init__`` runs after every value has been checked against its
    field's type (:func:`~bnnkit.settings.check_numbers`), so its rules between settings may
    read any value as a number, a bool or a string.
    """

    METHOD: ClassVar[str] = ""
    API_NAME: ClassVar[str] = ""
    SOURCE_FLAG: ClassVar[str] = "--init-checkpoint"
    SOURCE_FIELD: ClassVar[str] = "init_checkpoint"
    SOURCE_NAME: ClassVar[str] = "run given to --init-checkpoint"
    SOURCE_METHODS: ClassVar[tuple[str, ...] | None] = None
    PROBLEM_FROM_SOURCE: ClassVar[bool] = False
    #: Whether every run of the method draws Gaussian noise (see :attr:`draws_gaussian_noise`).
    GAUSSIAN_NOISE: ClassVar[bool] = False

    #: Old field names of stored runs and the names they have now (one name per concept
    #: across methods), so ``run.json`` written before the rename still reads and resumes.
    RENAMED: ClassVar[dict[str, str]] = {
        "num_burnin_epochs": "num_burn_in",
        "save_freq": "checkpoint_every",
    }
    #: Settings added after runs were stored whose value those runs had implicitly (a run
    #: made before ``--augment`` existed was not augmented), so they still resume. A setting
    #: whose state those runs lack is not listed: their resume is refused.
    IMPLIED: ClassVar[dict[str, Any]] = {}

    seed: int = setting(
        0, help="seed of everything random: initialisation, noise, data order", bounds=SEED_BOUNDS
    )

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "API_NAME" not in cls.__dict__:  # stated by this class itself, not inherited
            cls.API_NAME = cls.METHOD.upper()
        own = cls.__dict__.get("__post_init__")
        if own is not None:
            cls.__post_init__ = _types_first(own)

    def __post_init__(self) -> None:
        check_numbers(self)  # first: every value of its field's type before any is read

    def loop(self, num_train: int) -> Loop:
        """How the run driver runs this method on ``num_train`` training examples."""
        raise NotImplementedError

    @property
    def label(self) -> str:
        """A short name of the configured method for titles (``"HMC"``, ``"SGHMC-CLR"``)."""
        return self.METHOD.upper()

    @property
    def draws_gaussian_noise(self) -> bool:
        """Whether the run draws Gaussian noise (:data:`bnnkit.inference._noise.GENERATOR`):
        :attr:`GAUSSIAN_NOISE`, unless the Config's settings decide."""
        return self.GAUSSIAN_NOISE

    def budget(self) -> Budget:
        """How long the driver runs this call and whether it extends the run until it mixes:
        the driver's settings, the same for every method (a method without them has none)."""
        return Budget(
            max_time=getattr(self, "max_time", None),
            until=getattr(self, "until", None),
        )

    def source_run(self) -> str | None:
        """A run whose parameters start this one (``RUN`` or ``RUN:SAMPLE``), if any."""
        return getattr(self, "init_checkpoint", None)

    def to_dict(self) -> dict[str, Any]:
        """The settings as JSON-serialisable values (what ``run.json`` stores)."""
        return dataclasses.asdict(self)

    @classmethod
    def current_names(cls, values: Mapping[str, Any]) -> dict[str, Any]:
        """Stored settings with renamed fields under their current names, and the
        :attr:`IMPLIED` settings an older run lacks."""
        return {**cls.IMPLIED, **{cls.RENAMED.get(k, k): v for k, v in values.items()}}

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> RunSettings:
        """Rebuild (and validate) a Config from :meth:`to_dict` output; unknown keys ignored."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in cls.current_names(values).items() if k in names})

    @classmethod
    def resumable(cls) -> set[str]:
        """Fields that may differ on ``--resume``."""
        return set(resumable_settings(cls))


@dataclasses.dataclass(frozen=True)
class Budget:
    """The driver's settings of a run (:meth:`RunSettings.budget`): never what a sample is, so
    a resume may change them.

    Attributes:
        max_time: seconds this call may run before it stops cleanly, resumable (``None``: no
            limit).
        until: extend the run in blocks until its verdict reaches this level
            (:data:`bnnkit.metrics.levels.UNTIL`) or ``max_time`` ends (``None``: never).
    """

    max_time: float | None = None
    until: str | None = None


def max_time_setting() -> Any:
    """``--max-time``: how long the driver runs in this call, never what a sample is, so a
    resume may change it (:func:`bnnkit.runs.run` stops the run cleanly when it has passed)."""
    return setting(
        None,
        resumable=True,
        metavar="DURATION",
        bounds=(Exclusive(0), None),
        help="stop cleanly, resumable with --resume, once this much wall time has passed in "
        "this call, compilation included: seconds, or 90s, 30m, 2h, 1h30m",
    )


def until_setting() -> Any:
    """``--until LEVEL``: extend a run of chains until its verdict reaches a level; how long
    the driver runs, never what a sample is, so a resume may change it."""
    return setting(
        None,
        resumable=True,
        choices=UNTIL,
        help="extend the chains in blocks until the verdict of bnnkit evaluate reaches this "
        f"level ({' or '.join(UNTIL)}), or --max-time ends; each block is what --resume with "
        "a larger budget does (the kept iterations grow by half), so the samples are those "
        "of one longer run; needs --max-time",
    )


def check_until(config: Any) -> None:
    """Refuse an ``until`` level that is not one of :data:`~bnnkit.metrics.levels.UNTIL`, or
    one without a ``max_time``."""
    if config.until is None:
        return
    if config.until not in UNTIL:
        raise ConfigError(f"unknown --until {config.until!r}; allowed: {', '.join(UNTIL)}")
    if config.max_time is None:
        raise ConfigError("--until needs --max-time: a time budget such as 30m or 2h")


def lowercase_choices(config: Any, **allowed: tuple[str, ...]) -> None:
    """Each named setting of a (frozen) Config in lower case, and one of its ``allowed``
    values, else a one-line ConfigError naming the flag and listing them.

    Example:
        >>> from bnnkit.inference import sgmcmc
        >>> sgmcmc.Config(init_step_size=0.1, num_epochs=2, batch_size=4, noise="Gaussian").noise
        'gaussian'
    """
    for name in allowed:
        object.__setattr__(config, name, str(getattr(config, name)).lower())
    for name, choices in allowed.items():
        check_choice(type(config), name, getattr(config, name), choices)


def epochs_after_burn_in(config: Any) -> int:
    """The epochs after a Config's ``num_burn_in``, once its schedule fits in them: at least
    one, and with ``step_size_schedule`` ``"cyclical"`` a ``cycle_length`` no longer than
    they are (a ``cycle_length`` of another schedule refused).

    Raises:
        ConfigError: a burn-in as long as the run, or a cycle that is missing, too long or
            given to another schedule.
    """
    if not config.num_burn_in < config.num_epochs:
        raise ConfigError(
            f"--num-burn-in {config.num_burn_in} must be smaller than "
            f"--num-epochs {config.num_epochs}"
        )
    after = config.num_epochs - config.num_burn_in
    if config.step_size_schedule == "cyclical":
        if config.cycle_length is None:
            raise ConfigError(
                "--step-size-schedule cyclical needs --cycle-length (epochs per cycle)"
            )
        if config.cycle_length > after:
            raise ConfigError(
                f"--cycle-length {config.cycle_length} epochs does not fit in "
                f"the {after} epochs after the burn-in; allowed: 1..{after}"
            )
    elif config.cycle_length is not None:
        raise ConfigError("--cycle-length applies to --step-size-schedule cyclical only")
    return after


def burn_in_schedule(config: Any, steps_per_epoch: int, final: float | None) -> Schedule:
    """The step size of a Config's ``step_size_schedule`` as a function of the update count:
    ``"cyclical"``, constant over the burn-in and then cosine cycles of ``cycle_length``
    epochs (:func:`~bnnkit.schedules.cyclical_cosine`); else a cosine over the burn-in from
    ``init_step_size`` to ``final`` (default: ``init_step_size``), then constant
    (:func:`~bnnkit.schedules.constant_after_cosine_burnin`).
    """
    burn = config.num_burn_in * steps_per_epoch
    if config.step_size_schedule == "cyclical":
        return schedules.cyclical_cosine(
            config.init_step_size, burn, config.cycle_length * steps_per_epoch
        )
    final = config.init_step_size if final is None else final
    return schedules.constant_after_cosine_burnin(config.init_step_size, final, burn)


@dataclasses.dataclass(frozen=True, kw_only=True)
class IterationSettings(RunSettings):
    """Full-batch methods (HMC, NUTS): iterations over the whole training set, several chains."""

    num_iterations: int = setting(
        1000, help="iterations, burn-in included", resumable=True, bounds=UNITS
    )
    num_burn_in: int = setting(
        0,
        aliases=("--num-burn-in-iterations",),
        help="iterations whose samples are discarded (and where the sampler adapts)",
        bounds=(0, UNITS[1]),
    )
    num_chains: int | None = setting(
        None,
        bounds=MEMBERS,
        help="independent chains, run together; default: one per chain (member) of the "
        "--init-checkpoint run, else 1",
    )
    checkpoint_every: int = setting(
        1,
        resumable=True,
        aliases=("--save-freq",),
        help="write the full chain state every N iterations (a sampler run in blocks: after a "
        "block once N iterations and 10 s have passed, at a stop and when interrupted)",
        bounds=UNITS,
    )
    init_checkpoint: str | None = setting(
        None,
        metavar="RUN[:SAMPLE]",
        help="start the chains from another run's parameters (its last kept sample, or the "
        "one of index SAMPLE): chain c from that run's chain c mod its chains, so from a "
        "deep ensemble each chain starts at its own member and is tuned on its own",
    )
    # How long the driver runs, never what a sample is: resumable, like checkpoint_every.
    until: str | None = until_setting()
    max_time: float | str | None = max_time_setting()

    def __post_init__(self) -> None:
        check_numbers(self)  # every value of its field's type before the duration is read
        if self.max_time is not None:
            object.__setattr__(self, "max_time", parse_duration(self.max_time))
        super().__post_init__()  # every number within its bounds
        check_until(self)
        if not self.num_burn_in < self.num_iterations:
            raise ConfigError(
                f"burn-in {self.num_burn_in} must be >= 0 and smaller than the number of "
                f"iterations {self.num_iterations}"
            )

    @property
    def chains(self) -> int:
        """The number of chains; ``num_chains=None`` is 1 until the run driver resolves it
        from the run the chains start from (:func:`bnnkit.runs.initial.with_chains`)."""
        return 1 if self.num_chains is None else self.num_chains

    def loop(self, num_train: int) -> Loop:
        return Loop(
            "iterations",
            self.num_iterations,
            num_members=self.chains,
            burn_in=self.num_burn_in,
            save_every=self.checkpoint_every,
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class HamiltonianSettings(IterationSettings):
    """Full-batch Hamiltonian samplers (HMC, NUTS): what their step-size adaptation aims at and
    when a trajectory counts as divergent."""

    target_accept_rate: float = setting(
        0.8,
        help="acceptance rate the step-size adaptation aims at, in (0, 1)",
        bounds=(Exclusive(0), Exclusive(1)),
    )
    divergence_threshold: float = setting(
        1000.0,
        help="energy error (nats) above which a trajectory counts as divergent",
        bounds=(Exclusive(0), None),
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class EpochSettings(RunSettings):
    """Minibatch methods (SGD, ensembles, SGMCMC, VI): epochs of shuffled minibatches."""

    IMPLIED: ClassVar[dict[str, Any]] = {"augment": False}

    init_step_size: float = setting(
        help="initial step size η₀ (of the tempered log posterior's gradient)",
        bounds=(Exclusive(0), None),
    )
    num_epochs: int = setting(help="passes over the training data", bounds=UNITS)
    batch_size: int = setting(help="examples per step", bounds=(1, MAX_INT32))
    eval_freq: int = setting(
        0,
        resumable=True,
        help="log test metrics every N epochs (0: only at the end)",
        bounds=(0, UNITS[1]),
    )
    checkpoint_every: int = setting(
        1,
        resumable=True,
        aliases=("--save-freq",),
        help="write the full state every N epochs (and at the end)",
        bounds=UNITS,
    )
    init_checkpoint: str | None = setting(
        None,
        metavar="RUN[:SAMPLE]",
        help="start from another run's parameters (its last kept sample, or the one of index "
        "SAMPLE); member m takes that run's chain m mod its chains",
    )
    augment: bool = setting(
        False,
        help="randomly crop (4-pixel zero padding) and flip each minibatch's images, a "
        "fresh draw every step; N x H x W x C inputs only. The likelihood is then "
        "of augmented data. HMC and NUTS are full-batch and do not augment",
    )
    max_time: float | str | None = max_time_setting()

    def __post_init__(self) -> None:
        check_numbers(self)  # every value of its field's type before the duration is read
        if self.max_time is not None:
            object.__setattr__(self, "max_time", parse_duration(self.max_time))
        super().__post_init__()

    def steps_per_epoch(self, num_train: int) -> int:
        """Minibatch steps per epoch: ``num_train // batch_size`` (the remainder is dropped).

        Raises:
            ConfigError: a batch larger than the training set.
        """
        if self.batch_size > num_train:
            raise ConfigError(
                f"--batch-size {self.batch_size} is larger than the {num_train} training examples"
            )
        return num_train // self.batch_size

    def epoch_loop(
        self,
        num_train: int,
        *,
        num_members: int = 1,
        burn_in: int | None = None,
        keep_every: int = 1,
        vmap_members: bool = True,
    ) -> Loop:
        """The loop of ``num_epochs`` epochs; ``burn_in=None`` keeps only the last epoch."""
        self.steps_per_epoch(num_train)
        burn_in = self.num_epochs - 1 if burn_in is None else burn_in
        return Loop(
            "epochs",
            self.num_epochs,
            num_members=num_members,
            batch_size=self.batch_size,
            burn_in=burn_in,
            keep_every=keep_every,
            save_every=self.checkpoint_every,
            eval_every=self.eval_freq,
            vmap_members=vmap_members,
            augment=self.augment,
        )

    def loop(self, num_train: int) -> Loop:
        """One member's :meth:`epoch_loop`, its last epoch kept (a method with members or a
        burn-in states its own)."""
        return self.epoch_loop(num_train)
