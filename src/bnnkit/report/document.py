"""One report of many output folders: ``report.md`` with its figures, and a self-contained
``report.html``, both drawn from the same section objects.

Each folder given becomes a :class:`~bnnkit.report.sections.Section` (a title, blocks of text,
headings and tables, and figures with captions) by the function of its kind
(:mod:`bnnkit.report.kinds`). The markdown
links each figure copied into ``OUT/figures/``; the HTML embeds every PNG as a base64 data URI
and writes tables as HTML tables, so it opens anywhere with no other file and no network.
Neither holds a path of the machine that wrote it: an absolute path in a section (a folder given
as one, a run's dataset file, the ensemble a reference's chains started from) is written
relative to the report's folder (:func:`portable`).

Example:
    >>> section = Section("demo", "note", "demo", (Table(("x", "y"), (("1", "2"),)),))
    >>> print(markdown_text([section]))
    # bnnkit report
    <BLANKLINE>
    ## demo
    <BLANKLINE>
    *note: `demo`*
    <BLANKLINE>
    | x | y |
    |---|---|
    | 1 | 2 |
    <BLANKLINE>
    >>> "<td>2</td>" in html_text([section], {})
    True
"""

from __future__ import annotations

import base64
import contextlib
import html
import os
import re
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from bnnkit import output_folder, storage
from bnnkit.errors import ConfigError
from bnnkit.report import kinds
from bnnkit.report.sections import Block, Heading, Headline, Section, Table

MARKDOWN_FILE = "report.md"
HTML_FILE = "report.html"
FIGURES_DIR = "figures"

_CSS = (
    "body{font-family:sans-serif;max-width:60em;margin:2em auto;padding:0 1em;"
    "line-height:1.4}table{border-collapse:collapse;margin:1em 0}"
    "th,td{border:1px solid #bbb;padding:.2em .6em;text-align:left}"
    "th{background:#eee}img{max-width:100%}figure{margin:1em 0}"
    "figcaption{font-size:.9em;color:#444}code{background:#f4f4f4}"
    ".headline{border-left:.5em solid;padding:.4em 1em;margin:1em 0;font-size:1.15em}"
    ".headline ul{font-size:.9em;margin:.3em 0}"
)
#: The colours of a headline's tones (:class:`~bnnkit.report.sections.Headline`): its border
#: and its background.
TONES = {
    "good": ("#2e7d32", "#e8f5e9"),
    "fair": ("#b26a00", "#fff4e0"),
    "poor": ("#c62828", "#fdecea"),
    "none": ("#757575", "#f4f4f4"),
}


#: An absolute path in a report's text: a "/" that no word character, dot, slash or colon
#: precedes ("accuracy/NLL", "1/√x", "min / median" and a URL are no paths), up to a space,
#: quote, bracket, comma, semicolon, colon (a sample's ``RUN:3``) or pipe.
_ABSOLUTE = re.compile(r"(?<![\w.~/:])/[^\s'\"`,;:|()\[\]<>]+")


def portable(text: str, out: str | os.PathLike) -> str:
    """``text`` with every absolute path in it written relative to the report's folder
    ``out``, so that a report says nothing of the machine it was written on and its paths
    still lead to the folders beside it.

    Example:
        >>> portable("init_checkpoint /data/runs/ref/ensemble:2, accuracy/NLL", "/data/reports")
        'init_checkpoint ../runs/ref/ensemble:2, accuracy/NLL'
        >>> portable("[\\"/data/a.npz\\"] (min / median) https://example.org/x", "/data/r")
        '["../a.npz"] (min / median) https://example.org/x'
    """
    base = os.path.realpath(out)
    return _ABSOLUTE.sub(lambda m: os.path.relpath(os.path.realpath(m[0]), base), text)


def _portable_section(section: Section, out: str | os.PathLike) -> Section:
    """``section`` with :func:`portable` text: title, folder, blocks and captions (a figure's
    path is kept: it names the file, never shown but by its name)."""

    def block(b: Block) -> Block:
        if isinstance(b, Table):
            return Table(
                tuple(portable(c, out) for c in b.columns),
                tuple(tuple(portable(c, out) for c in row) for row in b.rows),
            )
        if isinstance(b, Heading):
            return Heading(portable(b.text, out))
        if isinstance(b, Headline):
            return b._replace(
                text=portable(b.text, out), to_do=tuple(portable(t, out) for t in b.to_do)
            )
        return portable(b, out)

    return section._replace(
        title=portable(section.title, out),
        source=portable(section.source, out),
        blocks=tuple(block(b) for b in section.blocks),
        figures=tuple(f._replace(caption=portable(f.caption, out)) for f in section.figures),
    )


class Report(NamedTuple):
    """The sections written, and the files: ``markdown``, ``html`` and each copied figure."""

    sections: tuple[Section, ...]
    markdown: Path
    html: Path
    figures: tuple[Path, ...]


def _markdown_row(cells: Sequence[str]) -> str:
    # A bare "|" inside a cell would end it.
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def _markdown_table(table: Table) -> str:
    lines = [_markdown_row(table.columns), "|" + "---|" * len(table.columns)]
    lines += [_markdown_row(row) for row in table.rows]
    return "\n".join(lines)


