"""What a report is made of: sections of paragraphs, headings, tables and captioned figures.

:mod:`bnnkit.report.kinds` turns each output folder into a :class:`Section`;
:mod:`bnnkit.report.document` writes the sections as markdown and HTML.

Example:
    >>> Section("demo", "note", "demo", (Heading("results"),)).blocks
    (Heading(text='results'),)
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple


class Table(NamedTuple):
    """A table of text cells: a header and rows of as many cells."""

    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


class Heading(NamedTuple):
    """A heading inside a section."""

    text: str


class Figure(NamedTuple):
    """A PNG of the folder and a one-paragraph caption saying what it shows.

    A figure the report draws itself (a run's reliability diagram) carries its ``png`` bytes,
    and ``path`` is only the name it stands for in the folder: nothing is written there.

    Example:
        >>> Figure(Path("run/reliability.png"), "demo", png=b"\\x89PNG").data()
        b'\\x89PNG'
    """

    path: Path
    caption: str
    png: bytes | None = None

    def data(self) -> bytes:
        """The PNG: the bytes carried, else the file's."""
        return self.path.read_bytes() if self.png is None else self.png


class Headline(NamedTuple):
    """A section's verdict at a glance: one line in its tone's colour, and what to do.

    Attributes:
        text: the line.
        tone: ``"good"``, ``"fair"``, ``"poor"`` or ``"none"`` (its colour in HTML).
        to_do: what to do, one item each.
    """

    text: str
    tone: str
    to_do: tuple[str, ...] = ()


Block = str | Heading | Table | Headline  # a paragraph, a heading, a table or a headline


class Section(NamedTuple):
    """What one folder contributes: its kind, the folder, and its blocks and figures in order."""

    title: str
    kind: str
    source: str
    blocks: tuple[Block, ...] = ()
    figures: tuple[Figure, ...] = ()


def blocks_from_markdown(text: str) -> tuple[Block, ...]:
    """The paragraphs, headings and pipe tables of a markdown file an experiment wrote.

    Example:
        >>> blocks_from_markdown("# T\\n\\nsome text\\n\\n| a | b |\\n|---|---:|\\n| 1 | 2 |")
        (Heading(text='T'), 'some text', Table(columns=('a', 'b'), rows=(('1', '2'),)))
    """
    blocks: list[Block] = []
    paragraph: list[str] = []
    table: list[tuple[str, ...]] = []

    def flush() -> None:
        if paragraph:
            blocks.append(" ".join(paragraph))
            paragraph.clear()
        if table:
            # The second line of a pipe table only says how columns align.
            blocks.append(Table(table[0], tuple(table[2:] if len(table) > 1 else ())))
            table.clear()

    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("|"):
            if paragraph:
                flush()
            table.append(tuple(c.strip() for c in stripped.strip("|").split("|")))
            continue
        if table or not stripped:
            flush()
        if stripped.startswith("#"):
            blocks.append(Heading(stripped.lstrip("#").strip()))
        elif stripped:
            paragraph.append(stripped)
    flush()
    return tuple(blocks)
