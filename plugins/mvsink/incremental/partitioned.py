"""A partitioned recompute: the change of a query that is not linear in its changed sources but partitioned by a
key (:mod:`mvsink.plan.partitioning`: TPC-H Q4's EXISTS, Q13's outer join under an aggregate, Q17's and Q22's
correlated subqueries), as the query over the sources restricted to the changed keys, new minus old.

    P(new) - P(old) = P(new restricted to K) - P(old restricted to K)

K is every key value of the changed sources' changed rows (their class column; NULL included when a changed row
has none). Each source whose every read is keyed is read with its class column within K — the kept files only,
where Delta's statistics allow (:func:`mvsink.incremental.pruning.estimate`) — at its new version and, if it
changed, at the version the last refresh read; every other source whole, at its one version. The scan guard
(:data:`SCAN_FACTOR`) takes the full diff where those reads would not be smaller than its own. A superset of K is
as exact (its extra partitions did not change, so they cancel), so the keys may be widened to ranges.

A keyed source that is a plain Delta table on the local disk is filtered to K by DuckDB in the driver instead, both
versions in one scan of its files, and reaches Spark as local relations (:mod:`mvsink.incremental.partreads`): where
the keys skip no file, Spark's reads scan it twice. One Spark job evaluates both restricted queries (the sources registered under names of their own and the query
rewritten to read them, so nothing is re-registered while Spark Connect analyses it again at execution) — or, for an
aggregate's input that DuckDB evaluates as Spark does and whose keyed sources are all read in the driver, DuckDB
does, with no Spark job (:mod:`mvsink.incremental.partduck`).
"""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING, Any, Final

from mvsink.columns import DIFF
from mvsink.core.deltalog import active_bytes
from mvsink.core.staging import Staging
from mvsink.incremental import keyreads, partreads, pruning
from mvsink.incremental.changedkeys import changed_keys

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    import pyarrow as pa
    from pyspark.sql import DataFrame, Observation, SparkSession

    from mvsink.core.batch import BatchDescription, SourceRead
    from mvsink.core.table import ViewTable
    from mvsink.incremental.driverfacts import PartitionedTerm
    from mvsink.incremental.scalarcache import ScalarCache
    from mvsink.incremental.telescope import ChangeInputs, ChangeTerms
    from mvsink.plan.partitioning import Partitioning
    from mvsink.plan.tree import PlanNode

log = logging.getLogger(__name__)

# The two restricted queries together may read at most this multiple of what the full diff reads (times
# MVSINK_INCREMENTAL_MAX_SCAN_RATIO). Fitted on the cost-model stream at TPC-H SF 1 (bench/costmodel.py, three runs
# of 2026-11-29/30, each mode forced on a copy): with reads 1.0-1.2x the full diff's (Q4 and Q17 on scattered
# changes: every file holds a changed key) the recompute took 0.27-0.76x the full diff's time for Q17 and 0.71-1.21x
# for Q4 (a hit within 10 % in 10 of 12 rounds); at 1.84x (Q17 after a 10 % bulk update) it took 2.4-17x. The full
# diff also reads and groups the table and shuffles every row: a byte of it costs more than one of the recompute's.
SCAN_FACTOR: Final = 1.5
PREFIX: Final = "__mv_part"
# More changed keys than this are kept by their ranges alone (a superset: its extra partitions cancel): Spark analyses
# an IN of 150,000 literals for tens of seconds (TPC-H Q3 and Q4 at SF 1 after a 10 % bulk update of the newest
# orders' lineitems, one narrow key range: 31 s and 44 s where the full diff took 2.7 s and 3.1 s).
MAX_LISTED_KEYS: Final = 10_000


def partitioned_input(
    ct: ChangeTerms,
    part: Partitioning,
    query: str,
    table: ViewTable,
    *,
    frame: Callable[[str], DataFrame] | None = None,
    weight: str = DIFF,
    mode: str = "incremental:partitioned",
) -> DataFrame | str:
    """:func:`partitioned_rows` evaluated by Spark: its signed rows as a DataFrame, or why not."""
    from typing import cast

    got = partitioned_rows(ct, part, query, table, frame=frame, weight=weight, mode=mode)
    return cast("DataFrame | str", got)  # (without a plan, never DuckDB's rows)


