"""CommitInfo: the mvsink.* commit-info format, decoded from real commits and encoded byte for byte."""

from __future__ import annotations

import json

import pytest

from mvsink.core.batch import BatchDescription, SourceRead
from mvsink.core.commitinfo import CONTENT_PRESERVING, META, CommitInfo

from .legacy_commits import COMMIT_INFO_LINES

pytestmark = pytest.mark.unit


def _entry(version: int) -> dict:
    return json.loads(COMMIT_INFO_LINES[version])["commitInfo"]


def _ours(entry: dict) -> dict[str, str]:
    return {k: v for k, v in entry.items() if k.startswith(META)}


@pytest.mark.parametrize("version", sorted(COMMIT_INFO_LINES))
def test_commits_written_before_commitinfo_decode_and_encode_back_byte_for_byte(version):
    entry = _entry(version)
    info = CommitInfo.from_history(entry)
    assert info is not None and not info.extra  # every key of those commits is a known field
    assert info.to_metadata() == _ours(entry)


def test_decoded_fields_of_each_kind_of_commit():
    create, bump, full, incremental, unchanged, compact, evolve, checked = (
        CommitInfo.from_history(_entry(v)) for v in range(8)
    )
    assert create == CommitInfo(operation="create", view="v")
    assert bump == CommitInfo(
        operation="bump",
        view="v",
        lower=1767225600000,
        upper=1767229200001,
        refresh_time=1767229200000,
        run_id="cli-d43391798850",
        batch_id="v__1767225600000_1767229200001__cli-d43391798850-36a2ea19",
        from_upper=0,
    )
    assert full is not None and full.operation == "append" and full.mode == "full"
    assert full.sources == {"orders": 0} and full.source_ids == {"orders": "8962537d-fe1a-4a8a-af77-0baa23eeaf73"}
    assert (full.rows_added, full.rows_retracted, full.bytes, full.definition) == (3, 0, 1309, "10d5658bbc0485bb")
    assert full.checks is None  # a view without checks records no counts
    assert incremental is not None and incremental.mode == "incremental"
    assert incremental.mode_reason == "from the changes of orders"
    assert unchanged is not None and (unchanged.mode, unchanged.mode_reason) == ("unchanged", "no source changed")
    assert compact == CommitInfo(
        operation="compact",
        view="v",
        since=1767236400000,
        previous_since=0,
        upper_seen=1767240000001,
        run_id="compact-6b6c1e04bbe2",
        rows_before=4,
    )
    assert evolve is not None and evolve.operation == "evolve" and evolve.sources is None
    assert checked is not None and checked.checks == {"positive_qty": {"action": "error", "rows": 1}}
    kinds = [i.operation for i in (create, bump, full, compact, evolve) if i is not None]
    assert [k in CONTENT_PRESERVING for k in kinds] == [True, True, False, True, True]
    assert [i.content_preserving for i in (create, full) if i is not None] == [True, False]


def _desc(**kw) -> BatchDescription:
    return BatchDescription(
        view="v",
        target="/d/v",
        lower=1767225600000,
        upper=1767229200001,
        refresh_time=1767229200000,
        table_version=1,
        sources=(
            SourceRead(
                name="orders", kind="path", path="/d/o", version=0, table_id="8962537d-fe1a-4a8a-af77-0baa23eeaf73"
            ),
        ),
        run_id="cli-d43391798850",
        batch_id="v__1767225600000_1767229200001__cli-d43391798850-36a2ea19",
        definition="10d5658bbc0485bb",
        **kw,
    )


def test_commits_built_for_a_batch_match_what_earlier_versions_wrote():
    append = CommitInfo.for_batch(
        _desc(),
        "append",
        rows_added=3,
        rows_retracted=0,
        bytes=1309,
        mode="full",
        mode_reason="no earlier refresh of this definition to start from",
    )
    assert append.to_metadata() == _ours(_entry(2))
    bump = CommitInfo.for_batch(_desc(), "bump", from_upper=0)
    assert bump.to_metadata() == _ours(_entry(1))
    evolve = CommitInfo.for_batch(_desc(), "evolve")
    assert set(evolve.to_metadata()) == {
        META + k for k in ("operation", "view", "lower", "upper", "refresh_time", "run_id", "batch_id")
    }


def test_a_view_source_records_no_table_id_as_null():
    desc = _desc()
    up = SourceRead(name="up", kind="view", path="/d/up", version=3, upper=10, view="up")
    meta = CommitInfo.for_batch(BatchDescription(**{**desc.to_dict(), "sources": (up,)}), "append").to_metadata()
    assert meta[META + "sources"] == '{"up": 3}' and meta[META + "source_ids"] == '{"up": null}'


def test_foreign_commits_decode_to_none():
    assert CommitInfo.from_history({"version": 3, "operation": "DELETE", "timestamp": 1}) is None
    assert CommitInfo.from_history({"mvsink.view": '"v"'}) is None  # keys of ours but no operation


def test_unknown_keys_are_kept_and_written_back_and_raw_values_survive():
    entry = {
        "mvsink.operation": '"append"',
        "mvsink.future_key": '{"a": [1, 2]}',
        "mvsink.note": "not json",
        "operation": "WRITE",
    }
    info = CommitInfo.from_history(entry)
    assert info is not None and info.extra == {"future_key": {"a": [1, 2]}, "note": "not json"}
    assert info.to_metadata() == {
        "mvsink.operation": '"append"',
        "mvsink.future_key": '{"a": [1, 2]}',
        "mvsink.note": '"not json"',
    }
    assert info.to_dict() == {"operation": "append", "future_key": {"a": [1, 2]}, "note": "not json"}
