"""The flags the advice may name are the command line's own: the table the layers below the
command line read (``metrics/command_flags.json``) is what the parsers take today."""

from __future__ import annotations

import json

from bnnkit import flag_table


def test_the_table_is_the_parsers():
    stored = json.loads(flag_table.TABLE_FILE.read_text())
    live = flag_table.table()
    assert sorted(stored) == sorted(live), "run: python -m bnnkit.flag_table"
    for command, flags in live.items():
        assert stored[command] == flags, (
            f"bnnkit {command}'s flags changed; run: python -m bnnkit.flag_table"
        )
