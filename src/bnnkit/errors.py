"""The one exception type for bad user input.

Anything a user can get wrong (an unknown dataset, a negative step size, a run directory that
already holds another run) raises :class:`ConfigError` with a one-line message that names the
offending value and what is allowed. The CLI turns it into that line on stderr and exit code 2;
Python users get an ordinary ``ValueError`` subclass. An argument refused at an entry point's
door is an :class:`ArgumentError`, which the CLI words with the flag the value came from.
"""


class ConfigError(ValueError):
    """A user-supplied value is invalid; the message says which and what is allowed."""


class ArgumentError(ConfigError):
    """An argument of a public entry point refused at the door, kept in parts so that each
    interface names it in its own words: the message names the Python parameter
    (``bnnkit.evaluate: conformal=nan is not finite; ...``), :meth:`naming` the command line's
    flag (``--conformal nan is not finite; ...``).

    Args:
        where: the entry point (``"bnnkit.evaluate"``); empty for none.
        argument: the parameter's name.
        given: the value as a message shows it and what it is (``"nan is not finite"``);
            ``None`` for the value ``None``.
        allowed: what the argument may be, in words every interface shares.
        python_only: what only Python may pass, after ``allowed`` (``" or None"``: a flag left
            out is ``None`` already).

    Example:
        >>> err = ArgumentError("bnnkit.evaluate", "conformal", "nan is not finite",
        ...                     "a finite real number", " or None")
        >>> str(err)
        'bnnkit.evaluate: conformal=nan is not finite; allowed: a finite real number or None'
        >>> err.naming("--conformal")
        '--conformal nan is not finite; allowed: a finite real number'
    """

    def __init__(
        self, where: str, argument: str, given: str | None, allowed: str, python_only: str = ""
    ) -> None:
        self.where, self.argument, self.given, self.allowed = where, argument, given, allowed
        prefix = f"{where}: " if where else ""
        named = f"{argument} is None" if given is None else f"{argument}={given}"
        super().__init__(f"{prefix}{named}; allowed: {allowed}{python_only}")

    def naming(self, name: str) -> str:
        """The refusal with the argument called ``name`` (a flag), without the entry point."""
        named = f"{name} is not given" if self.given is None else f"{name} {self.given}"
        return f"{named}; allowed: {self.allowed}"
