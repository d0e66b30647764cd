"""A first build is told from the table's log alone (issue 38): ``desired - persisted = desired`` when no active
file can hold an update below the batch's ``lower``."""

from __future__ import annotations

import pyarrow as pa
import pytest

from mvsink.incremental.modes import full

pytestmark = pytest.mark.unit


def test_a_table_with_nothing_below_lower_is_a_first_build():
    """The log alone tells a first build: no file, files of no rows, or files whose ``_mv_time`` starts at or past
    ``lower``; a file without those statistics may hold updates."""
    no = full.no_updates_before
    assert no(pa.table({"num_records": pa.array([], pa.int64())}), lower=5)
    assert no(pa.table({"num_records": [0, 0]}), lower=5)
    assert no(pa.table({"num_records": [3, 0], "min._mv_time": [5, None]}), lower=5)
    assert not no(pa.table({"num_records": [3], "min._mv_time": [4]}), lower=5)
    assert not no(pa.table({"num_records": [3], "min._mv_time": [None]}), lower=5)
    assert not no(pa.table({"num_records": [None], "min._mv_time": [9]}), lower=5)
    assert not no(pa.table({"num_records": [3]}), lower=5)
