"""Plots in the style of the paper's Fig. 2, one function per panel, from summary rows.

Rows are the dicts of `summary.csv` (scenario, algorithm, x, throughput, end_to_end, …). Each
figure puts the scenario's x on the horizontal axis and draws one line per algorithm, with the
spread across runs as error bars when known. Figures are drawn on a bare `Figure` with the Agg
canvas, so nothing touches pyplot's global state or needs a display.

A scenario gets the style of the panel its name starts with ("fig2a" … "fig2e"), else of the
panel named in it ("peers"/"overlay", "publications", "subscriptions", "accept-all", "store"),
else a throughput plot when it has notifications and an end-to-end time plot when not.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

Row = dict[str, Any]
_MARKERS = "osD^v<>px"


@dataclass(frozen=True)
class Panel:
    """What one Fig. 2 panel shows: the metric on y and how x is labelled and scaled."""

    title: str
    metric: str
    xlabel: str
    ylabel: str
    xscale: float = 1.0


PANELS = {
    "fig2a": Panel("(a) Impact of overlay size", "throughput", "number of peers", "throughput (CE/s)"),
    "fig2b": Panel("(b) Impact of the number of publications", "throughput", "CEs published (×10³)",
                   "throughput (CE/s)", 1000.0),
    "fig2c": Panel("(c) Impact of the number of subscriptions", "throughput", "number of subscriptions",
                   "throughput (CE/s)"),
    "fig2d": Panel("(d) One accept-all subscription", "throughput", "number of peers", "throughput (CE/s)"),
    "fig2e": Panel("(e) Time to store publications", "end_to_end", "CEs published (×10³)", "time (s)", 1000.0),
}
_KEYWORDS = (
    ("accept", "fig2d"), ("store", "fig2e"), ("subscription", "fig2c"),
    ("publication", "fig2b"), ("overlay", "fig2a"), ("peer", "fig2a"),
)


def line_plot(rows: Iterable[Row], path: str | Path, panel: Panel) -> Path:
    """x against `panel.metric`, one line per algorithm (the common shape of every Fig. 2 panel)."""
    by_algorithm: dict[str, list[Row]] = {}
    for row in rows:
        if _number(row.get(panel.metric)) is not None and _number(row.get("x")) is not None:
            by_algorithm.setdefault(str(row["algorithm"]), []).append(row)
    figure = Figure(figsize=(5.0, 3.6), dpi=100)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    ticks: set[float] = set()
    for index, (algorithm, points) in enumerate(sorted(by_algorithm.items())):
        points.sort(key=lambda r: float(r["x"]))
        xs = [float(r["x"]) / panel.xscale for r in points]
        ticks.update(xs)
        ys = [float(r[panel.metric]) for r in points]
        spread = [_number(r.get(f"{panel.metric}_std")) or 0.0 for r in points]
        first = points[0]
        axes.errorbar(
            xs, ys, yerr=spread if any(spread) else None, label=str(first.get("label", algorithm.upper())),
            marker=_MARKERS[first.get("series", index) % len(_MARKERS)],
            color=f"C{first.get('series', index) % 10}", linestyle=first.get("linestyle", "-"),
            capsize=3, linewidth=1.4,
        )
    if 0 < len(ticks) <= 12:  # few points, as in the paper: a tick at each measured x
        axes.set_xticks(sorted(ticks), [f"{t:g}" for t in sorted(ticks)])
    else:
        axes.xaxis.set_major_locator(MaxNLocator(integer=all(t.is_integer() for t in ticks)))
    axes.set_title(panel.title, fontsize=10)
    axes.set_xlabel(panel.xlabel)
    axes.set_ylabel(panel.ylabel)
    axes.set_ylim(bottom=0)
    axes.grid(True, linewidth=0.4, alpha=0.6)
    if by_algorithm:
        axes.legend(fontsize=9)
    else:
        axes.text(0.5, 0.5, f"no {panel.metric} data", ha="center", va="center", transform=axes.transAxes)
    figure.tight_layout()
    target = Path(path)
    figure.savefig(target, format="png")
    return target


def overlay_size(rows: Iterable[Row], path: str | Path) -> Path:
    """Fig. 2(a): subscriber throughput against the number of peers."""
    return line_plot(rows, path, PANELS["fig2a"])


def publications(rows: Iterable[Row], path: str | Path) -> Path:
    """Fig. 2(b): subscriber throughput against the number of CEs published (×10³)."""
    return line_plot(rows, path, PANELS["fig2b"])


def subscriptions(rows: Iterable[Row], path: str | Path) -> Path:
    """Fig. 2(c): subscriber throughput against the number of subscriptions."""
    return line_plot(rows, path, PANELS["fig2c"])


def accept_all(rows: Iterable[Row], path: str | Path) -> Path:
    """Fig. 2(d): throughput with one accept-all subscription against the number of peers."""
    return line_plot(rows, path, PANELS["fig2d"])


def store_time(rows: Iterable[Row], path: str | Path) -> Path:
    """Fig. 2(e): time to store the publications (no subscription) against their number (×10³)."""
    return line_plot(rows, path, PANELS["fig2e"])


def latency(rows: Iterable[Row], path: str | Path, panel: Panel) -> Path:
    """Companion figure on the panel's x axis: p50 (solid) and p99 (dashed) latency per algorithm."""
    rows = list(rows)
    series = {name: index for index, name in enumerate(sorted({str(r["algorithm"]) for r in rows}))}
    lines: list[Row] = []
    for row in rows:
        name = str(row["algorithm"])
        for quantile, style in (("p50", "-"), ("p99", "--")):
            lines.append({**row, "algorithm": f"{name} {quantile}", "label": f"{name.upper()} {quantile}",
                          "linestyle": style, "series": series[name], "value": row.get(f"latency_{quantile}")})
    shown = Panel(f"Notification latency — {panel.title}", "value", panel.xlabel, "latency (s)", panel.xscale)
    return line_plot(lines, path, shown)


def panel_for(scenario: str, rows: Sequence[Row]) -> Panel:
    """The panel a scenario is drawn as (see the module docstring)."""
    name = scenario.lower()
    for prefix, panel in PANELS.items():
        if name.startswith(prefix):
            return panel
    for word, key in _KEYWORDS:
        if word in name:
            return PANELS[key]
    if any(_number(r.get("throughput")) is not None for r in rows):
        return Panel(scenario, "throughput", "x", "throughput (CE/s)")
    return Panel(scenario, "end_to_end", "x", "end-to-end time (s)")


def plot_summary(rows: Iterable[Row], out: str | Path) -> list[Path]:
    """`<scenario>.png` for every scenario, plus `<scenario>-latency.png` where latency is known."""
    by_scenario: dict[str, list[Row]] = {}
    for row in rows:
        by_scenario.setdefault(str(row["scenario"]), []).append(row)
    written: list[Path] = []
    for scenario, group in sorted(by_scenario.items()):
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in scenario)
        panel = panel_for(scenario, group)
        written.append(line_plot(group, Path(out) / f"{safe}.png", panel))
        if any(_number(r.get("latency_p50")) is not None for r in group):
            written.append(latency(group, Path(out) / f"{safe}-latency.png", panel))
    return written


def _number(value: Any) -> float | None:
    if value is None or value == "":
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number
