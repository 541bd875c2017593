"""What a subcommand of the ``bnnkit`` CLI is: :class:`Command`, and how its help reads.

A module of its own so that each command module imports it without importing the package that
collects the commands (:mod:`bnnkit.commands`), which imports them back.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import NamedTuple


class Command(NamedTuple):
    """A subcommand.

    Attributes:
        help: its line in ``bnnkit --help`` (and its description).
        add_arguments: adds its flags to its parser.
        run: runs it on the parsed flags; returns the exit code.
        docs: its page in the docs, relative to ``docs/`` (``bnnkit COMMAND --help`` ends with
            a pointer to it).
    """

    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    docs: str = "reference/commands.md"

    @property
    def sentence(self) -> str:
        """Its help as a sentence, as ``bnnkit --help`` and ``bnnkit COMMAND --help`` show it
        (:func:`sentence`)."""
        return sentence(self.help)


def sentence(text: str) -> str:
    """``text`` as a sentence: its first letter a capital, a full stop at its end.

    A command's help is a phrase (the docs append to it); where it stands alone it reads as a
    sentence.

    Example:
        >>> sentence("recompute metrics of a run"), sentence("IVON (Shen et al. 2024).")
        ('Recompute metrics of a run.', 'IVON (Shen et al. 2024).')
    """
    text = " ".join(text.split())
    if not text:
        return text
    text = text[0].upper() + text[1:]
    return text if text.endswith((".", "?", "!")) else f"{text}."
