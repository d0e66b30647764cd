"""The view tab's SVG charts (pure): the refresh history and the freshness lag on a real UTC time axis (a gap in
time is a gap on the axis), and since/upper after each commit. Inline SVG, nothing fetched; every mark carries
its values in ``data-*`` attributes (the tests read them)."""

from __future__ import annotations

from typing import Any

from mvsink.airflow.plugin.common import MODE_COLOURS, esc, human_bytes, short_time
from mvsink.readers.freshness import mode_label
from mvsink.times import format_duration, format_time


def legend() -> str:
    return (
        '<p class="legend muted">'
        + "".join(
            f'<span><span class="mode" style="background:{MODE_COLOURS[k]}"></span>{esc(label)}</span>'
            for k, label in (("incremental", "incremental"), ("full", "full diff"), ("unchanged", "no change"))
        )
        + "</p>"
    )


class TimeAxis:
    """A linear UTC time axis from ``t0`` to ``t1`` over ``[x0, x1]`` pixels (a gap in time is a gap on the axis)."""

    def __init__(self, t0: int, t1: int, x0: float, x1: float) -> None:
        if t1 <= t0:  # one instant: centred in a one-hour window
            t0, t1 = t0 - 1_800_000, t0 + 1_800_000
        self.t0, self.t1, self.x0, self.x1 = t0, t1, x0, x1

    def x(self, t: int) -> float:
        return self.x0 + (self.x1 - self.x0) * (t - self.t0) / (self.t1 - self.t0)

    def svg(self, y: float, *, ticks: int = 4, label: str = "UTC") -> str:
        """The axis line at ``y``, ``ticks + 1`` evenly spaced labelled ticks, and its unit."""
        parts = [f'<line class="axis" x1="{self.x0}" x2="{self.x1}" y1="{y:.1f}" y2="{y:.1f}"/>']
        for k in range(ticks + 1):
            t = self.t0 + (self.t1 - self.t0) * k // ticks
            x = self.x(t)
            anchor = "start" if k == 0 else "end" if k == ticks else "middle"
            parts.append(
                f'<line class="axis" x1="{x:.1f}" x2="{x:.1f}" y1="{y:.1f}" y2="{y + 4:.1f}"/>'
                f'<text class="tick" data-tick="{t}" x="{x:.1f}" y="{y + 15:.1f}" text-anchor="{anchor}">'
                f"{esc(short_time(t))}</text>"
            )
        parts.append(f'<text class="muted" x="{self.x1}" y="{y + 28:.1f}" text-anchor="end">time ({esc(label)})</text>')
        return "".join(parts)


TICK_STEPS = (  # candidate steps of a time axis's ticks, in milliseconds
    1_000,
    5_000,
    15_000,
    60_000,
    300_000,
    900_000,
    1_800_000,
    3_600_000,
    3 * 3_600_000,
    6 * 3_600_000,
    12 * 3_600_000,
    86_400_000,
    7 * 86_400_000,
    30 * 86_400_000,
    365 * 86_400_000,
)


