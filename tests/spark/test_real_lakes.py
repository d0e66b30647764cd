"""Issue 21, acceptance 1: sources written by delta-spark (not delta-rs) with the features real lakes use.

Each scenario builds a source table ``src`` with Delta's own Spark writer and one feature: deletion vectors
made by DELETE, UPDATE and MERGE; column mapping ``name`` with a RENAME COLUMN and a DROP COLUMN between
refreshes; a partitioned table with ``delta.randomizeFilePrefixes``; a ``timestamp_ntz`` column; a type widened
from INT to BIGINT (``delta.enableTypeWidening``); a partitioned table whose data files lack the partition
columns. Change data feed on and off where it changes what the reader gets. A dimension ``dim`` (also written
by delta-spark) joins it.

Three views over them (linear, a COUNT/SUM aggregate of integers, a join) are refreshed after the table's
creation and after each of at least five rounds of changes. After every refresh:

- the view (read through mvsink) equals an independent oracle: Spark reading each source through delta-spark
  at the version the round ended at (``versionAsOf``) and evaluating the view's query without mvsink;
- the append's lineage names those versions;
- its mode (commit info ``mvsink.mode``) is full for the first refresh and for a round that changed the
  source's schema or protocol, else incremental (``incremental`` for the linear and join views,
  ``incremental:aggregate`` for the aggregate): the rounds after a schema change are incremental again.

Each scenario also checks, from the log, that the table really has its feature (deletion vectors in add
actions, physical column names, random file prefixes, CDC files or none, the type change recorded, files
without the partition column), so a test cannot pass on a table that lost what it is about.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import random
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from mvsink.definitions.catalog import Catalog
from mvsink.readers.arrow import read_view
from mvsink.write.runners import refresh
from tests.support.delta import BASE, HOUR
from tests.support.oracle import multiset, norm
from tests.support.sparklake import (
    Clock,
    Lake,
    active_adds,
    file_columns,
    log_actions,
    metadata,
    protocol,
    spark_oracle,
    strip_partition_columns,
)
from tests.support.viewfiles import write_view

pytestmark = pytest.mark.spark


@pytest.fixture(autouse=True)
def _incremental_where_allowed(monkeypatch):
    """The size guards off: a round of data changes is refreshed incrementally whenever the rules allow it."""
    monkeypatch.setenv("MVSINK_INCREMENTAL_MAX_FRACTION", "100")
    monkeypatch.setenv("MVSINK_INCREMENTAL_MAX_SCAN_RATIO", "1000")
    monkeypatch.setenv("MVSINK_INCREMENTAL_AGGREGATE", "true")


CDF = {"delta.enableChangeDataFeed": "true"}
DV = {"delta.enableDeletionVectors": "true"}
N_ROWS = 240

# ---------------------------------------------------------------------------------------------- data

NTZ = [
    dt.datetime(1969, 12, 31, 23, 30),  # before the epoch
    dt.datetime(2026, 3, 29, 2, 30),  # a wall-clock time that does not exist in Europe's spring-forward gap
    dt.datetime(2026, 10, 25, 1, 30, 15, 250_000),  # one that exists twice in autumn; with microseconds
    None,
]
WIDE = [0, 7, -5, 2**31 - 1, -(2**31), None]  # INT values, the extremes included
DIM_DDL = "k INT, name STRING"
DIM_ROWS = [{"k": k, "name": n} for k, n in [(0, "zero"), (1, "one"), (2, "two"), (2, "two-again"), (4, None)]]


@dataclasses.dataclass
class Source:
    """The scenario's source table and the random choices that change it."""

    lake: Lake
    rng: random.Random
    next_id: int = 0
    big: bool = False  # after type widening: ``w`` takes values beyond INT

    def rows(self, n: int, ids: list[int] | None = None) -> list[dict[str, Any]]:
        """``n`` new rows (or rows with ``ids``) holding every column any scenario has; the table takes its own."""
        rng = self.rng
        if ids is None:
            ids = list(range(self.next_id, self.next_id + n))
            self.next_id += n
        out = []
        for i in ids:
            note = rng.choice(["n1", "n2", None])
            w = rng.choice(WIDE)
            if self.big and w is not None and rng.random() < 0.5:
                w = w * 3 + rng.choice([2**32, -(2**33)])
            out.append(
                {
                    "id": i,
                    "k": rng.choice([0, 1, 2, 3, None]),
                    "q": rng.choice([-1, 0, 1, 2, 5, None]),
                    "tag": rng.choice(["a", "b", None]),
                    "note": note,
                    "memo": note,  # ``note`` after the RENAME
                    "extra": rng.choice([1, 2, None]),
                    "region": rng.choice(["eu", "us", "apac", None]),
                    "ts": rng.choice(NTZ),
                    "w": w,
                }
            )
        return out

    def ids(self) -> list[int]:
        return sorted(r.id for r in self.lake.spark.read.format("delta").load(self.lake.path).select("id").collect())

    def merge(self, n_matched: int = 14, n_new: int = 6) -> int:
        """MERGE: ``n_matched`` existing ids replaced (those with a NULL ``q`` deleted), ``n_new`` inserted."""
        matched = self.rng.sample(self.ids(), n_matched)
        return self.lake.merge(self.rows(0, matched) + self.rows(n_new))


