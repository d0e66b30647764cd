"""Read-time checks: a read before as_of, at or past the upper, or before since fails naming the oldest readable time."""

from __future__ import annotations

import pytest

from mvsink.core.frontier import Frontier, check_read_time
from mvsink.exceptions import ReadTimeError
from mvsink.times import format_time

pytestmark = pytest.mark.unit


HOUR = 3_600_000


BASE = 1_767_225_600_000


def test_read_time_checks_name_the_oldest_readable_time():
    fr = Frontier(upper=BASE + 5 * HOUR, since=BASE + 2 * HOUR, version=3)
    assert check_read_time("v", fr, BASE, None) == BASE + 5 * HOUR - 1
    assert check_read_time("v", fr, BASE, BASE + 2 * HOUR) == BASE + 2 * HOUR
    with pytest.raises(ReadTimeError) as err:
        check_read_time("v", fr, BASE, BASE + HOUR)
    assert f"oldest readable time is {format_time(BASE + 2 * HOUR)} ({BASE + 2 * HOUR})" in str(err.value)
    with pytest.raises(ReadTimeError, match="at or past the upper"):
        check_read_time("v", fr, BASE, BASE + 5 * HOUR)
    with pytest.raises(ReadTimeError, match="before the view's as_of"):
        check_read_time("v", Frontier(upper=BASE + 5 * HOUR, since=0, version=3), BASE, BASE - 1)