def partitioned_rows(
    ct: ChangeTerms,
    part: Partitioning,
    query: str,
    table: ViewTable,
    *,
    frame: Callable[[str], DataFrame] | None = None,
    weight: str = DIFF,
    tree: PlanNode | None = None,
    mode: str = "incremental:partitioned",
    driver_query: str | None = None,
    kept: list[PartitionedTerm] | None = None,
    _again: tuple[Partitioning, tuple[list[Any], bool]] | None = None,
) -> DataFrame | pa.Table | str:
    """Signed rows (``weight`` +1 and -1, not consolidated) of ``query``'s change over ``ct``'s changes, by a
    partitioned recompute on ``part``; or why not (too many keys, a key type, the scan guard). ``frame(sql)``: the
    DataFrame of the query over the restricted sources (default: ``spark.sql``). Registers temp views of its own
    (dropped by :func:`drop_views`); the sources' registrations are left as they were.

    Where the scan guard refuses and the query has a scalar subquery over unchanged sources only
    (:mod:`mvsink.incremental.scalars`), that subquery is evaluated once and written in as a literal, and the query
    partitioned again: a source it read whole may now be restricted to the keys (TPC-H Q22). That second try
    (``_again``: the first try's partitioning and keys) reuses the changed keys where the changed sources keep their
    key columns. ``mode``: the refresh mode the recompute serves (the aggregate state's, a top-k's input), under
    which the cost model keeps its history.

    With ``tree`` (``query``'s analysed plan) the two restricted queries may be evaluated by DuckDB in the driver
    (:mod:`mvsink.incremental.partduck`): the signed rows are then an Arrow table (DuckDB's types), no Spark job.
    ``driver_query``: the text DuckDB evaluates instead, ``tree`` then its plan (a top-k's query without its ORDER BY
    and LIMIT, whose rows ``frame`` gives Spark's). ``kept``: receives how DuckDB evaluated them, where it did
    (:class:`~mvsink.incremental.driverfacts.PartitionedTerm`, for refreshes without Spark)."""
    from pyspark.sql import functions as F

    same = _again is not None and all(_again[0].columns.get(s.name) == part.columns.get(s.name) for s in ct.changed)
    keys = _again[1] if _again is not None and same else changed_keys(ct, part)
    if isinstance(keys, str):
        return keys
    values, has_null = keys
    ranges = keyreads.key_ranges(values)
    changed = {s.name for s in ct.changed}
    reads = [
        (i, s, old) for i, s in enumerate(ct.desc.sources) for old in ((False, True) if s.name in changed else (False,))
    ]
    names = restricted_names(ct.desc.sources, changed)
    texts = restricted_texts(query, ct.desc.sources, names)
    if texts is None:
        return "the query's sources could not be renamed in its text"
    new_sql, old_sql = texts
    duck_sql = texts
    if driver_query is not None:
        duck = restricted_texts(driver_query, ct.desc.sources, names)
        duck_sql = duck or duck_sql
        tree = tree if duck is not None else None
    wheres = {
        s.name: key_filter(c, values, ranges, nulls=has_null)
        for s in ct.desc.sources
        if (c := part.columns.get(s.name))
    }
    # What each read touches, from the logs alone: no Spark plan is made for a recompute the scan guard refuses.
    planned = {
        (s.name, old): _planned_read(
            s, ct.base[s.name] if old else s.version, part.columns.get(s.name), ranges, has_null
        )
        for _, s, old in reads
    }
    driver = _driver_reads(ct, part, planned, query) if wheres else {}
    full = sum(active_bytes(s.path, s.version) for s in ct.desc.sources if s.kind != "view")
    full += active_bytes(table.path, table.version) if table.exists else 0
    refused = _guard(ct, part, _read_bytes(reads, planned, driver, changed), full, table, mode)
    if refused and _again is None and (alt := with_constants(ct, part, query)) is not None:
        log.info("view %s: %s; trying again with %s", ct.view.name, refused, alt[2])
        again = alt[3] if tree is not None and driver_query is None else None
        return partitioned_rows(
            ct, alt[0], alt[1], table, frame=frame, weight=weight, tree=again, mode=mode, kept=kept, _again=(part, keys)
        )
    if refused:
        return refused
    if tree is not None and driver:
        from mvsink.incremental import partduck

        got = partduck.in_driver(
            ct,
            tree,
            part=part,
            driver=driver,
            names=names,
            queries=duck_sql,
            keys=(values, has_null),
            columns=partreads.named_columns(query),
            weight=weight,
            kept=kept if driver_query is None else None,
            pinned={s.name: s.version for s in ct.desc.sources if s.name not in changed} if _again else None,
        )
        if not isinstance(got, str):
            return got
        if (
            "ScalarSubquery" in got
            and _again is None
            and driver_query is None
            and (alt := with_constants(ct, part, query))
        ):
            # (DuckDB may evaluate the query with the scalar subquery written in as a literal: TPC-H Q22)
            log.info("view %s: %s; trying again with %s", ct.view.name, got, alt[2])
            return partitioned_rows(
                ct,
                alt[0],
                alt[1],
                table,
                frame=frame,
                weight=weight,
                tree=alt[3],
                mode=mode,
                kept=kept,
                _again=(part, keys),
            )
        log.info("view %s: the partitioned recompute's queries evaluated by Spark: %s", ct.view.name, got)
    spark = ct.spark
    for name, dr in list(driver.items()):
        got = partreads.read_in_driver(
            spark,
            dr,
            column=part.columns[name],
            values=values,
            nulls=has_null,
            staging=Staging.of(ct.desc.target, ct.desc.batch_id),
            name="source_" + names[(name, False)].removeprefix(PREFIX + "_new_"),
        )
        if isinstance(got, str):  # (Spark reads it: the guard is asked again)
            log.info("view %s: the partitioned recompute's source %s read by Spark: %s", ct.view.name, name, got)
            del driver[name]
            refused = _guard(ct, part, _read_bytes(reads, planned, driver, changed), full, table, mode)
            if refused:
                return refused
            continue
        new_rows, old_rows = got
        new_rows.createOrReplaceTempView(names[(name, False)])
        if old_rows is not None:
            old_rows.createOrReplaceTempView(names[(name, True)])
    for _, s, old in reads:
        if s.name in driver:
            continue
        read, _ = planned[(s.name, old)]
        version = ct.base[s.name] if old else s.version
        _restricted(ct, s, old=old, version=version, where=wheres.get(s.name), read=read).createOrReplaceTempView(
            names[(s.name, old)]
        )
    log.info(
        "view %s: partitioned recompute on %s: %d key(s)%s, %.1f MB read%s",
        ct.view.name,
        part.describe(),
        len(values),
        " and NULL" if has_null else "",
        _read_bytes(reads, planned, driver, changed) / 1e6,
        f" ({', '.join(driver)} in the driver)" if driver else "",
    )
    make = frame or spark.sql
    return (
        make(new_sql)
        .withColumn(weight, F.lit(1).cast("bigint"))
        .unionByName(make(old_sql).withColumn(weight, F.lit(-1).cast("bigint")))
    )


