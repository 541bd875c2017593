"""The one exception type for bad user input.

Anything a user can get wrong (an unknown dataset, a negative step size, a run directory that
already holds another run) raises :class:`ConfigError` with a one-line message that names the
offending value and what is allowed. The CLI turns it into that line on stderr and exit code 2;
Python users get an ordinary ``ValueError`` subclass.
"""


class ConfigError(ValueError):
    """A user-supplied value is invalid; the message says which and what is allowed."""
