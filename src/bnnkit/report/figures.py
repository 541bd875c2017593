"""Figures as PNG bytes: matplotlib's Agg backend (no display needed), closed after rendering.

Write the bytes with :func:`bnnkit.storage.atomic_write_bytes`.

Example:
    >>> plt = pyplot()
    >>> fig, ax = plt.subplots()
    >>> png_bytes(plt, fig)[1:4]
    b'PNG'
"""

from __future__ import annotations

import io


def pyplot():
    """``matplotlib.pyplot`` on the Agg backend, imported when a figure is first drawn."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def png_bytes(plt, fig, dpi: int = 110) -> bytes:
    """``fig`` laid out tightly, rendered as PNG at ``dpi``, and closed."""
    buffer = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buffer, format="png", dpi=dpi)
    plt.close(fig)
    return buffer.getvalue()
