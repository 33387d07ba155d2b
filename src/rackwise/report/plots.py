"""The report's figures, drawn with matplotlib's object API (Agg, no pyplot).

Each function takes data already shrunk by `rackwise.report.series` and
returns a `Figure`; `encode` turns one into a ``data:`` URI. Byte-identical
output for identical input: no dates or version strings in the files, and a
fixed hash salt for SVG element ids.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from rackwise.errors import MissingExtraError

try:
    import matplotlib
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
except ImportError:
    raise MissingExtraError("the report needs matplotlib: pip install 'rackwise[report]'") from None

import numpy as np

from rackwise.report.series import FloatArray
from rackwise.report.stats import Estimate

ImageFormat = Literal["png", "svg"]
_DPI = 100
# Line styles as well as colours, so lines stay apart in greyscale and for
# readers who do not tell the colours apart.
_STYLES = ("-", "--", "-.", ":")
# Cropped to what is drawn, so an outside legend of any width fits; a layout
# engine would cost more time than the drawing itself.
_TIGHT: dict[str, Any] = {"bbox_inches": "tight", "pad_inches": 0.08}
_RC: dict[Any, Any] = {"svg.hashsalt": "rackwise-report", "svg.fonttype": "path", "font.size": 10.0,
       "axes.spines.top": False, "axes.spines.right": False}


@dataclass(frozen=True)
class Line:
    """One group's line, in the units the axes show."""

    label: str
    x: FloatArray
    y: FloatArray


@dataclass(frozen=True)
class BarPanel:
    """One panel of bars: a figure per group, with its interval."""

    title: str
    labels: Sequence[str]
    estimates: Sequence[Estimate]
    scale: float = 1.0  # multiply values by this for display (e.g. 1/3600 for hours)


def colour(index: int) -> str:
    """The colour of the ``index``-th group (ten colours, then they repeat)."""
    return matplotlib.colors.to_hex(matplotlib.colormaps["tab10"](index % 10))


def _style(index: int) -> str:
    # Ten colours and four styles: the first twenty groups differ in one or the other.
    return _STYLES[index % len(_STYLES)]


def cdf_figure(lines: Sequence[Line], xlabel: str, floor: float) -> Figure:
    """CDFs on a log x axis; values below ``floor`` are drawn at ``floor``."""
    with matplotlib.rc_context(_RC):
        fig = Figure(figsize=(6.4, 4.2), dpi=_DPI)
        ax = fig.add_subplot()
        for i, line in enumerate(lines):
            ax.plot(np.maximum(line.x, floor), line.y, label=line.label, color=colour(i),
                    linestyle=_style(i), linewidth=1.6, drawstyle="steps-post")
        ax.set_xscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("fraction of jobs")
        ax.set_ylim(0.0, 1.005)
        ax.grid(True, which="major", alpha=0.3)
        _legend(ax)
    return fig


def timeline_figure(lines: Sequence[Line], ylabel: str, percent: bool = False) -> Figure:
    """Values over time (x in days), one line per group."""
    with matplotlib.rc_context(_RC):
        fig = Figure(figsize=(6.4, 3.6), dpi=_DPI)
        ax = fig.add_subplot()
        for i, line in enumerate(lines):
            y = line.y * 100.0 if percent else line.y
            ax.plot(line.x, y, label=line.label, color=colour(i), linestyle=_style(i),
                    linewidth=1.2)
        ax.set_xlabel("time since the first submission (days)")
        ax.set_ylabel(ylabel)
        if percent:
            ax.set_ylim(0.0, 102.0)
        else:
            ax.set_ylim(bottom=0.0)
        ax.set_xlim(left=0.0)
        ax.grid(True, alpha=0.3)
        _legend(ax)
    return fig


def _legend(ax: Axes) -> None:
    # Right of the plot, not over it: many or long group names would hide the lines.
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9, frameon=False)


def bars_figure(panels: Sequence[BarPanel]) -> Figure:
    """Horizontal bars, one panel per figure, 95% intervals as error bars where known.

    Horizontal, so that long group names read as they are, however many groups.
    Panels side by side share the groups' axis, which is labelled once.
    """
    n_cols = 2
    n_rows = (len(panels) + n_cols - 1) // n_cols
    n_groups = max((len(p.labels) for p in panels), default=1)
    with matplotlib.rc_context(_RC):
        fig = Figure(figsize=(8.0, n_rows * (0.3 * n_groups + 1.1)), dpi=_DPI)
        # About 0.8 in between rows, whatever their height.
        fig.subplots_adjust(hspace=0.8 / (0.3 * n_groups + 0.3), wspace=0.08)
        axes = fig.subplots(n_rows, n_cols, squeeze=False, sharey=True).ravel()
        for ax, panel in zip(axes, panels):
            means = [e.mean * panel.scale for e in panel.estimates]
            errors = [(e.half_width or 0.0) * panel.scale for e in panel.estimates]
            positions = np.arange(len(means))
            ax.barh(positions, means, color=[colour(i) for i in range(len(means))],
                    xerr=errors if any(e.half_width is not None for e in panel.estimates) else None,
                    capsize=3, error_kw={"elinewidth": 1.2}, height=0.7)
            ax.set_title(panel.title, fontsize=10)
            ax.set_yticks(positions, [_short(label, 40) for label in panel.labels], fontsize=9)
            ax.set_ylim(len(means) - 0.5, -0.5)  # first group on top, as in the table
            ax.grid(True, axis="x", alpha=0.3)
        for ax in axes[len(panels):]:
            ax.set_visible(False)
    return fig


def _short(label: str, width: int = 28) -> str:
    return label if len(label) <= width else label[: width - 1] + "…"


def encode(fig: Figure, fmt: ImageFormat = "png") -> str:
    """The figure as a ``data:`` URI (base64), with no date or software stamp."""
    buffer = io.BytesIO()
    with matplotlib.rc_context(_RC):
        if fmt == "png":
            fig.savefig(buffer, format="png", metadata={"Software": None}, **_TIGHT)
            mime = "image/png"
        elif fmt == "svg":
            fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None}, **_TIGHT)
            mime = "image/svg+xml"
        else:
            raise ValueError(f"unknown image format {fmt!r} (png or svg)")
    return f"data:{mime};base64,{base64.b64encode(buffer.getvalue()).decode('ascii')}"
