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
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

Row = dict[str, Any]
_MARKERS = "osD^v<>px"


def line_plot(
    rows: Iterable[Row],
    path: str | Path,
    *,
    metric: str,
    title: str,
    xlabel: str,
    ylabel: str,
    xscale: float = 1.0,
) -> Path:
    """x against `metric`, one line per algorithm (the common shape of every Fig. 2 panel)."""
    by_algorithm: dict[str, list[Row]] = {}
    for row in rows:
        if _number(row.get(metric)) is not None and _number(row.get("x")) is not None:
            by_algorithm.setdefault(str(row["algorithm"]), []).append(row)
    figure = Figure(figsize=(5.0, 3.6), dpi=100)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    for index, (algorithm, points) in enumerate(sorted(by_algorithm.items())):
        points.sort(key=lambda r: float(r["x"]))
        xs = [float(r["x"]) / xscale for r in points]
        ys = [float(r[metric]) for r in points]
        spread = [_number(r.get(f"{metric}_std")) or 0.0 for r in points]
        axes.errorbar(
            xs, ys, yerr=spread if any(spread) else None, label=algorithm.upper(),
            marker=_MARKERS[index % len(_MARKERS)], capsize=3, linewidth=1.4,
        )
    axes.set_title(title, fontsize=10)
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.set_ylim(bottom=0)
    axes.grid(True, linewidth=0.4, alpha=0.6)
    if by_algorithm:
        axes.legend(fontsize=9)
    else:
        axes.text(0.5, 0.5, f"no {metric} data", ha="center", va="center", transform=axes.transAxes)
    figure.tight_layout()
    target = Path(path)
    figure.savefig(target, format="png")
    return target


def overlay_size(rows: Iterable[Row], path: str | Path) -> Path:
    """Fig. 2(a): subscriber throughput against the number of peers."""
    return line_plot(rows, path, metric="throughput", title="(a) Impact of overlay size",
                     xlabel="number of peers", ylabel="throughput (CE/s)")


def publications(rows: Iterable[Row], path: str | Path) -> Path:
    """Fig. 2(b): subscriber throughput against the number of CEs published (×10³)."""
    return line_plot(rows, path, metric="throughput", title="(b) Impact of the number of publications",
                     xlabel="CEs published (×10³)", ylabel="throughput (CE/s)", xscale=1000.0)


def subscriptions(rows: Iterable[Row], path: str | Path) -> Path:
    """Fig. 2(c): subscriber throughput against the number of subscriptions."""
    return line_plot(rows, path, metric="throughput", title="(c) Impact of the number of subscriptions",
                     xlabel="number of subscriptions", ylabel="throughput (CE/s)")


def accept_all(rows: Iterable[Row], path: str | Path) -> Path:
    """Fig. 2(d): throughput with one accept-all subscription against the number of peers."""
    return line_plot(rows, path, metric="throughput", title="(d) One accept-all subscription",
                     xlabel="number of peers", ylabel="throughput (CE/s)")


def store_time(rows: Iterable[Row], path: str | Path) -> Path:
    """Fig. 2(e): time to store the publications (no subscription) against their number (×10³)."""
    return line_plot(rows, path, metric="end_to_end", title="(e) Time to store publications",
                     xlabel="CEs published (×10³)", ylabel="time (s)", xscale=1000.0)


def latency(rows: Iterable[Row], path: str | Path) -> Path:
    """Companion figure: p50 (solid) and p99 notification latency per algorithm."""
    rows = list(rows)
    doubled = [{**r, "algorithm": f"{r['algorithm']} p50", "value": r.get("latency_p50")} for r in rows]
    doubled += [{**r, "algorithm": f"{r['algorithm']} p99", "value": r.get("latency_p99")} for r in rows]
    return line_plot(doubled, path, metric="value", title="Notification latency",
                     xlabel="x", ylabel="latency (s)")


STYLES: dict[str, Callable[[Iterable[Row], str | Path], Path]] = {
    "fig2a": overlay_size,
    "fig2b": publications,
    "fig2c": subscriptions,
    "fig2d": accept_all,
    "fig2e": store_time,
}
_KEYWORDS = (
    ("accept", accept_all), ("store", store_time), ("subscription", subscriptions),
    ("publication", publications), ("overlay", overlay_size), ("peer", overlay_size),
)


def style_for(scenario: str, rows: Sequence[Row]) -> Callable[[Iterable[Row], str | Path], Path]:
    """The panel style a scenario is drawn in (see the module docstring)."""
    name = scenario.lower()
    for prefix, style in STYLES.items():
        if name.startswith(prefix):
            return style
    for word, style in _KEYWORDS:
        if word in name:
            return style
    if any(_number(r.get("throughput")) is not None for r in rows):
        return _generic_throughput
    return _generic_time


def _generic_throughput(rows: Iterable[Row], path: str | Path) -> Path:
    return line_plot(rows, path, metric="throughput", title=Path(path).stem,
                     xlabel="x", ylabel="throughput (CE/s)")


def _generic_time(rows: Iterable[Row], path: str | Path) -> Path:
    return line_plot(rows, path, metric="end_to_end", title=Path(path).stem,
                     xlabel="x", ylabel="end-to-end time (s)")


def plot_summary(rows: Iterable[Row], out: str | Path) -> list[Path]:
    """`<scenario>.png` for every scenario, plus `<scenario>-latency.png` where latency is known."""
    by_scenario: dict[str, list[Row]] = {}
    for row in rows:
        by_scenario.setdefault(str(row["scenario"]), []).append(row)
    written: list[Path] = []
    for scenario, group in sorted(by_scenario.items()):
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in scenario)
        written.append(style_for(scenario, group)(group, Path(out) / f"{safe}.png"))
        if any(_number(r.get("latency_p50")) is not None for r in group):
            written.append(latency(group, Path(out) / f"{safe}-latency.png"))
    return written


def _number(value: Any) -> float | None:
    if value is None or value == "":
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number
