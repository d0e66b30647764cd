"""What kind of change a batch's sources went through, from their Delta logs and the Parquet footers alone
(:func:`mvsink.write.driver.change_kind`): updates only (the untouched-columns check goes first), rows added or
removed without a change data feed (TPC-H's RF1 and RF2: the check is skipped, it could not find nothing to write),
anything else. Real delta-rs tables."""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from mvsink.core.batch import BatchDescription, SourceRead
from mvsink.write.driver import OTHER, RESIZED, UPDATES, change_kind

pytestmark = pytest.mark.unit


def _desc(sources: dict[str, tuple[str, int]], base: dict[str, int]) -> BatchDescription:
    return BatchDescription(
        view="v",
        target="/nowhere/v",
        lower=0,
        upper=3_600_000,
        refresh_time=3_600_000,
        table_version=-1,
        sources=tuple(SourceRead(name=n, kind="path", path=p, version=v) for n, (p, v) in sources.items()),
        run_id="manual__x",
        batch_id="v__0_3600000__manual-x-12345678",
        definition="0123456789abcdef",
        base_versions=base,
    )


def _table(path: str, n: int) -> str:
    write_deltalake(path, pa.table({"k": pa.array(range(n), pa.int64()), "x": pa.array([1] * n, pa.int64())}))
    return path


def test_updates_appends_and_deletes_are_told_apart(tmp_path) -> None:
    a, b = _table(str(tmp_path / "a"), 10), _table(str(tmp_path / "b"), 10)
    DeltaTable(a).update(updates={"x": "2"}, predicate="k < 3")  # a copy-on-write rewrite: as many rows (v1)
    assert change_kind(_desc({"a": (a, 1), "b": (b, 0)}, {"a": 0, "b": 0})) == UPDATES
    write_deltalake(b, pa.table({"k": pa.array([99], pa.int64()), "x": pa.array([1], pa.int64())}), mode="append")
    assert change_kind(_desc({"a": (a, 1), "b": (b, 1)}, {"a": 0, "b": 0})) == RESIZED  # (b gained a row)
    DeltaTable(a).delete("k = 5")  # (v2: a rewrite holding one row fewer)
    assert change_kind(_desc({"a": (a, 2)}, {"a": 1})) == RESIZED
    assert change_kind(_desc({"a": (a, 2)}, {"a": 0})) == RESIZED  # (an update, then a delete)
    assert change_kind(_desc({"a": (a, 1)}, {"a": 1})) == OTHER  # (nothing changed)
    assert change_kind(_desc({"a": (a, 1)}, None)) == OTHER  # (no earlier refresh)