def time_ticks(t0: int, t1: int, *, max_ticks: int = 5) -> list[int]:
    """Round UTC instants spanning ``[t0, t1]`` for a time axis's labels: the smallest step of
    :data:`TICK_STEPS` giving at most ``max_ticks`` of them (so their labels never collide), from the last
    multiple of the step at or before ``t0`` to the first at or after ``t1``."""
    if t1 <= t0:
        t0, t1 = t0 - 1_800_000, t0 + 1_800_000
    for step in TICK_STEPS:
        first, last = t0 // step * step, -(-t1 // step) * step
        if (last - first) // step + 1 <= max_ticks:
            return list(range(first, last + 1, step))
    step = TICK_STEPS[-1] * -(-(t1 - t0) // (TICK_STEPS[-1] * (max_ticks - 1)))
    first = t0 // step * step
    return list(range(first, -(-t1 // step) * step + 1, step))


def lag_points(history: list[dict[str, Any]], now: int) -> list[tuple[int, int]]:
    """The view's freshness lag over wall-clock time (pure): after each append committed at ``t`` with upper
    ``u`` the lag is ``t - (u - 1)`` and grows by one every millisecond until the next append (or ``now``).
    ``(time, lag)`` vertices of that sawtooth, oldest first."""
    appends = [
        p
        for p in history
        if p.get("operation") == "append" and not p.get("foreign") and p.get("committed_ms") and p["upper"] > 0
    ]
    pts: list[tuple[int, int]] = []
    for i, p in enumerate(appends):
        t, final = int(p["committed_ms"]), int(p["upper"]) - 1
        end = int(appends[i + 1]["committed_ms"]) if i + 1 < len(appends) else max(now, t)
        pts += [(t, t - final), (end, end - final)]
    return pts


def lag_chart(history: list[dict[str, Any]], *, max_lag_ms: int | None, now: int, width: int = 900) -> str:
    """Freshness lag over time (a sawtooth: it drops at each append and grows until the next), with the view's
    ``max_lag`` as a dashed line; the x axis is real time (UTC), the y axis a duration."""
    pts = lag_points(history, now)
    if not pts:
        return '<p class="muted" id="lag-chart">No refreshes yet.</p>'
    left, right, top, height = 70, 14, 20, 204
    bottom = height - 44
    axis = TimeAxis(pts[0][0], pts[-1][0], left, width - right)
    top_lag = max(max(v for _, v in pts), max_lag_ms or 0, 1)

    def y(v: int) -> float:
        return bottom - (bottom - top) * max(0, v) / top_lag

    d = "M" + " L".join(f"{axis.x(t):.1f},{y(v):.1f}" for t, v in pts)
    parts = [
        f'<svg id="lag-chart" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="freshness lag over time">',
        f'<text x="{left}" y="{top - 4}">freshness lag (now {esc(format_duration(pts[-1][1]))})</text>',
        f'<text x="{left - 6}" y="{bottom + 4:.1f}" text-anchor="end">0</text>',
        f'<text x="{left - 6}" y="{top + 8:.1f}" text-anchor="end">{esc(format_duration(top_lag))}</text>'
        if bottom - top > 24
        else "",
        f'<path class="lag" d="{d}" fill="none" stroke="#2f74c0" stroke-width="2"/>',
    ]
    for t, v in pts[::2]:  # each append
        parts.append(
            f'<circle class="lag-point" cx="{axis.x(t):.1f}" cy="{y(v):.1f}" r="3" fill="#2f74c0" '
            f'data-time="{t}" data-lag-ms="{v}"><title>{esc(short_time(t))}: lag {esc(format_duration(v))}'
            f"</title></circle>"
        )
    if max_lag_ms is not None:  # its label above the plot (where no line is drawn), a dashed key beside it
        key = width - right - 8 * (9 + len(format_duration(max_lag_ms)))
        parts.append(
            f'<line class="max-lag" data-max-lag="{max_lag_ms}" x1="{left}" x2="{width - right}" '
            f'y1="{y(max_lag_ms):.1f}" y2="{y(max_lag_ms):.1f}" stroke="#b3261e" stroke-dasharray="6 4"/>'
            f'<line x1="{key - 26}" x2="{key - 4}" y1="{top - 8}" y2="{top - 8}" stroke="#b3261e" '
            f'stroke-dasharray="6 4"/><text class="max-lag-label" x="{width - right}" y="{top - 4}" '
            f'text-anchor="end" fill="#b3261e">max_lag {esc(format_duration(max_lag_ms))}</text>'
        )
    parts.append(axis.svg(bottom))
    parts.append("</svg>")
    return "".join(parts)


def refresh_chart(history: list[dict[str, Any]], *, width: int = 900) -> str:
    """Refresh history: per append (oldest first) rows added (up) and retracted (down), bytes written and
    duration, coloured by mode. One ``<g class="refresh">`` per refresh, its values in ``data-*``."""
    refreshes = [p for p in history if p.get("operation") == "append" and not p.get("foreign")]
    if not refreshes:
        return '<p class="muted" id="refresh-chart">No refreshes yet.</p>'
    left, right, panel, gap = 70, 10, 90, 26
    # a real time axis of refresh times (a gap in time is a gap here); bars as wide as the closest pair allows
    axis = TimeAxis(refreshes[0]["refresh_time"], refreshes[-1]["refresh_time"], left + 16, width - right - 16)
    xs = [axis.x(p["refresh_time"]) for p in refreshes]
    closest = min((b - a for a, b in zip(xs, xs[1:]) if b > a), default=width)
    bar = max(2.0, min(28.0, closest * 0.7))
    max_rows = max(1, max(max(p["rows_added"], p["rows_retracted"]) for p in refreshes))
    max_bytes = max(1, max(p["bytes"] for p in refreshes))
    max_dur = max(1, max(p.get("duration_ms") or 0 for p in refreshes))
    top_rows, top_bytes, top_dur = 18, 18 + 2 * panel + gap, 18 + 3 * panel + 2 * gap
    mid = top_rows + panel  # the rows panel is two panels high: added above the line, retracted below
    height = top_dur + panel + 44
    parts = [
        f'<svg id="refresh-chart" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="refresh history">'
    ]
    for y, label in (
        (top_rows - 6, f"rows added (up, max {max_rows}) / retracted (down)"),
        (top_bytes - 6, f"bytes written (max {human_bytes(max_bytes)})"),
        (top_dur - 6, f"duration, mint to commit (max {format_duration(max_dur)})"),
    ):
        parts.append(f'<text x="{left}" y="{y}">{esc(label)}</text>')
    parts.append(f'<line class="axis" x1="{left}" x2="{width - right}" y1="{mid}" y2="{mid}"/>')
    for base in (top_bytes + panel, top_dur + panel):
        parts.append(f'<line class="axis" x1="{left}" x2="{width - right}" y1="{base}" y2="{base}"/>')
    for i, p in enumerate(refreshes):
        x = xs[i] - bar / 2
        colour = MODE_COLOURS.get(p["mode_kind"], MODE_COLOURS[""])
        up = panel * p["rows_added"] / max_rows
        down = panel * p["rows_retracted"] / max_rows
        hb = max(1.5, panel * p["bytes"] / max_bytes)  # a tick on the axis for zero: every refresh shows
        hd = max(1.5, panel * (p.get("duration_ms") or 0) / max_dur)
        if up == down == 0:
            up = 1.5
        tip = (
            f"v{p['version']} refresh at {format_time(p['refresh_time'])}: {mode_label(p['mode']) or p['mode']}, "
            f"+{p['rows_added']} -{p['rows_retracted']} rows, {human_bytes(p['bytes'])}, "
            f"{format_duration(p.get('duration_ms') or 0)}"
        )
        parts.append(
            f'<g class="refresh" data-version="{p["version"]}" data-refresh-time="{p["refresh_time"]}" '
            f'data-mode="{esc(p["mode"])}" data-mode-kind="{esc(p["mode_kind"])}" data-rows-added="{p["rows_added"]}" '
            f'data-rows-retracted="{p["rows_retracted"]}" data-bytes="{p["bytes"]}" '
            f'data-duration-ms="{"" if p.get("duration_ms") is None else p["duration_ms"]}" fill="{colour}">'
            f"<title>{esc(tip)}</title>"
            f'<rect class="added" x="{x:.1f}" y="{mid - up:.1f}" width="{bar:.1f}" height="{up:.1f}"/>'
            f'<rect class="retracted" x="{x:.1f}" y="{mid:.1f}" width="{bar:.1f}" height="{down:.1f}" opacity="0.55"/>'
            f'<rect class="bytes" x="{x:.1f}" y="{top_bytes + panel - hb:.1f}" width="{bar:.1f}" height="{hb:.1f}"/>'
            f'<rect class="duration" x="{x:.1f}" y="{top_dur + panel - hd:.1f}" width="{bar:.1f}" height="{hd:.1f}"/>'
            f"</g>"
        )
    parts.append(axis.svg(top_dur + panel + 2, label="UTC, refresh time"))
    parts.append(f'<text x="{left - 6}" y="{mid + 4}" text-anchor="end">0</text></svg>')
    return "".join(parts)


def frontier_chart(history: list[dict[str, Any]], *, width: int = 900, height: int = 234) -> str:
    """since and upper after each commit (oldest first, a step at each commit's time on a real UTC time axis),
    one ``<circle class="point">`` per commit and frontier, its value in ``data-*``."""
    pts = history
    uppers = [p["upper"] for p in pts if p["upper"] > 0]
    if not pts or not uppers:
        return '<p class="muted" id="frontier-chart">No frontiers yet.</p>'
    left, right, top, bottom = 150, 14, 14, 44
    # the y axis spans the data (the uppers, and a since among them), not from as_of: steps minutes apart show
    lo, hi = min(uppers), max(uppers)
    lo = min([lo] + [p["since"] for p in pts if p["since"] > 0 and p["since"] >= lo - (hi - lo)])
    ticks = time_ticks(lo, hi, max_ticks=max(2, (height - top - bottom) // 30))
    y0, y1 = min(ticks[0], lo), max(ticks[-1], hi)
    span_y = max(1, y1 - y0)
    # a real time axis of commit times when every commit has one (else one step per commit, as before)
    times = [t for p in pts if isinstance(t := p.get("committed_ms"), int)]
    axis = TimeAxis(min(times), max(times), left, width - right) if len(times) == len(pts) else None
    step = (width - left - right) / max(1, len(pts) - 1)

    def sx(i: int) -> float:
        if axis is not None:
            return axis.x(int(pts[i]["committed_ms"]))
        return left + step * i if len(pts) > 1 else (left + width - right) / 2

    def sy(v: int) -> float:
        return float(top + (height - top - bottom) * (1 - (max(v, y0) - y0) / span_y))

    parts = [
        f'<svg id="frontier-chart" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="since and upper after each commit">'
    ]
    for v in ticks:
        parts.append(
            f'<line class="grid" x1="{left}" x2="{width - right}" y1="{sy(v):.1f}" y2="{sy(v):.1f}"/>'
            f'<text class="ytick" data-tick="{v}" x="{left - 6}" y="{sy(v) + 4:.1f}" text-anchor="end">'
            f"{esc(short_time(v))}</text>"
        )
    below = [p["since"] for p in pts if p["since"] < y0]
    if below:  # a since before the axis (as_of, typically): drawn on its lower edge, its value said there
        parts.append(
            f'<text class="since-below" data-since="{below[-1]}" x="{left + 4}" y="{sy(y0) - 4:.1f}" fill="#b3261e">'
            f"since {esc(short_time(below[-1]))} (below the axis)</text>"
        )
    for key, colour in (("upper", "#2f74c0"), ("since", "#b3261e")):
        d = [f"M{sx(0):.1f},{sy(pts[0][key]):.1f}"] + [f"H{sx(i):.1f}V{sy(p[key]):.1f}" for i, p in enumerate(pts)][1:]
        parts.append(f'<path class="{key}" d="{" ".join(d)}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for i, p in enumerate(pts):
            parts.append(
                f'<circle class="point {key}" data-version="{p["version"]}" data-{key}="{p[key]}" '
                f'cx="{sx(i):.1f}" cy="{sy(p[key]):.1f}" r="3" fill="{colour}">'
                f"<title>v{p['version']} {esc(p['operation'])} at {esc(p.get('committed') or '')}: "
                f"{key} {esc(format_time(p[key]))}</title></circle>"
            )
    if axis is not None:
        parts.append(axis.svg(height - bottom + 4, label="UTC, commit time"))
    else:
        parts.append(
            f'<text x="{left}" y="{height - 8}">v{pts[0]["version"]} {esc(pts[0].get("committed") or "")}</text>'
        )
        if len(pts) > 1:
            parts.append(
                f'<text x="{width - right}" y="{height - 8}" text-anchor="end">v{pts[-1]["version"]} '
                f"{esc(pts[-1].get('committed') or '')}</text>"
            )
    parts.append("</svg>")
    return "".join(parts)
