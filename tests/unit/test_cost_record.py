"""The per-refresh cost record: the write step's notes, the commit info's mvsink.cost, the bounded history file."""

from __future__ import annotations

import json

import pytest

from mvsink.core import costrecord
from mvsink.core.commitinfo import CommitInfo
from mvsink.core.costrecord import (
    CostRecord,
    add_to_history,
    commit_cost,
    history_path,
    note,
    note_change,
    noting,
    read_history,
    record_of,
)

pytestmark = pytest.mark.unit


def _record(version: int, *, mode: str = "incremental:aggregate", seconds: float = 1.0) -> CostRecord:
    return CostRecord(
        version=version,
        at=1_700_000_000_000 + version,
        mode=mode,
        engine="spark",
        write_s=seconds,
        wall_s=seconds + 0.5,
        spark_jobs=4,
        groups=7,
        phases={"plan": 0.1, "corrections": 0.5, "stage": 0.4},
        changes={"orders": {"bytes": 1000, "files": 1}},
        reads={"orders": {"bytes": 1000, "files": 1}, "lineitem": {"bytes": 9000, "files": 3}},
        guard={"terms_bytes": 9000, "full_bytes": 20000, "table_bytes": 500},
        estimates={"incremental:aggregate/spark": 0.9, "full": 2.0},
        picked="incremental:aggregate/spark",
        basis="prior",
    )


def test_notes_are_collected_only_inside_noting():
    note(groups=3)  # outside: dropped, no error
    note_change("orders", bytes_changed=10, files=1)
    with noting() as notes:
        note(groups=3, guard={"terms_bytes": 5})
        note_change("orders", bytes_changed=1200, files=2)
        note_change("lineitem", bytes_changed=800, files=1)
    assert notes == {
        "groups": 3,
        "guard": {"terms_bytes": 5},
        "changes": {"orders": {"bytes": 1200, "files": 2}, "lineitem": {"bytes": 800, "files": 1}},
    }
    assert costrecord.current_notes() is None


def test_commit_cost_round_trips_through_the_commit_info():
    cost = commit_cost({"groups": 2}, engine="duckdb", spark_jobs=3, phases={"plan": 0.123456, "stage": 1.0})
    info = CommitInfo(operation="append", view="v", mode="incremental:aggregate", cost=cost, write_ms=1500)
    meta = info.to_metadata()
    assert json.loads(meta["mvsink.cost"]) == {
        "groups": 2,
        "engine": "duckdb",
        "spark_jobs": 3,
        "phases": {"plan": 0.1235, "stage": 1.0},
    }
    back = CommitInfo.from_history(meta)
    assert back is not None and back.cost == info.cost
    rec = record_of(back.cost, version=4, at=1, mode=back.mode or "", write_ms=1500, duration_ms=None, reads={})
    assert (rec.engine, rec.spark_jobs, rec.groups, rec.write_s, rec.wall_s) == ("duckdb", 3, 2, 1.5, None)


def test_an_old_commit_without_cost_still_reads():
    meta = CommitInfo(operation="append", view="v", mode="full").to_metadata()
    assert "mvsink.cost" not in meta
    back = CommitInfo.from_history(meta)
    assert back is not None and back.cost is None
    rec = record_of(back.cost, version=1, at=1, mode="full", write_ms=None, duration_ms=None, reads=None)
    assert (rec.engine, rec.write_s, rec.changes, rec.guard) == ("spark", 0.0, {}, {})


def test_history_round_trip(tmp_path):
    target = str(tmp_path / "t")
    assert read_history(target) == []  # no file: no history
    for v in (1, 2, 3):
        assert add_to_history(target, _record(v, seconds=v / 10))
    got = read_history(target)
    assert got == [_record(1, seconds=0.1), _record(2, seconds=0.2), _record(3, seconds=0.3)]
    assert (tmp_path / "t" / "_mv_history" / "refreshes.jsonl").read_text().count("\n") == 3
    assert got[0].change_bytes == 1000 and got[0].read_bytes == 10000


def test_history_is_bounded_and_a_retried_version_adds_nothing(tmp_path):
    target = str(tmp_path / "t")
    for v in range(1, 9):
        add_to_history(target, _record(v), keep=5)
    add_to_history(target, _record(8, seconds=99.0), keep=5)  # the same commit recorded again
    got = read_history(target)
    assert [r.version for r in got] == [4, 5, 6, 7, 8]
    assert got[-1].write_s == 1.0


def test_a_corrupt_history_is_no_history_and_is_rewritten(tmp_path):
    target = str(tmp_path / "t")
    path = tmp_path / "t" / "_mv_history" / "refreshes.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(b'\x00\xffnot json\n{"format": 1}\n[1, 2]\n')
    assert read_history(target) == []
    assert add_to_history(target, _record(5))
    assert [r.version for r in read_history(target)] == [5]
    # a line of another format (a newer writer's) is left out, the others read
    with path.open("a") as f:
        f.write(json.dumps({**_record(6).to_dict(), "format": 99}) + "\n")
        f.write(json.dumps(_record(7).to_dict()) + "\n")
    assert [r.version for r in read_history(target)] == [5, 7]


def test_a_history_that_cannot_be_written_does_not_raise(tmp_path):
    blocker = tmp_path / "t" / "_mv_history"
    blocker.parent.mkdir(parents=True)
    blocker.write_text("a file where the folder should be")
    assert add_to_history(str(tmp_path / "t"), _record(1)) is False
    assert read_history(str(tmp_path / "t")) == []
    assert str(history_path("s3://lake/v")) == "s3://lake/v/_mv_history/refreshes.jsonl"
