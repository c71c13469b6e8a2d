"""Geometry of the admin dashboard's server-rendered SVG charts (no JavaScript).

The templates (``admin/mcp_oauth/dashboard/*.html``) draw what these functions compute: rectangles in
a fixed ``viewBox``, each with its numbers, so a chart is readable as an image and its table
beside it carries the same figures for screen readers and text browsers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Bar", "ColumnChart", "HBar", "HBarChart", "column_chart", "hbars"]

#: Size of the column chart's drawing area (SVG user units).
WIDTH, HEIGHT = 720, 160
#: Width of a horizontal bar at 100 %.
HBAR_WIDTH = 300


@dataclass(frozen=True)
class Bar:
    """One column: ``total`` calls of which ``errors`` failed, starting at ``label``."""

    label: str
    total: int
    errors: int
    x: float
    width: float
    y: float
    height: float
    error_y: float
    error_height: float


@dataclass(frozen=True)
class ColumnChart:
    bars: list[Bar]
    peak: int
    width: int = WIDTH
    height: int = HEIGHT

    @property
    def total(self) -> int:
        return sum(bar.total for bar in self.bars)

    @property
    def errors(self) -> int:
        return sum(bar.errors for bar in self.bars)


def column_chart(series: list[tuple[str, int, int]]) -> ColumnChart:
    """Columns for ``series`` of ``(label, total, errors)``: heights scaled to the largest total,
    the errors drawn over the bottom of each column."""
    peak = max((total for _, total, _ in series), default=0)
    slot = WIDTH / max(1, len(series))
    gap = min(2.0, slot * 0.2)
    bars = []
    for index, (label, total, errors) in enumerate(series):
        height = HEIGHT * total / peak if peak else 0.0
        error_height = HEIGHT * errors / peak if peak else 0.0
        bars.append(
            Bar(
                label=label,
                total=total,
                errors=errors,
                x=round(index * slot + gap / 2, 2),
                width=round(slot - gap, 2),
                y=round(HEIGHT - height, 2),
                height=round(height, 2),
                error_y=round(HEIGHT - error_height, 2),
                error_height=round(error_height, 2),
            )
        )
    return ColumnChart(bars=bars, peak=peak)


@dataclass(frozen=True)
class HBar:
    """One horizontal bar: ``label`` with ``value`` (``width`` scaled to the largest), at row ``y``;
    ``detail``, when not empty, is shown under the label in the table (a client's ID under its name)."""

    label: str
    value: Any
    width: float
    y: float
    detail: str = ""


@dataclass(frozen=True)
class HBarChart:
    rows: list[HBar]
    height: int


def hbars(rows: Sequence[tuple[str, int] | tuple[str, int, str]], row_height: int = 22) -> HBarChart:
    """Horizontal bars for ``rows`` of ``(label, value)`` or ``(label, value, detail)``, widths
    scaled to the largest value."""
    peak = max((row[1] for row in rows), default=0)
    bars = [
        HBar(
            label=row[0],
            value=row[1],
            width=round(HBAR_WIDTH * row[1] / peak, 2) if peak else 0.0,
            y=index * row_height,
            detail=row[2] if len(row) > 2 else "",
        )
        for index, row in enumerate(rows)
    ]
    return HBarChart(rows=bars, height=len(bars) * row_height)
