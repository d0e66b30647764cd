"""Check results on read: error rows fail, are included or ignored (split_errors); counts as a summary shows them."""

from __future__ import annotations

import pyarrow as pa
import pytest

from mvsink.columns import ERROR
from mvsink.core.checks import format_counts
from mvsink.exceptions import MvSinkError, ViewErrorsError
from mvsink.readers.arrow import split_errors


def _contents(errors: list[str | None]) -> pa.Table:
    return pa.table({"id": list(range(len(errors))), ERROR: pa.array(errors, pa.string())})


@pytest.mark.unit
def test_split_errors_fail_include_ignore():
    t = _contents([None, "positive_qty", None, "known_status", "positive_qty"])
    with pytest.raises(ViewErrorsError) as ei:
        split_errors("v", t, at="2026-01-01T00:00:00Z")
    msg = str(ei.value)
    assert "view v at 2026-01-01T00:00:00Z: 3 row(s) failed error checks" in msg
    assert "'positive_qty' (2 row(s)), 'known_status' (1 row(s))" in msg
    assert "e.g. row (id=1) failed check 'positive_qty'" in msg and "errors='include'" in msg
    assert ei.value.counts == {"positive_qty": 2, "known_status": 1} and ei.value.sample == {"id": 1}
    assert split_errors("v", t, "include").equals(t)
    ok = split_errors("v", t, "ignore")
    assert ok.column_names == ["id"] and ok.column("id").to_pylist() == [0, 2]
    clean = _contents([None, None])
    assert split_errors("v", clean).column_names == ["id"]
    plain = pa.table({"id": [1]})
    assert split_errors("v", plain).equals(plain)
    assert split_errors("v", plain, "include").column(ERROR).to_pylist() == [None]
    with pytest.raises(MvSinkError, match="errors='loud' is not one of"):
        split_errors("v", plain, "loud")


@pytest.mark.unit
def test_format_counts():
    assert (
        format_counts(
            {
                "a": {"action": "error", "rows": 2},
                "b": {"action": "drop", "rows": 1},
                "c": {"action": "warn", "rows": 0},
            }
        )
        == "a: 2 error row(s), b: 1 dropped, c: 0 warned"
    )