def restricted_names(sources: Sequence[SourceRead], changed: set[str]) -> dict[tuple[str, bool], str]:
    """The name each source is read under by the two restricted queries: ``(name, False)`` the new rows, and for a
    ``changed`` source ``(name, True)`` the old ones."""
    return {
        (s.name, old): f"{PREFIX}_{'old' if old else 'new'}_{i}"
        for i, s in enumerate(sources)
        for old in ((False, True) if s.name in changed else (False,))
    }


def restricted_texts(
    query: str, sources: Sequence[SourceRead], names: dict[tuple[str, bool], str]
) -> tuple[str, str] | None:
    """``query`` over the new restricted sources and over the old ones (an unchanged source: its one read), by
    ``names`` (:func:`restricted_names`); None where the sources could not be renamed in its text."""
    new = rename_tables(query, {s.name: names[(s.name, False)] for s in sources})
    old = rename_tables(query, {s.name: names.get((s.name, True), names[(s.name, False)]) for s in sources})
    return None if new is None or old is None else (new, old)


def with_constants(ct: ChangeInputs, part: Partitioning, query: str) -> tuple[Partitioning, str, str, PlanNode] | None:
    """``query`` with its scalar subqueries over unchanged sources evaluated (:mod:`mvsink.incremental.scalars`) and
    its partitioning on that text, where it restricts a source ``part`` reads whole; with what was replaced, in
    words, and the new text's plan. None otherwise."""
    from mvsink.incremental.scalars import constant_scalars, has_scalar_subquery
    from mvsink.plan.partitioning import partitioning
    from mvsink.plan.read import plan_tree
    from mvsink.plan.tree import PlanFormatError

    if not has_scalar_subquery(query):
        return None
    changed = {s.name.casefold() for s in ct.changed}
    unchanged = {s.name.casefold() for s in ct.desc.sources} - changed
    if not unchanged:
        return None
    columns = _source_columns(ct.spark, ct.desc)
    try:
        got = constant_scalars(ct.spark, query, columns, unchanged, cache=scalar_cache(ct.spark, ct.desc))
        if got is None:
            return None
        tree = plan_tree(ct.spark, got.query)
        again = partitioning(tree, [s.name for s in ct.changed])
    except PlanFormatError:
        return None
    if isinstance(again, str) or set(again.columns) <= set(part.columns):
        return None
    said = "; ".join(f"({text}) = {lit}" for text, lit in got.replaced)
    return again, got.query, f"the scalar subquery evaluated once: {said}", tree


