"""retain_history: the view-file field, and the compaction rule it drives (target since, when it is due)."""

from __future__ import annotations

import pytest

from mvsink.core.frontier import Frontier
from mvsink.definitions.view import DEFAULT_RETAIN_HISTORY_MS
from mvsink.definitions.viewfile import parse_view
from mvsink.exceptions import ViewDefinitionError
from mvsink.maintenance.compaction import DUE_FRACTION, is_due, target_since

pytestmark = pytest.mark.unit


HOUR = 3_600_000


DAY = 24 * HOUR


BASE = 1_767_225_600_000


VIEW = """
name: v
query: SELECT a FROM orders
sources: {orders: orders}
target: out
as_of: 2026-01-01T00:00:00Z
"""


def view(extra: str = ""):
    return parse_view(VIEW + extra, file="views/v.yaml", data_root=__import__("pathlib").Path("/data"))


@pytest.mark.parametrize(
    "text, ms",
    [("7d", 7 * DAY), ("12h", 12 * HOUR), ("30m", 30 * 60_000), ("1w", 7 * DAY), ("90s", 90_000), ("3600000", HOUR)],
)
def test_retain_history_durations(text, ms):
    assert view(f"retain_history: {text}\n").retain_history_ms == ms


def test_retain_history_default_is_a_bounded_window_and_forever_disables_it():
    assert view().retain_history_ms == DEFAULT_RETAIN_HISTORY_MS == 7 * DAY
    assert view("retain_history: forever\n").retain_history_ms is None


@pytest.mark.parametrize("bad", ["7 days", "-1d", "0h", "[1d]", "soon", "1.5h"])
def test_retain_history_invalid_names_field_and_fix(bad):
    with pytest.raises(ViewDefinitionError) as err:
        view(f"retain_history: {bad}\n")
    msg = str(err.value)
    assert "field 'retain_history'" in msg and "Fix: " in msg and "retain_history: 7d" in msg and "forever" in msg


def test_retain_history_does_not_change_the_definition_hash():
    assert view("retain_history: 1h\n").definition_hash() == view().definition_hash()


def test_target_since_and_due_rule():
    v = view("retain_history: 4h\n")
    # history behind the newest final time is kept for retain_history
    fr = Frontier(upper=BASE + 10 * HOUR + 1, since=0, version=5)
    assert target_since(v, fr) == BASE + 6 * HOUR
    assert is_due(v, fr, target_since(v, fr))
    # held back by a view that reads this one and still needs an older time
    assert target_since(v, fr, (BASE + 2 * HOUR, "down")) == BASE + 2 * HOUR
    # due only when since advances by at least retain_history / DUE_FRACTION
    step = 4 * HOUR // DUE_FRACTION
    fr2 = Frontier(upper=BASE + 10 * HOUR + 1, since=BASE + 6 * HOUR - step + 1, version=6)
    assert target_since(v, fr2) == BASE + 6 * HOUR and not is_due(v, fr2, target_since(v, fr2))
    fr3 = Frontier(upper=BASE + 10 * HOUR + 1, since=BASE + 6 * HOUR - step, version=6)
    assert is_due(v, fr3, target_since(v, fr3))
    # nothing to do: not enough history yet, since already there, or forever
    assert target_since(v, Frontier(upper=BASE + 3 * HOUR, since=0, version=1)) is None
    assert target_since(v, Frontier(upper=BASE + 10 * HOUR + 1, since=BASE + 6 * HOUR, version=7)) is None
    assert target_since(view("retain_history: forever\n"), fr) is None
    assert not is_due(v, fr, None)
