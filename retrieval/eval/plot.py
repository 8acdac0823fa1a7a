"""The recall@K plot: pooled (Crase) recall as solid lines, macro recall dashed, one colour per mode.

Drawn with matplotlib's Agg canvas directly (no pyplot), so it needs no display and leaves the process's
matplotlib backend alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from ..errors import RetrievalError


def require_matplotlib() -> None:
    """Fail now, not after the queries have run, when matplotlib is missing."""
    _matplotlib()


def _matplotlib():
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:  # pragma: no cover - depends on the environment
        raise RetrievalError(
            "the recall plot needs matplotlib: install it with `pip install 'retrieval[eval]'`"
        ) from None
    return Figure, FigureCanvasAgg


def plot_recall_at_k(
    path: Path,
    cutoffs: Sequence[int],
    pooled: Mapping[str, Sequence[float]],
    macro: Mapping[str, Sequence[float]],
    title: str,
) -> None:
    """Write a PNG of recall@K per mode at ``path``."""
    figure_class, canvas_class = _matplotlib()
    # One legend entry per mode (pooled solid, macro dashed), beside the axes, so many modes still fit.
    fig = figure_class(figsize=(10.0, max(4.5, 0.22 * len(pooled) + 1.5)), dpi=100)
    canvas_class(fig)
    ax = fig.add_subplot()
    markers = "osD^v<>ph*"
    for i, (mode, values) in enumerate(pooled.items()):
        colour, marker = f"C{i % 10}", markers[(i // 10) % len(markers)]
        ax.plot(cutoffs, values, marker=marker, color=colour, label=mode)
        ax.plot(cutoffs, macro[mode], marker=".", linestyle="--", color=colour, alpha=0.6)
    ax.set_xscale("log")
    ax.set_xticks(list(cutoffs))
    ax.set_xticklabels([str(k) for k in cutoffs])
    ax.set_xlabel("K (log scale)")
    ax.set_ylabel("recall@K")
    ax.set_ylim(0.0, 1.0)
    ax.grid(True, alpha=0.3)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), title="pooled (solid), macro (dashed)",
              title_fontsize=7)  # fmt: skip
    fig.subplots_adjust(left=0.08, right=0.7, top=0.92, bottom=0.12)
    fig.savefig(path, format="png", metadata={"Software": None})