Change = Callable[[Source], Any]


@dataclasses.dataclass(frozen=True)
class Round:
    """One round of changes between two refreshes: ``schema`` when a commit changes the schema or protocol."""

    label: str
    change: Change
    schema: bool = False


def insert(n: int) -> Change:
    return lambda s: s.lake.append(s.rows(n))


def sql(statement: str) -> Change:
    return lambda s: s.lake.sql(statement)


def merge(n_matched: int = 14, n_new: int = 6) -> Change:
    return lambda s: s.merge(n_matched, n_new)


def both(*changes: Change) -> Change:
    def run(s: Source) -> None:
        for c in changes:
            c(s)

    return run


# ---------------------------------------------------------------------------------------------- views

COMMON = {
    "lin": "SELECT id, k, q, tag FROM src WHERE q IS NULL OR q > 0",
    "agg": "SELECT k, count(*) AS n, sum(q) AS s FROM src GROUP BY k",
    "join": "SELECT s.id, s.q, d.name FROM src s JOIN dim d ON s.k = d.k",
}
PARTITIONED = {
    "lin": "SELECT id, region, q FROM src WHERE q IS NULL OR q > 0",
    "agg": "SELECT region, count(*) AS n, sum(q) AS s FROM src GROUP BY region",
    "join": "SELECT s.id, s.region, d.name FROM src s JOIN dim d ON s.k = d.k",
}
TIMESTAMPS = {
    "lin": "SELECT id, ts, q FROM src WHERE q IS NULL OR q > 0",
    "agg": "SELECT ts, count(*) AS n, sum(q) AS s FROM src GROUP BY ts",
    "join": "SELECT s.id, s.ts, d.name FROM src s JOIN dim d ON s.k = d.k",
}
WIDENED = {  # the views' column types stay as they were when ``w`` widens
    "lin": "SELECT id, k, CAST(w AS BIGINT) AS w FROM src WHERE q IS NULL OR q > 0",
    "agg": "SELECT k, count(*) AS n, sum(w) AS sw FROM src GROUP BY k",
    "join": "SELECT s.id, CAST(s.w AS BIGINT) AS w, d.name FROM src s JOIN dim d ON s.k = d.k",
}
INCREMENTAL_MODE = {"lin": "incremental", "agg": "incremental:aggregate", "join": "incremental"}


def is_full(mode: str) -> bool:
    return mode == "full" or mode.startswith("full:")


def appends(target: str | Path) -> list[dict[str, Any]]:
    """mvsink.* commit info of each append of a view's table (delta-rs's history), oldest first."""
    out = []
    for h in reversed(DeltaTable(str(target)).history()):
        info = {k.removeprefix("mvsink."): json.loads(v) for k, v in h.items() if k.startswith("mvsink.")}
        if info.get("operation") == "append":
            out.append(info)
    return out


# ---------------------------------------------------------------------------------------------- the driver


@dataclasses.dataclass
class History:
    src: Source
    dim: Lake
    catalog: Catalog
    targets: dict[str, Path]
    modes: dict[str, list[str]]


