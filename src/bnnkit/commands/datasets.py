"""``bnnkit datasets``: list every dataset, or draw the corruption grid of one image."""

from __future__ import annotations

import argparse

from bnnkit.commands import Command


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-dir", default=None,
                        help="folder of dataset files already on disk (default $BNNKIT_DATA_DIR)")
    parser.add_argument("--show-corruptions", metavar="DATASET", default=None,
                        help="save a PNG grid of the first test image of DATASET (e.g. cifar10) "
                             "under every corruption and severity")
    parser.add_argument("--out", default="corruptions.png", help="PNG path for the grid")
    parser.add_argument("--seed", type=int, default=0, help="seed of the corruptions")


def _shape(shape: tuple[int, ...]) -> str:
    return "x".join(str(d) for d in shape)


def run(args: argparse.Namespace) -> int:
    from bnnkit.data import catalog

    if args.show_corruptions:
        from bnnkit.report.corruption_grid import find_image, render_grid

        image, description = find_image(args.show_corruptions, args.data_dir)
        path = render_grid(image, description, args.out, seed=args.seed)
        print(f"wrote {path} ({description})")
        return 0
    header = ("name", "task", "input", "classes/dim", "train", "test", "local", "licence")
    from bnnkit.data.fetch import data_root
    from bnnkit.data.sources import REMOTES

    root = data_root(args.data_dir)
    rows = []
    for card in catalog.cards():
        local = catalog.where(card.name, args.data_dir)
        if local is None and root is not None:
            local = f"no: put its files in {root / card.name}/"
        elif local is None:
            downloads = card.name in REMOTES and card.name != "cifar10_c"
            local = "no: downloads on first use" if downloads else "no"
        rows.append((card.name, card.task, _shape(card.input_shape), str(card.outputs),
                     f"{card.num_train:,}", f"{card.num_test:,}", local,
                     card.licence + (f" [{card.note}]" if card.note else "")))
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header) - 1)]
    for row in [header, *rows]:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=False)) + "  " + row[-1])
    return 0


COMMAND = Command(
    help="list datasets (task, shapes, sizes, licence, local files) or draw corruptions",
    add_arguments=add_arguments,
    run=run,
)
