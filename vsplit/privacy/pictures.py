"""Picture grids of images and their reconstructions (PNG, with matplotlib), for the reports and docs/img.

A grid is a list of *blocks* side by side (e.g. one per defense), each a title and rows of images with a label;
every row of a block has the same number of images. Files are written atomically, as the audit reports are.

Example:
    >>> import numpy as np, tempfile, pathlib
    >>> x = np.random.default_rng(0).random((3, 8, 8))
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "grid.png"
    >>> write_grid(out, [("none", [("original", x), ("white-box", x)])], title="demo").stat().st_size > 0
    True
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from vsplit.errors import ConfigError
from vsplit.privacy.report import _atomic_write

Block = tuple[str, Sequence[tuple[str, np.ndarray]]]


def write_grid(path: str | os.PathLike, blocks: Sequence[Block], *, title: str = "", cell: float = 0.55) -> Path:
    """Write the blocks of labelled image rows as one PNG at ``path`` (images in [0, 1], dark strokes on white)."""
    try:
        import matplotlib
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ConfigError("pictures need matplotlib; install it with: pip install 'vsplit[privacy]'") from exc

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    if not blocks or any(not rows for _, rows in blocks):
        raise ConfigError("write_grid: every block needs at least one row of images")
    n_rows = max(len(rows) for _, rows in blocks)
    widths = [max(len(images) for _, images in rows) for _, rows in blocks]
    columns = sum(widths) + len(blocks) - 1  # one empty column between blocks
    label_space = 1.9
    fig = plt.figure(figsize=(label_space + cell * columns, 0.8 + cell * n_rows + 0.3))
    grid = fig.add_gridspec(n_rows, columns, left=label_space / (label_space + cell * columns), right=0.99,
                            top=1 - 0.85 / (1.1 + cell * n_rows), bottom=0.01, wspace=0.05, hspace=0.08)
    start = 0
    for (name, rows), width in zip(blocks, widths, strict=True):
        for r, (label, images) in enumerate(rows):
            for c, image in enumerate(np.asarray(images)[:width]):
                ax = fig.add_subplot(grid[r, start + c])
                ax.imshow(np.clip(image, 0, 1), cmap="gray_r", vmin=0, vmax=1, interpolation="nearest")
                ax.set_xticks([])
                ax.set_yticks([])
                if r == 0 and c == 0:
                    ax.set_title(name, fontsize=8, loc="left")
                if c == 0 and start == 0:
                    ax.set_ylabel(label, rotation=0, ha="right", va="center", fontsize=7)
        start += width + 1
    if title:
        width = label_space + cell * columns
        fig.suptitle(textwrap.fill(title, max(30, int(width * 15))), fontsize=8, y=0.995)
    return _atomic_write(Path(path), lambda f: fig.savefig(f, format="png", dpi=110), close=lambda: plt.close(fig))