def run_history(
    spark: Any,
    env: tuple[Path, Path],
    *,
    ddl: str,
    properties: dict[str, str],
    views: dict[str, str],
    rounds: list[Round],
    partition_by: tuple[str, ...] = (),
    seed: int = 1,
    after_create: Callable[[Source], Any] | None = None,
    before_refresh: Callable[[Source, int], Any] | None = None,
) -> History:
    """Create ``src`` and ``dim``, refresh ``views`` after the creation and after each round, and check every
    refresh against the oracle and the expected mode (see the module's docstring)."""
    assert len(rounds) >= 5
    data, views_dir = env
    clock = Clock(BASE)
    dim = Lake(spark, data / "dim", clock)
    dim.create(DIM_ROWS, DIM_DDL, files=1)
    src = Source(Lake(spark, data / "src", clock), random.Random(seed))
    src.lake.create(src.rows(N_ROWS), ddl, properties=properties, partition_by=partition_by)
    if after_create is not None:
        after_create(src)
    for name, q in views.items():
        used = {"src": "src", "dim": "dim"} if " dim " in q else {"src": "src"}
        write_view(views_dir, name, query=q, sources=used, target=f"views/{name}", as_of=BASE)
    catalog = Catalog(views_dir)
    targets = {name: data / "views" / name for name in views}
    modes: dict[str, list[str]] = {name: [] for name in views}
    for step, rnd in enumerate([Round("create", lambda s: None, schema=True), *rounds]):
        rnd.change(src)
        t = clock.tick(HOUR)
        versions = {"src": src.lake.version(), "dim": dim.version()}
        if before_refresh is not None:
            before_refresh(src, step)
        for name, q in views.items():
            view = catalog.get(name)
            where = f"view {name}, round {step} ({rnd.label})"
            res = refresh(view, t, catalog=catalog, runner="inprocess", spark=spark, run_id=f"{name}-{step}")
            assert res.status == "appended", (where, res)
            info = appends(targets[name])[-1]
            used = {s: versions[s] for s in ("src", "dim") if s in info["sources"]}
            assert info["sources"] == used, (where, info["sources"], versions)
            mode = str(info["mode"])
            modes[name].append(mode)
            if rnd.schema:
                assert is_full(mode), (where, mode, info["mode_reason"])
            else:
                assert mode == INCREMENTAL_MODE[name], (where, mode, info["mode_reason"])
            expected = spark_oracle(spark, q, {s: (str(data / s), v) for s, v in used.items()})
            assert sum(expected.values()) > 0, where
            got = multiset(read_view(view, as_of=t))
            assert got == expected, (where, _difference(got, expected))
    return History(src, dim, catalog, targets, modes)


def _difference(got: Counter[Any], expected: Counter[Any]) -> dict[str, Any]:
    """What a failed comparison shows: a few rows only mvsink has, and a few only the oracle has."""
    return {
        "only_in_view": list((got - expected).items())[:8],
        "only_in_oracle": list((expected - got).items())[:8],
    }


def all_adds(path: str | Path) -> list[dict[str, Any]]:
    """Every add action the table's log ever made."""
    out = []
    v = 0
    while (Path(path) / "_delta_log" / f"{v:020d}.json").exists():
        out += [a["add"] for a in log_actions(path, v) if "add" in a]
        v += 1
    return out


def cdc_files(path: str | Path) -> int:
    n, v = 0, 0
    while (Path(path) / "_delta_log" / f"{v:020d}.json").exists():
        n += sum(1 for a in log_actions(path, v) if "cdc" in a)
        v += 1
    return n


def assert_cdf(path: str | Path, cdf: bool) -> None:
    """With the change data feed on, delta-spark wrote CDC files for the DML rounds; off, none."""
    n = cdc_files(path)
    assert (n > 0) if cdf else (n == 0), n


# ---------------------------------------------------------------------------------------------- the scenarios


BASE_DDL = "id BIGINT, k INT, q INT, tag STRING"

DV_ROUNDS = [
    Round("DELETE", sql("DELETE FROM {t} WHERE id % 7 = 0")),
    Round("UPDATE", sql("UPDATE {t} SET q = q + 1, tag = 'u' WHERE id % 5 = 1")),
    Round("MERGE", merge()),
    Round("DELETE + INSERT", both(sql("DELETE FROM {t} WHERE k = 3"), insert(15))),
    Round(
        "UPDATE across groups + DELETE",
        both(sql("UPDATE {t} SET k = k + 1 WHERE id % 4 = 2"), sql("DELETE FROM {t} WHERE q IS NULL")),
    ),
    Round("MERGE again", merge(20, 4)),
]


