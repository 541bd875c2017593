"""mkdocs hook: the nav's methods section, one page per method of ``METHODS``, in its order.

``mkdocs.yml`` registers this file under ``hooks:`` and names the section in its nav with an
empty list; :func:`on_config` fills it, so a new method's page (written by ``generate.py``)
is in the site's navigation without an edit here or there. ``validation: nav: omitted_files:
warn`` in ``mkdocs.yml`` makes ``mkdocs build --strict`` fail on a page the nav does not reach.
"""

from __future__ import annotations

from typing import Any

from bnnkit.inference import METHODS

#: The nav entry this hook fills.
SECTION = "Methods"


def method_entries() -> list[dict[str, str]]:
    """One nav entry per registered method: its name and its page."""
    return [{name: f"methods/{name}.md"} for name in METHODS]


def on_config(config: Any) -> Any:
    """Fill the nav's ``SECTION`` entry with :func:`method_entries`.

    Raises:
        ValueError: the nav has no ``SECTION`` entry (the methods would be unreachable).
    """
    for entry in config.nav or ():
        if isinstance(entry, dict) and SECTION in entry:
            entry[SECTION] = method_entries()
            return config
    raise ValueError(f"mkdocs.yml's nav has no {SECTION!r} entry for docs/method_nav.py to fill")
