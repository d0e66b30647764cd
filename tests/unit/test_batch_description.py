"""Batch descriptions and write reports: JSON round trips, and edited field types refused."""

from __future__ import annotations

import json

import pytest

from mvsink.core.batch import BatchDescription, SourceRead, StagedFile, WriteReport

pytestmark = pytest.mark.unit


def _desc(**kw) -> BatchDescription:
    base = dict(
        view="v",
        target="/data/views/v",
        lower=0,
        upper=3_600_000,
        refresh_time=3_600_000,
        table_version=-1,
        sources=(
            SourceRead(name="orders", kind="path", path="/data/orders", version=7, table_id="a1b2"),
            SourceRead(name="up", kind="view", path="/data/views/up", version=-1, upper=42, view="up"),
        ),
        run_id="manual__x",
        batch_id="v__0_3600000__manual-x-12345678",
        definition="0123456789abcdef",
    )
    return BatchDescription(**{**base, **kw})


@pytest.mark.parametrize(
    "kw", [{}, {"dry_run": True}, {"empty": True, "sources": ()}, {"base_versions": {"orders": 5}}]
)
def test_batch_description_json_round_trip(kw):
    d = _desc(**kw)
    text = d.to_json()
    assert (
        json.loads(text)["sources"][:1]
        == [
            {
                "name": "orders",
                "kind": "path",
                "path": "/data/orders",
                "version": 7,
                "upper": None,
                "view": None,
                "table_id": "a1b2",
            }
        ][: len(d.sources)]
    )
    back = BatchDescription.from_json(text)
    assert back == d
    assert isinstance(back.sources, tuple)
    assert BatchDescription.from_dict(d.to_dict()) == d


def test_batch_description_time():
    assert _desc().time == 3_599_999


@pytest.mark.parametrize(
    "files",
    [
        (),
        (
            StagedFile(path="batches/b/part-0.parquet", size=10, rows=2, stats="{}"),
            StagedFile(path="batches/b/part-1.parquet", size=20, rows=3, stats='{"numRecords": 3}'),
        ),
    ],
)
def test_write_report_json_round_trip(files):
    r = WriteReport(
        view="v",
        batch_id="b",
        lower=0,
        upper=10,
        status="staged",
        read_version=3,
        table_upper=0,
        schema="QUJD",
        rows_added=5,
        rows_retracted=1,
        bytes=30,
        files=files,
        seconds=1.25,
    )
    back = WriteReport.from_json(r.to_json())
    assert back == r
    assert isinstance(back.files, tuple)


def test_write_report_defaults_round_trip():
    r = WriteReport(
        view="v", batch_id="b", lower=0, upper=10, status="empty", read_version=-1, table_upper=0, schema=""
    )
    assert WriteReport.from_json(r.to_json()) == r


@pytest.mark.unit
@pytest.mark.parametrize(
    "field,value",
    [("lower", "0; DROP TABLE x"), ("upper", 1.5), ("dry_run", "false"), ("table_version", True), ("view", 3)],
)
def test_batch_description_refuses_edited_field_types(field, value):
    d = _desc().to_dict()
    d[field] = value
    with pytest.raises(ValueError, match=f"field '{field}'.*Fix: pass the description mint produced"):
        BatchDescription.from_dict(d)
    d = _desc().to_dict()
    d["sources"][0]["version"] = "7"
    with pytest.raises(ValueError, match="field 'version'"):
        BatchDescription.from_dict(d)