@pytest.mark.parametrize("cdf", [True, False], ids=["cdf", "no-cdf"])
def test_deletion_vectors_from_delete_update_and_merge(spark, env, cdf):
    """DELETE, UPDATE and MERGE on a table with deletion vectors: rows are deleted by DVs on files that stay
    in the table, which a reader of the raw Parquet files would still see."""
    h = run_history(
        spark, env, ddl=BASE_DDL, properties={**DV, **(CDF if cdf else {})}, views=COMMON, rounds=DV_ROUNDS, seed=3
    )
    path = h.src.lake.path
    dv_adds = [a for a in all_adds(path) if a.get("deletionVector")]
    assert len(dv_adds) >= 3, "delta-spark wrote no deletion vectors: the scenario tests nothing"
    assert "deletionVectors" in protocol(path).get("readerFeatures", [])
    assert_cdf(path, cdf)


COLMAP_DDL = "id BIGINT, k INT, q INT, tag STRING, note STRING, extra INT"
COLMAP_ROUNDS = [
    Round("UPDATE + INSERT", both(sql("UPDATE {t} SET q = q * 2 WHERE id % 3 = 0"), insert(12))),
    Round(
        "RENAME COLUMN + DELETE",
        both(sql("ALTER TABLE {t} RENAME COLUMN note TO memo"), sql("DELETE FROM {t} WHERE id % 6 = 1")),
        schema=True,
    ),
    Round("MERGE after the rename", merge()),
    Round("DROP COLUMN + INSERT", both(sql("ALTER TABLE {t} DROP COLUMN extra"), insert(10)), schema=True),
    Round(
        "UPDATE + DELETE after the drop",
        both(sql("UPDATE {t} SET tag = 'c', memo = 'm' WHERE id % 5 = 2"), sql("DELETE FROM {t} WHERE k = 0")),
    ),
    Round("INSERT", insert(9)),
]
# No change data feed here: delta-spark 4.4 refused the first data round of a column-mapping table with CDF on
# ([DELTA_BLOCK_COLUMN_MAPPING_AND_CDC_OPERATION] Operation "WRITE" is not allowed when the table has enabled
# change data feed (CDF) and has undergone schema changes using DROP COLUMN or RENAME COLUMN), before any rename.


def test_column_mapping_with_rename_and_drop_between_refreshes(spark, env):
    """Column mapping ``name``: the data files hold physical column names (``col-<uuid>``), not the logical
    ones; a RENAME COLUMN and a DROP COLUMN (of columns the views do not read) change only the log."""
    h = run_history(
        spark,
        env,
        ddl=COLMAP_DDL,
        properties={"delta.columnMapping.mode": "name"},
        views=COMMON,
        rounds=COLMAP_ROUNDS,
        seed=5,
    )
    path = h.src.lake.path
    assert h.src.lake.columns() == ["id", "k", "q", "tag", "memo"]
    proto = protocol(path)  # (delta-spark 4.4 takes the legacy reader version 2 for column mapping)
    assert proto["minReaderVersion"] >= 2, proto
    assert "columnMapping" in proto.get("readerFeatures", []) + proto.get("writerFeatures", []), proto
    schema = json.loads(metadata(path)["schemaString"])
    physical = {f["name"]: f["metadata"]["delta.columnMapping.physicalName"] for f in schema["fields"]}
    assert all(p != n for n, p in physical.items()), physical
    some_file = next(iter(active_adds(path)))
    assert "q" not in file_columns(path, some_file), "the data files hold logical names: no column mapping"
    assert_cdf(path, False)


PART_DDL = "id BIGINT, k INT, q INT, region STRING"
PART_ROUNDS = [
    Round("INSERT", insert(20)),
    Round("UPDATE moving rows between partitions", sql("UPDATE {t} SET region = 'moved' WHERE id % 6 = 0")),
    Round("DELETE a whole partition", sql("DELETE FROM {t} WHERE region = 'eu'")),
    Round("MERGE", merge()),
    Round(
        "UPDATE + DELETE",
        both(sql("UPDATE {t} SET q = 5 WHERE region IS NULL"), sql("DELETE FROM {t} WHERE id % 9 = 4")),
    ),
]


@pytest.mark.parametrize("cdf", [True, False], ids=["cdf", "no-cdf"])
def test_partitioned_with_random_file_prefixes(spark, env, cdf):
    """``delta.randomizeFilePrefixes=true``: data files live under random prefixes, not ``region=...`` folders,
    so the partition values are only in the log (NULL partition values included)."""
    h = run_history(
        spark,
        env,
        ddl=PART_DDL,
        properties={"delta.randomizeFilePrefixes": "true", **(CDF if cdf else {})},
        views=PARTITIONED,
        rounds=PART_ROUNDS,
        partition_by=("region",),
        seed=7,
    )
    path = h.src.lake.path
    adds = active_adds(path)
    assert not [p for p in adds if "region=" in p], list(adds)
    assert {a["partitionValues"]["region"] for a in adds.values()} >= {None, "us", "moved"}
    assert_cdf(path, cdf)


