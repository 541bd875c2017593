"""A run stopped by its time budget: not an error, one line, and an exit code of its own.

When ``--max-time`` (or the budget of ``--until-converged``) ends a run before it did what
it was asked, the command first reports what it can (the summary, the evaluation of the
samples kept so far, or a sentence saying there are none yet), then raises
:class:`BudgetEnded`. :func:`bnnkit.cli.main` turns it into one line on stderr, the same for
every command::

    bnnkit: stopped: the time budget of 15 s ended after 1 of 400 iterations (burn-in 300),
    no sample kept yet; continue with: bnnkit hmc ... --resume

and exits with :data:`EXIT_BUDGET` (3): neither 0, so that a script (``make``, ``&&``,
``set -e``) does not go on as if the run were complete, nor 2 (bad input) or 1 (a bug), so
that it can tell a stop it may resume from a command it must fix. The continuing command is
the command line as given, with ``--resume`` and without ``--overwrite``
(:func:`resume_argv`), and :func:`bnnkit.cli.main` prints it only once it parses with that
command's own parser.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

#: The exit code of a command whose run its time budget stopped (resume to continue).
EXIT_BUDGET = 3


class BudgetEnded(Exception):  # noqa: N818 (an outcome, not an error)
    """A command's run was stopped by its time budget; ``--resume`` continues it.

    Raised by a command after it has reported what it could; :func:`bnnkit.cli.main` prints
    one line with the continuing command and exits with :data:`EXIT_BUDGET`.

    Attributes:
        progress: how far the run got, in a sentence starting "the time budget ...".
    """

    def __init__(self, progress: str):
        super().__init__(progress)
        self.progress = progress


def resume_argv(argv: Sequence[str]) -> list[str]:
    """The command line that continues a stopped run: ``argv`` with ``--resume`` (once) and
    without ``--overwrite``, which would replace what the stopped run has done.

    Example:
        >>> resume_argv(["hmc", "--dir", "runs/a", "--overwrite", "--max-time", "15s"])
        ['hmc', '--dir', 'runs/a', '--max-time', '15s', '--resume']
        >>> resume_argv(["reference", "--resume", "--dir", "r"])
        ['reference', '--resume', '--dir', 'r']
    """
    out = []
    for i, arg in enumerate(argv):
        if arg == "--":  # what follows is positional, kept as it is
            return [*out, *([] if "--resume" in out else ["--resume"]), *argv[i:]]
        if arg != "--overwrite":
            out.append(arg)
    return out if "--resume" in out else [*out, "--resume"]


def command_line(argv: Sequence[str]) -> str:
    """``bnnkit ARGV`` as a shell would take it back (each argument quoted where needed).

    Example:
        >>> command_line(["hmc", "--dir", "my runs/a", "--resume"])
        "bnnkit hmc --dir 'my runs/a' --resume"
    """
    return shlex.join(["bnnkit", *argv])