def scalar_cache(spark: SparkSession, desc: BatchDescription) -> ScalarCache:
    """The kept values of the view's scalar subqueries (:mod:`mvsink.incremental.scalarcache`), for the batch's
    snapshots and the session's settings a value depends on."""
    from mvsink.incremental.scalarcache import ScalarCache

    wanted = ("spark.sql.ansi.enabled", "spark.sql.session.timeZone")
    settings = [(name, str(spark.conf.get(name, None))) for name in wanted]
    return ScalarCache(desc.target, desc.sources, settings, write=not desc.dry_run)


def _source_columns(spark: SparkSession, desc: BatchDescription) -> dict[str, set[str]]:
    """Each source's column names as registered in the session, both casefolded."""
    return {s.name.casefold(): {c.casefold() for c in spark.table(s.name).columns} for s in desc.sources}


def keep_scalars(spark: SparkSession, desc: BatchDescription, query: str) -> int:
    """At a refresh that computes the view whole (its first build): evaluate the query's uncorrelated scalar
    subqueries over sources at a path (:func:`~mvsink.incremental.scalars.constant_scalars`, one Spark job each
    unless kept already) and keep their values, so that the first partitioned
    recompute that leaves their sources unchanged writes them in without asking Spark (TPC-H Q22's average balance
    when orders change). How many are kept; none where the query has none or the partitioned recompute is off."""
    import sqlglot
    from pyspark.errors import PySparkException

    from mvsink import settings
    from mvsink.incremental.scalars import constant_scalars, has_scalar_subquery

    if not settings.incremental_partitioned() or desc.dry_run or not has_scalar_subquery(query):
        return 0
    paths = {s.name.casefold() for s in desc.sources if s.kind == "path"}
    try:
        got = constant_scalars(spark, query, _source_columns(spark, desc), paths, cache=scalar_cache(spark, desc))
    except (PySparkException, sqlglot.errors.SqlglotError) as exc:  # (advisory: the first build goes on)
        log.info("view %s: no scalar subquery value kept: %s", desc.view, str(exc).splitlines()[0] if str(exc) else exc)
        return 0
    kept = len(got.replaced) if got is not None else 0
    if kept:
        log.info("view %s: kept the value of %d scalar subquery(ies) for its partitioned recomputes", desc.view, kept)
    return kept


def _driver_reads(
    ct: ChangeTerms, part: Partitioning, planned: dict[tuple[str, bool], tuple[Any, int]], query: str
) -> dict[str, partreads.DriverRead]:
    """The keyed sources DuckDB may read in the driver (:mod:`mvsink.incremental.partreads`), from their logs."""
    from mvsink import settings

    if not settings.incremental_driver_terms():
        return {}
    columns = partreads.named_columns(query)
    changed = {s.name for s in ct.changed}
    out: dict[str, partreads.DriverRead] = {}
    for s in ct.desc.sources:
        if s.name not in part.columns:
            continue
        old = ct.base[s.name] if s.name in changed else None
        reads = {s.version: planned[(s.name, False)][0]}
        if old is not None:
            reads[old] = planned[(s.name, True)][0]
        got = partreads.plan_driver_read(s, new_version=s.version, old_version=old, reads=reads, columns=columns)
        if isinstance(got, str):
            log.info("view %s: the partitioned recompute's source %s read by Spark: %s", ct.view.name, s.name, got)
        else:
            out[s.name] = got
    return out


