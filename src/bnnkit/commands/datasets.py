"""``bnnkit datasets``: list every dataset, or draw the corruption grid of one image."""

from __future__ import annotations

import argparse
import os
import textwrap

from bnnkit.commands.command import Command
from bnnkit.data import catalog
from bnnkit.data.fetch import data_root
from bnnkit.data.sources import REMOTES
from bnnkit.errors import ConfigError
from bnnkit.evaluation import check_out_file
from bnnkit.report.corruption_grid import find_image, render_grid
from bnnkit.settings import SEED_BOUNDS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data-dir",
        default=None,
        help="folder of dataset files already on disk (default $BNNKIT_DATA_DIR)",
    )
    parser.add_argument(
        "--show-corruptions",
        metavar="DATASET",
        default=None,
        help="save a PNG grid of the first test image of DATASET (e.g. cifar10) "
        "under every corruption and severity",
    )
    parser.add_argument("--out", default="corruptions.png", help="PNG path for the grid")
    parser.add_argument("--seed", type=int, default=0, help="seed of the corruptions")


#: Longest line printed: a terminal's width, so paths and licences wrap instead of running on.
WIDTH = 100
#: Indent of a dataset's ``files:`` and ``licence:`` lines under its row.
INDENT = "    "


def _wrapped(label: str, text: str) -> list[str]:
    """``label: text`` indented, wrapped at spaces (never inside a path, which stays pasteable)."""
    return textwrap.wrap(
        f"{label}: {text}",
        WIDTH,
        initial_indent=INDENT,
        subsequent_indent=INDENT * 2,
        break_on_hyphens=False,
        break_long_words=False,
    )


def _shape(shape: tuple[int, ...]) -> str:
    return "x".join(str(d) for d in shape)


def run(args: argparse.Namespace) -> int:
    if args.show_corruptions:
        if not SEED_BOUNDS[0] <= args.seed <= SEED_BOUNDS[1]:
            raise ConfigError(
                f"--seed {args.seed} out of range; allowed: {SEED_BOUNDS[0]}..{SEED_BOUNDS[1]}"
            )
        if not args.out.lower().endswith(".png"):
            raise ConfigError(f"--out {args.out!r} must name a .png file (the grid is a PNG)")
        check_out_file(args.out, ".png", "corruption grid")

        image, description = find_image(args.show_corruptions, args.data_dir)
        path = render_grid(image, description, args.out, seed=args.seed)
        print(f"wrote {path} ({description})")
        return 0
    header = ("name", "task", "input", "classes/dim", "train", "test")

    root = data_root(args.data_dir)
    # paths are shown under the data folder, named once, so that a row's lines stay short
    prefix = None if root is None else str(root).rstrip(os.sep) + os.sep
    rows = []
    for card in catalog.cards():
        local = catalog.where(card.name, args.data_dir)
        if local is not None and prefix is not None and local.startswith(prefix):
            local = "DATA/" + local[len(prefix) :]
        elif local is None and root is not None:
            local = f"no: put its files in DATA/{catalog.folder(card.name)}/"
        elif local is None:
            downloads = card.name in REMOTES and card.name != "cifar10_c"
            local = "no: downloads on first use" if downloads else "no"
        rows.append(
            (
                (
                    card.name,
                    card.task,
                    _shape(card.input_shape),
                    str(card.outputs),
                    f"{card.num_train:,}",
                    f"{card.num_test:,}",
                ),
                [
                    *_wrapped("files", local),
                    *_wrapped("licence", card.licence + (f" [{card.note}]" if card.note else "")),
                ],
            )
        )
    # the short columns in a table; the long ones (path, licence) on wrapped lines below
    widths = [
        max(len(r[i]) for r in [header, *(row for row, _ in rows)]) for i in range(len(header))
    ]
    if root is not None:
        print(
            *textwrap.wrap(
                f"DATA: {root} (--data-dir, else $BNNKIT_DATA_DIR)",
                WIDTH,
                subsequent_indent=INDENT,
                break_long_words=False,
            ),
            sep="\n",
        )
    print("  ".join(v.ljust(w) for v, w in zip(header, widths, strict=True)).rstrip())
    for row, details in rows:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
        for line in details:
            print(line)
    return 0


COMMAND = Command(
    help="list datasets (task, shapes, sizes, licence, local files) or draw corruptions",
    add_arguments=add_arguments,
    run=run,
    docs="reference/datasets.md",
)