def markdown_text(
    sections: Sequence[Section], figure_links: Mapping[Path, str] | None = None
) -> str:
    """The report as markdown; each figure is linked by ``figure_links`` (its relative path)."""
    links = {} if figure_links is None else figure_links
    lines = ["# bnnkit report", ""]
    for section in sections:
        lines += [f"## {section.title}", "", f"*{section.kind}: `{section.source}`*", ""]
        for block in section.blocks:
            if isinstance(block, Table):
                lines += [_markdown_table(block), ""]
            elif isinstance(block, Heading):
                lines += [f"### {block.text}", ""]
            elif isinstance(block, Headline):
                lines += [f"**{block.text}**", ""]
                lines += [f"- to do: {item}" for item in block.to_do]
                lines += [""] if block.to_do else []
            else:
                lines += [block, ""]
        for figure in section.figures:
            link = links.get(figure.path, str(figure.path))
            lines += [f"![{figure.path.name}]({link})", "", f"*{figure.caption}*", ""]
    return "\n".join(lines)


def _html_table(table: Table) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in table.columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in table.rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _html_headline(headline: Headline) -> str:
    border, background = TONES.get(headline.tone, TONES["none"])
    items = "".join(f"<li>{html.escape(item)}</li>" for item in headline.to_do)
    return (
        f'<div class="headline" style="border-color:{border};background:{background}">'
        f"<strong>{html.escape(headline.text)}</strong>"
        + (f"<ul>{items}</ul>" if items else "")
        + "</div>"
    )


def html_text(sections: Sequence[Section], figure_bytes: Mapping[Path, bytes]) -> str:
    """The report as one HTML page: every figure a ``data:image/png;base64`` URI, no link out."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>bnnkit report</title><style>{_CSS}</style></head><body>",
        "<h1>bnnkit report</h1>",
    ]
    for section in sections:
        parts += [
            f"<section><h2>{html.escape(section.title)}</h2>",
            f"<p><em>{html.escape(section.kind)}: <code>{html.escape(section.source)}"
            "</code></em></p>",
        ]
        for block in section.blocks:
            if isinstance(block, Table):
                parts.append(_html_table(block))
            elif isinstance(block, Heading):
                parts.append(f"<h3>{html.escape(block.text)}</h3>")
            elif isinstance(block, Headline):
                parts.append(_html_headline(block))
            else:
                parts.append(f"<p>{html.escape(block)}</p>")
        for figure in section.figures:
            data = base64.b64encode(figure_bytes[figure.path]).decode("ascii")
            parts.append(
                f'<figure><img alt="{html.escape(figure.path.name)}" '
                f'src="data:image/png;base64,{data}">'
                f"<figcaption>{html.escape(figure.caption)}</figcaption></figure>"
            )
        parts.append("</section>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def document(
    folders: Sequence[str | os.PathLike], out: str | os.PathLike, *, overwrite: bool = False
) -> Report:
    """Write one report of ``folders`` (runs and experiment outputs) into ``out``.

    Every folder is recognised and read, and ``out`` checked, before anything is written;
    ``out`` gets ``report.md``, ``figures/`` (each figure copied, or written where the report
    drew it, named by its section) and ``report.html``, every file written atomically.

    Args:
        folders: run directories and experiment output folders, in the report's order.
        out: the report's folder: new or empty, else ``overwrite`` of an earlier report.
        overwrite: replace the report in ``out``.

    Raises:
        ConfigError: no folder, a folder of no known kind (naming it and the kinds known),
            or a bad ``out``.

    Example:
        (Needs stored runs or experiments; see docs/guides/report.md.)

        >>> report = document(["runs/hmc", "runs/convergence"], "runs/report")  # doctest: +SKIP
    """
    output_folder.check(
        out, MARKDOWN_FILE, "report", resume=False, overwrite=overwrite, flags=("--overwrite",)
    )
    if not folders:
        raise ConfigError(
            "no folder to report on; allowed: run directories and experiment output folders"
        )
    sections = tuple(kinds.section(folder) for folder in folders)
    figure_bytes = {f.path: f.data() for s in sections for f in s.figures}

    path = Path(out)
    path.mkdir(parents=True, exist_ok=True)
    figures_dir = path / FIGURES_DIR
    with contextlib.suppress(FileNotFoundError):
        shutil.rmtree(figures_dir)  # an earlier report's figures (only with overwrite)
    figures_dir.mkdir()
    links: dict[Path, str] = {}
    for i, s in enumerate(sections):
        for figure in s.figures:
            # The section's number keeps two folders' figures of the same name apart.
            name = f"{i + 1:02d}_{s.kind}_{figure.path.name}"
            storage.atomic_write_bytes(figures_dir / name, figure_bytes[figure.path])
            links[figure.path] = f"{FIGURES_DIR}/{name}"
    shown = tuple(_portable_section(s, path) for s in sections)
    storage.atomic_write_bytes(path / MARKDOWN_FILE, markdown_text(shown, links).encode())
    storage.atomic_write_bytes(path / HTML_FILE, html_text(shown, figure_bytes).encode())
    return Report(
        sections,
        path / MARKDOWN_FILE,
        path / HTML_FILE,
        tuple(path / link for link in links.values()),
    )