def _read_bytes(
    reads: list[tuple[int, SourceRead, bool]],
    planned: dict[tuple[str, bool], tuple[Any, int]],
    driver: dict[str, partreads.DriverRead],
    changed: set[str],
) -> float:
    """What the two restricted queries read, by the scan guard's measure: Spark's reads (an unchanged source is
    read by both queries) and the driver's (each file once), the latter as :data:`DRIVER_SCAN_FACTOR` times cheaper."""
    from mvsink.incremental.duckdbterms import DRIVER_SCAN_FACTOR

    total = 0.0
    for _, s, old in reads:
        if s.name in driver:
            total += 0 if old else driver[s.name].bytes / DRIVER_SCAN_FACTOR
        else:
            total += planned[(s.name, old)][1] * (1 if s.name in changed else 2)
    return total


def _scan_guard(part: Partitioning, read_bytes: float, full: int) -> str | None:
    """Why the restricted queries' reads (``read_bytes``) are too much against the full diff's (``full``), or None."""
    return scan_guard(part.describe(), read_bytes, full)


def scan_guard(described: str, read_bytes: float, full: int) -> str | None:
    """:func:`_scan_guard` of a partitioning ``described`` in words (as the refresh without Spark asks it)."""
    from mvsink import settings

    limit = SCAN_FACTOR * settings.incremental_max_scan_ratio() * full
    if full and read_bytes > limit:
        return (
            f"the partitioned recompute on {described} would read {read_bytes / 1e6:.1f} MB, more than "
            f"the full diff reads ({full / 1e6:.1f} MB with the table; "
            f"{settings.INCREMENTAL_MAX_SCAN_RATIO.name}={settings.incremental_max_scan_ratio():g})"
        )
    return None


def _guard(
    ct: ChangeInputs, part: Partitioning, read_bytes: float, full: int, table: ViewTable, mode: str
) -> str | None:
    """:func:`_scan_guard`'s answer as the cost model decides it (:func:`mvsink.incremental.costguard.partition_reason`:
    ``mode`` is the refresh mode the recompute serves)."""
    from mvsink.incremental.costguard import partition_reason

    reason = _scan_guard(part, read_bytes, full)
    return partition_reason(reason, ct.changed, table, read_bytes=read_bytes, full=full, factor=SCAN_FACTOR, mode=mode)


def partitioned_corrections(
    ci: ChangeInputs,
    part: Partitioning,
    *,
    with_error: bool,
    observation: Observation | None,
    table: ViewTable,
) -> tuple[DataFrame | pa.Table | None, str]:
    """Corrections of ``ci.desc``: the view's query over the changed keys' partitions, new minus old (the view's checks
    applied to the signed rows, ``observation`` counting them), consolidated in the driver where few; or (None, why
    not)."""
    from pyspark.sql import functions as F

    from mvsink.columns import TIME
    from mvsink.engines import arrow
    from mvsink.incremental.linear import collected_corrections, prepare_changes
    from mvsink.spark.declaredchecks import apply_checks
    from mvsink.spark.transforms import consolidate

    frames = prepare_changes(ci)
    if isinstance(frames, str):
        return None, frames
    ct = ci.terms(frames)
    union = partitioned_input(ct, part, ci.view.query, table)
    if isinstance(union, str):
        return None, union
    union = apply_checks(union, ci.view, with_error=with_error, weight=DIFF, observation=observation)
    columns = [c for c in union.columns if c != DIFF]
    reason = (
        f"from the changes of {', '.join(s.name for s in ct.changed)} (a partitioned recompute on {part.describe()})"
    )
    if observation is None and not with_error and all(arrow.same_equality(f.dataType) for f in union.schema.fields):
        small = collected_corrections(union, columns, at=ci.desc.time)
        if small is not None:
            drop_views(ct)
            return small, f"{reason}: {small.num_rows} correction(s) consolidated in the driver"
    corr = consolidate(union, columns).select(*columns, F.lit(ci.desc.time).cast("bigint").alias(TIME), DIFF)
    return corr, reason


