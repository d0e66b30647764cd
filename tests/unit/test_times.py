"""Unit tests of logical times: parse_time, format_time, to_datetime, parse_duration."""

from __future__ import annotations

import datetime as dt

import pytest

from mvsink.times import format_time, parse_duration, parse_time, to_datetime

pytestmark = pytest.mark.unit

JAN1 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
UTC = dt.UTC


@pytest.mark.parametrize(
    "value, expected",
    [
        (0, 0),
        (JAN1, JAN1),
        (-5, -5),
        ("0", 0),
        (str(JAN1), JAN1),
        (f"  {JAN1}\n", JAN1),
        ("-1000", -1000),
        ("2026-01-01T00:00:00Z", JAN1),
        ("2026-01-01T00:00:00z", JAN1),
        ("2026-01-01T00:00:00.123Z", JAN1 + 123),
        ("2026-01-01 00:00:00Z", JAN1),
        ("2026-01-01T02:00:00+02:00", JAN1),
        ("2025-12-31T22:00:00-02:00", JAN1),
        ("2026-01-01T00:00:00", JAN1),
        ("2026-01-01T00:00", JAN1),
        ("2026-01-01", JAN1),
        ("1970-01-01T00:00:00Z", 0),
        ("1969-12-31T23:59:59Z", -1000),
        (dt.datetime(2026, 1, 1), JAN1),
        (dt.datetime(2026, 1, 1, tzinfo=UTC), JAN1),
        (dt.datetime(2026, 1, 1, 2, tzinfo=dt.timezone(dt.timedelta(hours=2))), JAN1),
        (dt.datetime(2026, 1, 1, 0, 0, 0, 5000), JAN1 + 5),
        (dt.date(2026, 1, 1), JAN1),
    ],
)
def test_parse_time(value, expected):
    assert parse_time(value) == expected


@pytest.mark.parametrize("value", [True, False])
def test_parse_time_rejects_bool(value):
    with pytest.raises(ValueError) as ei:
        parse_time(value, what="as_of")
    assert str(ei.value) == f"as_of: expected a time, got {value!r}"


@pytest.mark.parametrize("value", ["yesterday", "", "2026-13-01", "2026-01-01T25:00:00Z", "1h", "12:00", "--1"])
def test_parse_time_rejects_garbage_strings(value):
    with pytest.raises(ValueError) as ei:
        parse_time(value, what="schedule.at")
    msg = str(ei.value)
    assert msg.startswith(f"schedule.at: {value!r} is not a time; ")
    assert "ISO-8601 such as 2026-01-31T12:00:00Z" in msg
    assert "integer epoch milliseconds" in msg


@pytest.mark.parametrize("value", [None, 1.5, [1], {"a": 1}, b"123"])
def test_parse_time_rejects_other_types(value):
    with pytest.raises(ValueError) as ei:
        parse_time(value)
    assert str(ei.value) == f"time: expected ISO-8601 or epoch milliseconds, got {value!r}"


@pytest.mark.parametrize(
    "ms, text",
    [
        (0, "1970-01-01T00:00:00.000Z"),
        (JAN1, "2026-01-01T00:00:00.000Z"),
        (JAN1 + 123, "2026-01-01T00:00:00.123Z"),
        (-1, "1969-12-31T23:59:59.999Z"),
    ],
)
def test_format_time(ms, text):
    assert format_time(ms) == text
    assert parse_time(text) == ms


@pytest.mark.parametrize("ms", [0, 1, 999, JAN1, JAN1 + 1, JAN1 + 999, 253_402_300_799_000])
def test_format_time_round_trip(ms):
    assert parse_time(format_time(ms)) == ms


@pytest.mark.parametrize("ms", [1_079_337_347_472, 541_169_507_341, 2_183_226_373_411])
def test_format_time_round_trip_float_precision(ms):
    # e.g. 2004-03-15T07:55:47.472Z parses to ...471 because timestamp()*1000 == ...471.9999
    assert parse_time(format_time(ms)) == ms


def test_to_datetime():
    assert to_datetime(JAN1 + 5) == dt.datetime(2026, 1, 1, 0, 0, 0, 5000, tzinfo=UTC)
    assert to_datetime(JAN1).tzinfo is UTC


@pytest.mark.parametrize(
    "value, expected",
    [
        ("250ms", 250),
        ("90s", 90_000),
        ("15m", 900_000),
        ("1h", 3_600_000),
        ("7d", 604_800_000),
        ("2w", 1_209_600_000),
        (" 3 h ", 10_800_000),
        ("01m", 60_000),
        (5000, 5000),
        (1, 1),
    ],
)
def test_parse_duration(value, expected):
    assert parse_duration(value) == expected


@pytest.mark.parametrize(
    "value",
    ["0s", "0", "10", "1H", "1.5h", "-1h", "1h30m", "", "h", "10 minutes", "1y", 0, -5, True, False, 1.5, None, [1]],
)
def test_parse_duration_invalid(value):
    with pytest.raises(ValueError) as ei:
        parse_duration(value, what="schedule.every")
    assert str(ei.value) == (
        f"schedule.every: {value!r} is not a duration; write a positive number with a unit "
        "ms, s, m, h, d or w, e.g. 15m or 1d"
    )
