"""The kept values of scalar subqueries (incremental/scalarcache.py): a value is found again only for the same
subquery over the same snapshots (path, version, table id) and Spark settings; a view source, a source of unknown
id, an unreadable or foreign file are misses; a dry run keeps nothing. Its use in a refresh is
tests/spark/test_partitioned_recompute.py's."""

from __future__ import annotations

import dataclasses
import json

import pytest

from mvsink.core.batch import SourceRead
from mvsink.incremental.scalarcache import FOLDER, ScalarCache
from mvsink.location import parse

pytestmark = pytest.mark.unit

TEXT = "SELECT AVG(c_acctbal) FROM customer WHERE c_acctbal > 0.00"
LIT = "CAST('5003.685765' AS DECIMAL(19,6))"
SETTINGS = [("spark.sql.ansi.enabled", "true"), ("spark.sql.session.timeZone", "UTC")]


def _reads(tmp_path, *, version: int = 3, table_id: str | None = "id-1", kind: str = "path") -> list[SourceRead]:
    return [
        SourceRead(
            name="customer",
            kind=kind,
            path=parse(str(tmp_path / "src" / "customer")),
            version=version,
            table_id=table_id,
        ),  # fmt: skip
        SourceRead(name="orders", kind="path", path=parse(str(tmp_path / "src" / "orders")), version=9, table_id="o"),
    ]


def _cache(tmp_path, **kw) -> ScalarCache:
    write = kw.pop("write", True)
    settings = kw.pop("settings", SETTINGS)
    return ScalarCache(parse(str(tmp_path / "view")), _reads(tmp_path, **kw), settings, write=write)


def test_a_kept_value_is_found_for_the_same_snapshots_only(tmp_path):
    _cache(tmp_path).put(TEXT, ["customer"], LIT)
    assert _cache(tmp_path).get(TEXT, ["CUSTOMER"]) == LIT  # (names casefolded)
    assert _cache(tmp_path, version=4).get(TEXT, ["customer"]) is None  # the source moved on
    assert _cache(tmp_path, table_id="id-2").get(TEXT, ["customer"]) is None  # re-created at the same path
    assert _cache(tmp_path, settings=[("spark.sql.ansi.enabled", "false")]).get(TEXT, ["customer"]) is None
    assert _cache(tmp_path).get(TEXT + " AND 1 = 1", ["customer"]) is None  # another subquery
    # (orders is not read by the subquery: its version is not in the key)
    other = ScalarCache(
        parse(str(tmp_path / "view")),
        [_reads(tmp_path)[0], dataclasses.replace(_reads(tmp_path)[1], version=10)],
        SETTINGS,
    )
    assert other.get(TEXT, ["customer"]) == LIT


def test_one_file_per_subquery_replaced_when_its_source_moves_on(tmp_path):
    _cache(tmp_path).put(TEXT, ["customer"], LIT)
    _cache(tmp_path, version=4).put(TEXT, ["customer"], "CAST('1.000000' AS DECIMAL(19,6))")
    files = list((tmp_path / "view" / FOLDER).glob("*.json"))
    assert len(files) == 1 and json.loads(files[0].read_text())["text"] == TEXT
    assert _cache(tmp_path, version=4).get(TEXT, ["customer"]) == "CAST('1.000000' AS DECIMAL(19,6))"
    assert _cache(tmp_path).get(TEXT, ["customer"]) is None


@pytest.mark.parametrize("kw", [{"kind": "view"}, {"table_id": None}, {"version": -1}])
def test_sources_of_unknown_snapshot_are_never_kept(tmp_path, kw):
    cache = _cache(tmp_path, **kw)
    assert cache.key(TEXT, ["customer"]) is None
    cache.put(TEXT, ["customer"], LIT)
    assert not (tmp_path / "view" / FOLDER).exists()
    assert _cache(tmp_path, **kw).get(TEXT, ["customer"]) is None
    assert _cache(tmp_path).key(TEXT, ["nope"]) is None  # (a table that is no source)


def test_unreadable_or_foreign_files_are_misses_and_a_dry_run_keeps_nothing(tmp_path):
    _cache(tmp_path, write=False).put(TEXT, ["customer"], LIT)
    assert not (tmp_path / "view" / FOLDER).exists()
    _cache(tmp_path).put(TEXT, ["customer"], LIT)
    (path,) = (tmp_path / "view" / FOLDER).glob("*.json")
    path.write_text("{not json")
    assert _cache(tmp_path).get(TEXT, ["customer"]) is None
    path.write_text(json.dumps({"key": "other", "literal": LIT}))
    assert _cache(tmp_path).get(TEXT, ["customer"]) is None