NTZ_DDL = "id BIGINT, k INT, q INT, ts TIMESTAMP_NTZ"
NTZ_ROUNDS = [
    Round("INSERT", insert(15)),
    Round("UPDATE ts", sql("UPDATE {t} SET ts = ts + INTERVAL 1 DAY WHERE id % 4 = 0")),
    Round("DELETE", sql("DELETE FROM {t} WHERE ts = TIMESTAMP_NTZ'1969-12-31 23:30:00'")),
    Round("MERGE", merge()),
    Round("UPDATE to a gap time", sql("UPDATE {t} SET ts = TIMESTAMP_NTZ'2026-03-29 02:15:00' WHERE ts IS NULL")),
]


def test_timestamp_ntz_column(spark, env):
    """A TIMESTAMP_NTZ column keeps its wall-clock values and its type (no time zone) through the views,
    including values that do not exist, or exist twice, in zones with daylight saving."""
    h = run_history(spark, env, ddl=NTZ_DDL, properties={}, views=TIMESTAMPS, rounds=NTZ_ROUNDS, seed=9)
    schema = json.loads(metadata(h.src.lake.path)["schemaString"])
    assert {f["name"]: f["type"] for f in schema["fields"]}["ts"] == "timestamp_ntz"
    for name in ("lin", "agg", "join"):
        got = read_view(h.catalog.get(name))
        ts_type = got.schema.field("ts").type
        assert pa.types.is_timestamp(ts_type) and ts_type.tz is None, (name, ts_type)
    lin = read_view(h.catalog.get("lin"))
    values = {norm(v) for v in lin.column("ts").to_pylist()}
    assert norm(dt.datetime(2026, 3, 29, 2, 15)) in values  # the gap time, as written


WIDEN_DDL = "id BIGINT, k INT, q INT, w INT"


def _widen(s: Source) -> None:
    s.lake.sql("ALTER TABLE {t} ALTER COLUMN w TYPE BIGINT")
    s.big = True


def _widths(path: str) -> set[str]:
    """The Parquet types of ``w`` in the active files."""
    return {str(_file_type(path, p, "w")) for p in active_adds(path)}


def _mixed_after_widening(s: Source, step: int) -> None:
    """At the refresh right after the widening, files written as INT32 and as INT64 are both active."""
    if step == 2:
        assert _widths(s.lake.path) == {"int32", "int64"}, _widths(s.lake.path)


WIDEN_ROUNDS = [
    Round("UPDATE w", sql("UPDATE {t} SET w = w - 1 WHERE id < 60 AND w > -2147483648")),
    Round(
        "ALTER COLUMN w TYPE BIGINT + UPDATE beyond INT",  # (rewrites only the last file of the creation)
        both(_widen, sql("UPDATE {t} SET w = w + 3000000000 WHERE id >= 200")),
        schema=True,
    ),
    Round("INSERT BIGINT values", insert(12)),
    Round("MERGE", merge()),
    Round("DELETE", sql("DELETE FROM {t} WHERE w < 0")),
    Round("UPDATE", sql("UPDATE {t} SET w = w * 2 WHERE k = 1")),
]


def test_type_widening_int_to_bigint(spark, env):
    """``delta.enableTypeWidening``: ALTER COLUMN w TYPE BIGINT keeps the files written as INT32 and writes new
    ones as INT64; a reader reads both as BIGINT (values beyond INT after the widening)."""
    h = run_history(
        spark,
        env,
        ddl=WIDEN_DDL,
        properties={"delta.enableTypeWidening": "true", **CDF},
        views=WIDENED,
        rounds=WIDEN_ROUNDS,
        seed=11,
        before_refresh=_mixed_after_widening,
    )
    path = h.src.lake.path
    schema = json.loads(metadata(path)["schemaString"])
    w = {f["name"]: f for f in schema["fields"]}["w"]
    assert w["type"] == "long" and "delta.typeChanges" in w["metadata"], w
    assert any("typeWidening" in f for f in protocol(path).get("readerFeatures", []))
    sums = [r for r in read_view(h.catalog.get("agg")).to_pylist() if r["sw"] is not None]
    assert any(abs(r["sw"]) > 2**31 for r in sums), sums