def drop_views(ct: ChangeTerms) -> None:
    """Drop the temp views :func:`partitioned_input` registered (not one by one in a Spark Connect session released
    when the write step ends, which takes them with it: each drop is a round trip to the server)."""
    from mvsink.spark.connect import released_at_end

    if released_at_end(ct.spark):
        return
    for i, _ in enumerate(ct.desc.sources):
        for role in ("new", "old"):
            ct.spark.catalog.dropTempView(f"{PREFIX}_{role}_{i}")


def _planned_read(
    s: SourceRead, version: int, column: str | None, ranges: keyreads.KeyRanges, nulls: bool
) -> tuple[pruning.PrunedRead | None, int]:
    """Source ``s`` at ``version`` restricted by its class ``column`` (None: read whole): the read of only the files
    whose statistics may hold one of the keys (``ranges``), where the log tells and no key is NULL (else None: every
    file), and the bytes of files the read touches."""
    size = active_bytes(s.path, version) if s.kind != "view" else 0
    if column is None or nulls or s.kind == "view" or ranges.empty:
        return None, size
    filters = [(column, ranges)]
    est = pruning.estimate(s.path, version, filters)
    if est is None:
        return None, size
    files, kept, total_files, total, paths = est
    return pruning.PrunedRead(s.name, tuple(filters), files, kept, total_files, total, paths), kept


def _restricted(
    ct: ChangeTerms, s: SourceRead, *, old: bool, version: int, where: str | None, read: pruning.PrunedRead | None
) -> DataFrame:
    """Source ``s`` at ``version`` (``old``: as the last refresh read it), only ``read``'s files where given, filtered
    by ``where`` (None: whole)."""
    from pyspark.sql import functions as F

    from mvsink.incremental.telescope import _source_frame

    whole = _source_frame(ct, s, old=old)
    if where is None:
        return whole
    df = whole if read is None else read.frame(ct.spark, s, version, whole)
    return df.where(F.expr(where))


def key_filter(column: str, values: list[Any], ranges: keyreads.KeyRanges, *, nulls: bool) -> str:
    """Spark SQL keeping the rows whose ``column`` is one of ``values`` (integers, strings or dates; ``nulls``: or
    NULL): the keys' ranges (what Delta's and Parquet's statistics skip by) and the exact values (a hash lookup once
    Spark makes the list an InSet); over :data:`MAX_LISTED_KEYS` integer keys, their ranges alone."""
    c = "`" + column.replace("`", "``") + "`"
    parts = []
    if values:
        within = ranges.sql(column)
        if within and len(values) > MAX_LISTED_KEYS:  # the ranges alone: a superset of the keys is as exact
            parts.append(within)
        else:
            listed = f"{c} IN ({', '.join(_literal(v) for v in values)})"
            parts.append(f"({within} AND {listed})" if within else listed)
    if nulls:
        parts.append(f"{c} IS NULL")
    return "(" + " OR ".join(parts) + ")" if parts else "FALSE"


def _literal(v: Any) -> str:
    import datetime as dt

    if isinstance(v, bool) or not isinstance(v, int | str | dt.date):
        raise TypeError(f"no key literal for {type(v).__name__}")
    if isinstance(v, int):
        return str(v)
    if isinstance(v, dt.date):
        return f"DATE '{v.isoformat()}'"
    return "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"


@functools.cache
def _sqlglot() -> Any:
    import sqlglot

    return sqlglot


def rename_tables(query: str, names: dict[str, str]) -> str | None:
    """``query`` (Spark SQL) reading table ``t`` as ``names[t]`` (an alias keeps the name its columns are qualified
    by), or None where that is not sure: a name qualified by a database, a CTE of a source's name."""
    sqlglot = _sqlglot()
    from sqlglot import exp

    try:
        tree = sqlglot.parse_one(query, dialect="spark")
    except sqlglot.errors.ParseError:
        return None
    lower = {k.casefold(): v for k, v in names.items()}
    ctes = {c.alias_or_name.casefold() for c in tree.find_all(exp.CTE)}
    if ctes & set(lower):
        return None
    for t in list(tree.find_all(exp.Table)):
        new = lower.get(t.name.casefold())
        if new is None:
            continue
        if t.args.get("db") or t.args.get("catalog"):
            return None
        alias = t.alias_or_name
        t.set("this", exp.to_identifier(new))
        if not t.alias:
            t.set("alias", exp.TableAlias(this=exp.to_identifier(alias)))
    return str(tree.sql(dialect="spark"))
