"""mkdocs hook: the nav's methods section, one page per method of ``METHODS``, in its order.

``mkdocs.yml`` registers this file under ``hooks:`` and names the section in its nav (under
Reference) with an empty list; :func:`on_config` fills it, so a new method's page (written by
``generate.py``) is in the site's navigation without an edit here or there. ``validation: nav:
omitted_files: warn`` in ``mkdocs.yml`` makes ``mkdocs build --strict`` fail on a page the nav
does not reach.
"""

from __future__ import annotations

from typing import Any

from bnnkit.inference import METHODS

#: The nav entry this hook fills.
SECTION = "Methods"
#: Where the generated method pages are, relative to ``docs/``.
FOLDER = "reference/methods"


def method_entries() -> list[dict[str, str]]:
    """One nav entry per registered method: its name and its page."""
    return [{name: f"{FOLDER}/{name}.md"} for name in METHODS]


def _fill(entries: list[Any]) -> bool:
    """Fill the first ``SECTION`` entry found in ``entries`` or below; whether one was."""
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        for title, value in entry.items():
            if title == SECTION:
                entry[title] = method_entries()
                return True
            if isinstance(value, list) and _fill(value):
                return True
    return False


def on_config(config: Any) -> Any:
    """Fill the nav's ``SECTION`` entry (at any depth) with :func:`method_entries`.

    Raises:
        ValueError: the nav has no ``SECTION`` entry (the methods would be unreachable).
    """
    if not _fill(config.nav or []):
        raise ValueError(
            f"mkdocs.yml's nav has no {SECTION!r} entry for docs/method_nav.py to fill"
        )
    return config