def _file_type(path: str, rel: str, column: str) -> pa.DataType:
    import pyarrow.parquet as pq

    return pq.read_schema(Path(path) / rel).field(column).type


MISSING_DDL = "id BIGINT, k INT, q INT, region STRING"


def test_partition_values_only_in_the_log(spark, env):
    """A partitioned table (random file prefixes) whose data files lack the partition column, as writers that
    keep partition values only in the log leave them: the view reads ``region`` from the log's
    ``partitionValues`` (NULL only for the NULL partition), as delta-spark does. New files without the column
    arrive in later rounds, and delta-spark's own rewrites (with it) mix in."""

    def stripped_append(n: int) -> Change:
        def run(s: Source) -> None:
            v = s.lake.append(s.rows(n))
            assert strip_partition_columns(s.lake.spark, s.lake.path, v)

        return run

    def strip_created(s: Source) -> None:
        assert len(strip_partition_columns(s.lake.spark, s.lake.path, 0)) >= 4

    def still_missing(s: Source, step: int) -> None:
        if step == 4:  # the MERGE may have rewritten every file that lacked the column
            return
        lacking = [p for p in active_adds(s.lake.path) if "region" not in file_columns(s.lake.path, p)]
        assert lacking, f"round {step}: every active file holds the partition column: the scenario tests nothing"

    rounds = [
        Round(
            "DELETE in one partition (rewrites its files, with the column)",
            sql("DELETE FROM {t} WHERE region = 'apac' AND id % 7 = 0"),
        ),
        Round("INSERT of files without the column", stripped_append(16)),
        Round("UPDATE within a partition", sql("UPDATE {t} SET q = q + 1 WHERE region = 'us'")),
        Round("MERGE", merge()),
        Round("INSERT without the column + DELETE", both(sql("DELETE FROM {t} WHERE k = 2"), stripped_append(10))),
    ]
    h = run_history(
        spark,
        env,
        ddl=MISSING_DDL,
        properties={"delta.randomizeFilePrefixes": "true"},
        views=PARTITIONED,
        rounds=rounds,
        partition_by=("region",),
        seed=13,
        after_create=strip_created,
        before_refresh=still_missing,
    )
    lin = read_view(h.catalog.get("lin")).to_pylist()
    regions = Counter(r["region"] for r in lin)
    assert set(regions) >= {"eu", "us", "apac"}, regions
    # delta-spark agrees on the NULL partition's size: NULLs are that partition's rows, not lost values
    nulls = (
        h.src.lake.spark.read.format("delta")
        .load(h.src.lake.path)
        .where("region IS NULL AND (q IS NULL OR q > 0)")
        .count()
    )
    assert regions[None] == nulls


# ---------------------------------------------------------------------------------------------- the view's own table


def test_view_tables_read_through_delta_spark(spark, env):
    """A view's table (committed by delta-rs) reads through delta-spark: consolidated (``_mv_diff`` summed per
    row, rows with positive sums) it equals mvsink's read of the view, and DESCRIBE HISTORY lists as many
    commits as delta-rs's history."""
    rounds = [
        Round("INSERT", insert(10)),
        Round("DELETE", sql("DELETE FROM {t} WHERE id % 4 = 0")),
        Round("UPDATE", sql("UPDATE {t} SET q = q + 2, k = 1 WHERE id % 5 = 0")),
        Round("MERGE", merge()),
        Round("INSERT", insert(7)),
    ]
    from pyspark.sql import functions as F

    h = run_history(spark, env, ddl=BASE_DDL, properties={}, views=COMMON, rounds=rounds, seed=17)
    for name, target in h.targets.items():
        df = spark.read.format("delta").load(str(target))
        user = [c for c in df.columns if not c.startswith("_mv_")]
        net = "_mv_net"  # (not a name a view column can have)
        summed = df.groupBy(*user).agg(F.sum("_mv_diff").alias(net)).collect()
        assert all(r[net] >= 0 for r in summed), (name, [r for r in summed if r[net] < 0])
        through_delta = Counter({tuple(norm(r[c]) for c in user): r[net] for r in summed if r[net] > 0})
        assert through_delta == multiset(read_view(h.catalog.get(name))), name
        spark_history = spark.sql(f"DESCRIBE HISTORY delta.`{target}`").count()
        assert spark_history == len(DeltaTable(str(target)).history()), name
