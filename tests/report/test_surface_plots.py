"""The surface plots' colour bar stays readable when the field spans many orders of magnitude."""

from __future__ import annotations

import numpy as np

from bnnkit.report.surface_plots import CLIP_QUANTILE, colour_scale, contour_figure, contour_png


def ten_orders(n: int = 20) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A log density from +535.7 at its mode down to about -1e15 at the grid's corners."""
    u = v = np.linspace(-0.25, 1.25, n)
    grid_u, grid_v = np.meshgrid(u, v, indexing="ij")
    r2 = (grid_u - 0.5) ** 2 + (grid_v - 0.4) ** 2
    field = 535.7 - 1e10 * (np.exp(3 * r2) - 1) ** 3
    field[np.unravel_index(np.argmin(r2), r2.shape)] = 535.7
    return u, v, field


def test_labels_are_distinct_plain_numbers_and_the_maximum_is_labelled():
    _, _, field = ten_orders()
    scale = colour_scale(field)
    assert float(scale.labels[-1]) == 535.7  # the maximum reads as itself, not -0.000
    assert len(set(scale.labels)) == len(scale.labels)
    # Each label is the 4-digit value of its tick: no offset text could change what it says.
    for tick, label in zip(scale.ticks, scale.labels, strict=True):
        assert float(label) == float(f"{tick:.4g}")
    # What was clipped is the lowest CLIP_QUANTILE of the grid, below the lowest level.
    assert np.all(np.diff(scale.levels) > 0)
    assert scale.clipped == np.mean(field < scale.levels[0])
    assert 0 < scale.clipped <= CLIP_QUANTILE + 1 / field.size


def test_a_constant_field_has_no_scale_and_a_plain_one_clips_little():
    assert colour_scale(np.zeros((4, 4))) is None
    scale = colour_scale(-np.add.outer(np.arange(10.0), np.arange(10.0)))
    assert scale.labels[-1] == "0" and scale.clipped <= CLIP_QUANTILE


def test_the_plot_of_such_a_field_is_drawn():
    u, v, field = ten_orders()
    field[0, 0] = -np.inf  # overflowed far from the points: left blank
    png = contour_png(
        u,
        v,
        field,
        np.array([[0, 0], [1, 0], [0.5, 1]]),
        ("a", "b", "c"),
        title="log posterior",
        value_label="log posterior",
    )
    assert png[1:4] == b"PNG"


def drawn_labels(field: np.ndarray) -> tuple[list[str], list[str]]:
    """The colour bar's tick labels as the drawn figure shows them, and its texts."""
    import matplotlib.pyplot as plt

    n = field.shape[0]
    u = v = np.linspace(-0.25, 1.25, n)
    fig = contour_figure(
        u, v, field, np.array([[0, 0], [1, 0], [0.5, 1]]), value_label="log posterior"
    )
    try:
        fig.canvas.draw()
        bar = fig.axes[1]
        return (
            [t.get_text() for t in bar.get_yticklabels() if t.get_text()],
            [t.get_text() for t in fig.texts],
        )
    finally:
        plt.close(fig)


def test_the_drawn_colour_bar_labels_its_ticks_in_one_notation():
    _, _, wide = ten_orders()
    narrow = -np.add.outer(np.arange(10.0), np.arange(10.0)) - 0.5
    drawn = {"wide": drawn_labels(wide), "narrow": drawn_labels(narrow)}
    for field, (labels, _) in zip((wide, narrow), drawn.values(), strict=True):
        scale = colour_scale(field)
        assert labels == scale.labels and len(labels) >= 4
        scientific = ["e" in label for label in labels]
        assert all(scientific) or not any(scientific), labels
        # The value each label says is its tick's, to 4 significant digits.
        for tick, label in zip(scale.ticks, labels, strict=True):
            assert float(label) == float(f"{tick:.4g}")
    # Ten orders of magnitude need e-notation for every label, the note on what was clipped
    # below the bar too; a field within a few units reads as plain numbers.
    assert all("e+" in label for label in drawn["wide"][0])
    note = [t for t in drawn["wide"][1] if t.startswith("▼ below ")]
    assert len(note) == 1 and "e+" in note[0].split(":")[0], note
    assert not any("e" in label for label in drawn["narrow"][0])
