"""Small helpers the UI plugin's pages share (pure): escaping, sizes, mode colours, and times, relative ones with
the absolute UTC time on hover."""

from __future__ import annotations

import html

from mvsink.times import format_time

MODE_COLOURS = {"incremental": "#2f74c0", "full": "#e0862b", "unchanged": "#9aa3ad", "": "#6b4fa8"}

SECOND, MINUTE, HOUR, DAY = 1_000, 60_000, 3_600_000, 86_400_000


def esc(value: object) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def human_bytes(n: int | None) -> str:
    if n is None:
        return "-"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def span(ms: int) -> str:
    """A duration as people say it on a page: ``45 s``, ``3 min``, ``2 h 5 min``, ``5 h``, ``2 d 3 h``, ``20 d``
    (rounded down; a second unit only while it still matters)."""
    ms = abs(int(ms))
    if ms < MINUTE:
        return f"{ms // SECOND} s"
    if ms < HOUR:
        return f"{ms // MINUTE} min"
    if ms < DAY:
        h, m = divmod(ms // MINUTE, 60)
        return f"{h} h {m} min" if m and h < 10 else f"{h} h"
    d, h = divmod(ms // HOUR, 24)
    return f"{d} d {h} h" if h and d < 3 else f"{d} d"


def relative(ms: int, now: int) -> str:
    """``3 min ago`` or ``in 2 min`` (``just now`` within a second)."""
    delta = now - ms
    if abs(delta) < SECOND:
        return "just now"
    return f"{span(delta)} ago" if delta > 0 else f"in {span(delta)}"


def when_html(ms: int | None, now: int | None, *, key: str, before: str = "", empty: str = "-") -> str:
    """A time as ``<time>``: relative to ``now`` (``before`` ahead of it, e.g. ``next``), the absolute UTC time on
    hover (``title``) and in ``datetime``, the epoch milliseconds in ``data-<key>``."""
    if ms is None:
        return f'<span class="muted" data-{key}="">{esc(empty)}</span>'
    iso = format_time(ms)
    text = relative(ms, now) if now is not None else iso
    lead = f"{esc(before)} " if before else ""
    return f'<time class="rel" datetime="{esc(iso)}" title="{esc(iso)}" data-{key}="{int(ms)}">{lead}{esc(text)}</time>'


def iso_html(ms: int) -> str:
    """ISO-8601 UTC text that may wrap between the date and the time (the text itself is unchanged)."""
    date, _, clock = format_time(ms).partition("T")
    return f"{esc(date)}<wbr>T{esc(clock)}"


def short_time(ms: int) -> str:
    """``2026-01-01 02:00`` (UTC; seconds when they are not zero): an axis label."""
    text = format_time(ms)  # 2026-01-01T02:00:00.000Z
    date, clock = text[:10], text[11:19]
    return f"{date} {clock[:5] if clock.endswith(':00') else clock}"
