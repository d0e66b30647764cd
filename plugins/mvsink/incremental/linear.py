"""Incremental refresh: corrections from the sources' changes, without reading the view's table.

If the table's contents are exactly the query over the sources at the versions the last
append read (mint checks this: no foreign commit since, same definition), and the query
is *linear* in every source that changed (a multiset-linear plan: projections, filters,
inner joins, UNION ALL, explode ... above that source), then

    Q(S1', S2') - Q(S1, S2) = Q(dS1, S2) + Q(S1', dS2)        (telescoping, one source at a time)

and each term is the user's query evaluated with one source replaced by its change set,
once for the inserted rows (+1) and once for the deleted rows (-1). The change set of a
source between two Delta versions comes from its commit log (:func:`mvsink.core.deltalog.change_set`:
Change Data Feed files when a commit has them, else the files it added and removed); this module
is the Spark side: reading those files and evaluating the terms. The result is the
same corrections the full diff computes, consolidated per row. A source that is another view
changes by that view's own updates since the last read (:mod:`mvsink.core.viewchanges`:
which files, and whether they can be trusted; :func:`view_change_frames` reads them). The full
diff stays the fallback, so anything this module cannot prove safe (an aggregate above a changed source,
a schema change, a vacuumed file, a change set that is most of the table) just costs time.
"""

from __future__ import annotations

import functools
import logging
from collections import defaultdict
from typing import TYPE_CHECKING

from mvsink import settings
from mvsink.core.costrecord import note_change
from mvsink.core.deltalog import (
    CHANGE_TYPE,
    MINUS_CHANGE_TYPES,
    PLUS_CHANGE_TYPES,
    ChangeFile,
    ChangeSet,
    active_bytes,
    cached_snapshot,
    change_set,
)
from mvsink.core.readlog import record
from mvsink.core.sparklocation import spark_uri
from mvsink.core.viewchanges import ViewChanges, view_changes
from mvsink.engines import arrow
from mvsink.engines.duckdb import consolidated as consolidated_rows
from mvsink.incremental import keyreads
from mvsink.incremental.telescope import ChangeFrames, signed_query, telescope, telescope_signed
from mvsink.spark.sources import empty_frame, read_files

if TYPE_CHECKING:
    from collections.abc import Callable

    import pyarrow as pa
    from pyspark.sql import DataFrame, Observation, SparkSession
    from pyspark.sql.types import StructType

    from mvsink.core.batch import BatchDescription, SourceRead
    from mvsink.core.table import ViewTable
    from mvsink.definitions.view import ViewDefinition
    from mvsink.incremental.telescope import ChangeInputs, ChangeTerms
    from mvsink.location import Where
    from mvsink.plan.tree import PlanNode

log = logging.getLogger(__name__)

NOT_LINEAR = "not linear in"


# ---------------------------------------------------------------- Spark side


def change_frames(
    spark: SparkSession,
    path: Where,
    changes: ChangeSet,
    schema: StructType,
    partition_columns: list[str],
    *,
    from_version: int,
    to_version: int,
    plain_files: bool,
) -> tuple[DataFrame, DataFrame]:
    """(inserted rows, deleted rows) of a table source between two versions, with the source's schema.

    - files whose rows are plain Parquet (``plain_files``: no column mapping or type widening, and no
      changed file with a deletion vector): the changed files themselves, partition values from the log —
      a commit's change data feed files where it wrote them (``_change_type``: inserts and post-images
      inserted, deletes and pre-images deleted), else its added and removed files. The same rows as
      Delta's ``readChangeFeed``, without Delta planning a change-feed scan (and loading the snapshots at
      both ends) for every query that reads them;
    - else, the change data feed is on over the range: Delta's ``readChangeFeed``;
    - else each changed file through Delta's reader at the version that holds it (filtered by file name,
      so its deletion vector, column mapping and widened types apply). Delta does not prune files by
      ``_metadata``, so this reads the source's snapshots whole: ``delta.enableChangeDataFeed`` avoids it.
    """
    from pyspark.sql import functions as F

    plain = plain_files and not changes.deletion_vectors
    if changes.change_data_feed and not plain:
        return _change_feed(spark, path, schema, from_version=from_version, to_version=to_version)
    if not plain:
        log.info(
            "source %s: changed files read through Delta at their versions (deletion vectors or column mapping, "
            "and no change data feed): this scans the source's snapshots",
            path,
        )
        return (
            _files_through_delta(spark, path, changes.inserted, schema),
            _files_through_delta(spark, path, changes.deleted, schema),
        )
    plus: list[DataFrame] = []
    minus: list[DataFrame] = []
    if changes.inserted:
        plus.append(read_files(spark, changes.inserted, schema, partition_columns, with_change_type=False))
    if changes.deleted:
        minus.append(read_files(spark, changes.deleted, schema, partition_columns, with_change_type=False))
    if changes.cdc:
        cdc = read_files(spark, changes.cdc, schema, partition_columns, with_change_type=True)
        plus.append(cdc.where(F.col(CHANGE_TYPE).isin(*PLUS_CHANGE_TYPES)).drop(CHANGE_TYPE))
        minus.append(cdc.where(F.col(CHANGE_TYPE).isin(*MINUS_CHANGE_TYPES)).drop(CHANGE_TYPE))

    def union(frames: list[DataFrame]) -> DataFrame:  # no empty relation where a side has no files
        if not frames:
            return read_files(spark, [], schema, partition_columns, with_change_type=False)
        return functools.reduce(lambda a, b: a.unionByName(b), frames)

    return union(plus), union(minus)


def _change_feed(
    spark: SparkSession, path: Where, schema: StructType, *, from_version: int, to_version: int
) -> tuple[DataFrame, DataFrame]:
    from pyspark.sql import functions as F

    from mvsink.spark.sources import delta_uri

    feed = (
        spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", str(from_version + 1))
        .option("endingVersion", str(to_version))
        .load(delta_uri(path))
    )
    plus = feed.where(F.col(CHANGE_TYPE).isin(*PLUS_CHANGE_TYPES)).select(*schema.names)
    minus = feed.where(F.col(CHANGE_TYPE).isin(*MINUS_CHANGE_TYPES)).select(*schema.names)
    return plus, minus


def _files_through_delta(spark: SparkSession, path: Where, files: list[ChangeFile], schema: StructType) -> DataFrame:
    """The rows of ``files``, each read by Delta at the version that holds it (deletion vectors applied)."""
    import posixpath
    from urllib.parse import unquote

    from pyspark.sql import functions as F

    from mvsink.spark.sources import delta_reader

    by_version: dict[int, list[str]] = defaultdict(list)
    for f in files:
        by_version[f.version].append(unquote(posixpath.basename(f.path)))
    frames = [
        delta_reader(spark, path, version=v).where(F.col("_metadata.file_name").isin(*names)).select(*schema.names)
        for v, names in sorted(by_version.items())
    ]
    if not frames:
        return empty_frame(spark, schema)
    return functools.reduce(lambda a, b: a.unionByName(b), frames)


def _cdf_hint(cs: ChangeSet) -> str:
    """What the size guard's reason says about the change data feed: the advice to enable it only where it is off
    (where it is on, the change files already are the changed rows, or files added or removed whole)."""
    if not cs.change_data_feed:
        return "enable delta.enableChangeDataFeed on it for smaller change sets"
    return (
        f"its change data feed is already on: {len(cs.cdc)} change data file(s), and {len(cs.inserted)} file(s) "
        f"added and {len(cs.deleted)} removed by commits without change data"
    )


def max_fraction() -> float:
    """``MVSINK_INCREMENTAL_MAX_FRACTION`` (a bad value raises SettingsError, never a silent default)."""
    return settings.incremental_max_fraction()


def prepare_changes(
    ci: ChangeInputs,
    *,
    sizes: dict[str, int] | None = None,
    tree: Callable[[], PlanNode] | None = None,
) -> ChangeFrames | str:
    """(inserted, deleted) rows of each changed source (``ci.changed``) since ``ci.base``, or why they cannot be used.

    A table source's come from its Delta log; a view source's are its own updates since the last read
    (:func:`view_change_frames`). Refuses a change set that is over :func:`max_fraction` of the source's
    files (the size guard). ``sizes`` receives each change set's bytes of files; ``tree()``: the query's plan
    as the mode already read it (the change terms' join edges are found on it, not on the query analysed again).
    """

    spark, view, desc, base, changed = ci.spark, ci.view, ci.desc, ci.base, ci.changed
    changes: dict[str, ChangeSet | ViewChanges] = {}
    fraction = max_fraction()
    for s in changed:
        if s.kind == "view":
            vc = _view_changes(desc, base, s)
            if isinstance(vc, str):
                return f"source {s.name!r}: {vc}"
            if vc.total_bytes and vc.bytes > fraction * vc.total_bytes:
                return (
                    f"source {s.name!r} (view {s.view}) changed {vc.bytes} bytes of its table's files against "
                    f"{vc.total_bytes} (over {fraction:.0%})"
                )
            changes[s.name] = vc
            record(s.name, bytes_read=vc.bytes, files=len(vc.files))
            if sizes is not None:
                sizes[s.name] = vc.bytes
            continue
        cs = table_change(s, base[s.name], fraction)
        if isinstance(cs, str):
            return cs
        changes[s.name] = cs
        if sizes is not None:
            sizes[s.name] = cs.bytes
    frames = ChangeFrames()
    frames.tree = tree
    for s in changed:
        got = changes[s.name]
        if isinstance(got, ViewChanges):
            assert desc.base_time is not None
            frames[s.name] = view_change_frames(
                spark, view, s, got, after=desc.base_time, through=desc.time, schema=spark.table(s.name).schema
            )
            continue
        plain, partition_columns = plain_change(s)
        frames.defer(  # made when a term (or a key collection in Spark) first needs them
            s.name,
            functools.partial(
                change_frames,
                spark,
                s.path,
                got,
                spark.table(s.name).schema,  # now: terms register other frames under the source's name
                partition_columns,
                from_version=base[s.name],
                to_version=s.version,
                plain_files=plain,
            ),
        )
        if plain and not got.deletion_vectors:  # the same files change_frames read: keys in the driver
            files = keyreads.ChangeFiles(got.files, tuple(partition_columns))
            frames.files = {**(frames.files or {}), s.name: files}
            frames.sets = {**(frames.sets or {}), s.name: got}
    return frames


def table_change(s: SourceRead, base: int, fraction: float) -> ChangeSet | str:
    """Table source ``s``'s change set since version ``base`` (logged as read), or why it cannot be used: unknown
    (:func:`~mvsink.core.deltalog.change_set`), or over ``fraction`` of the source's files (the size guard)."""
    cs = change_set(s.path, base, s.version)
    if isinstance(cs, str):
        return f"source {s.name!r}: {cs}"
    total = active_bytes(s.path, s.version)
    if total and cs.bytes > fraction * total:
        return f"source {s.name!r} changed {cs.bytes} bytes of files against {total} (over {fraction:.0%}; {_cdf_hint(cs)})"
    record(s.name, bytes_read=cs.bytes, files=len(cs.files))
    note_change(s.name, bytes_changed=cs.bytes, files=len(cs.files))
    return cs


def plain_change(s: SourceRead) -> tuple[bool, list[str]]:
    """(are table source ``s``'s files plain Parquet of its logical schema, read without Delta's reader
    (:func:`~mvsink.core.table.plain_parquet_files`); its partition columns)."""
    from mvsink.core.table import open_delta, plain_parquet_files

    sdt = cached_snapshot(("delta", s.path, s.version), functools.partial(open_delta, s.path, version=s.version))
    partition_columns = list(sdt.metadata().partition_columns) if sdt is not None else []
    return sdt is not None and plain_parquet_files(sdt), partition_columns


def view_change_frames(
    spark: SparkSession,
    view: ViewDefinition,
    s: SourceRead,
    changes: ViewChanges,
    *,
    after: int,
    through: int,
    schema: StructType,
) -> tuple[DataFrame, DataFrame]:
    """(inserted rows, deleted rows) of view source ``s`` between its reads at ``after`` and ``through``.

    Its updates with ``after < _mv_time <= through`` (from the files ``changes`` lists), consolidated per
    row over the columns a read sees (hidden state left out: updates that change only the state cancel),
    its ok rows only, each row repeated by its multiplicity: rows of weight +1 and -1 with ``schema``, the
    source's as registered.
    """
    from pyspark.sql import functions as F

    from mvsink.columns import DIFF, TIME
    from mvsink.core.table import open_readable
    from mvsink.spark.sources import spark_schema_of
    from mvsink.spark.transforms import expand, view_contents

    dt = open_readable(s.path, version=s.version, role=f"view {view.name}: source '{s.name}'")
    table_schema = spark_schema_of(dt)
    if changes.files:
        updates = spark.read.schema(table_schema).parquet(*(spark_uri(f) for f in changes.files))
    else:
        updates = spark.createDataFrame([], table_schema)
    updates = updates.select(*table_schema.names).where((F.col(TIME) > F.lit(after)) & (F.col(TIME) <= F.lit(through)))
    net = view_contents(updates, expand_rows=False)
    plus = expand(net).select(*schema.names)
    minus = expand(net.select(*[c for c in net.columns if c != DIFF], (-F.col(DIFF)).alias(DIFF))).select(*schema.names)
    return plus, minus


def _view_changes(desc: BatchDescription, base: dict[str, int], s: SourceRead) -> ViewChanges | str:
    """View source ``s``'s change since the last refresh read it (core/viewchanges.py), or why it cannot be used."""
    if desc.base_time is None:
        return "the time the last refresh read it is unknown"
    return view_changes(s, base_version=base[s.name], base_time=desc.base_time, time=desc.time)


def source_check(desc: BatchDescription, base: dict[str, int]) -> str | None:
    """Why the sources' changes since ``base`` cannot be used at all (None: they can).

    Reads no data: a view source's check reads its table's log (cached for the other modes' calls).
    """
    if any(s.name not in base or base[s.name] > s.version for s in desc.sources):
        return "the last refresh's source versions are unknown"
    for s in desc.sources:
        if s.kind == "view":
            vc = _view_changes(desc, base, s)
            if isinstance(vc, str):
                return f"source {s.name!r}: {vc}"
    if not changed_sources(desc, base):
        return "no source changed since the last refresh"  # mint takes the no-change shortcut; never here
    return None


def changed_sources(desc: BatchDescription, base: dict[str, int]) -> list[SourceRead]:
    """The sources that changed since ``base`` (in the description's order): a table source with a newer
    version; a view source whose update log holds something since the last read (its contents change
    with time even at one version, and a newer version may only hold a compaction or later times)."""
    out = []
    for s in desc.sources:
        if s.kind != "view":
            if base.get(s.name) != s.version:
                out.append(s)
            continue
        vc = _view_changes(desc, base, s) if s.name in base else "unknown"
        if isinstance(vc, str) or not vc.empty:
            out.append(s)
    return out


def incremental_corrections(
    ci: ChangeInputs,
    *,
    desired: DataFrame | None = None,
    with_error: bool = False,
    observation: Observation | None = None,
    table: ViewTable | None = None,
) -> tuple[DataFrame | pa.Table | None, str]:
    """Corrections of ``ci.desc`` computed from the sources' changes since ``ci.base``, or (None, why not).

    Few corrections come back as an Arrow table consolidated in the driver (:mod:`mvsink.engines.duckdb`),
    more as a DataFrame consolidated by Spark.

    The view's checks (a per-row projection and filter) are applied to the signed change terms;
    ``observation`` then receives the change's signed check counts; ``table``: the view's table, beside which the
    plan facts of a refresh computed in the driver are kept (:mod:`mvsink.incremental.driverfacts`). Leaves every
    source registered at the version ``desc`` reads, as the full diff expects. A reason that starts with
    :data:`NOT_LINEAR` means only the linearity failed (the affected-groups mode may still apply).
    """
    from pyspark.sql import functions as F

    from mvsink.columns import DIFF, TIME
    from mvsink.plan.linearity import linearity
    from mvsink.plan.read import plan_tree
    from mvsink.spark.declaredchecks import apply_checks
    from mvsink.spark.transforms import consolidate

    spark, view, desc, changed = ci.spark, ci.view, ci.desc, ci.changed
    why = {k: v for k, v in linearity(spark, view.query, [s.name for s in changed], desired=desired).items() if v}
    if why:  # the plan first: in classic Spark it is already analysed (Connect: one EXPLAIN)
        name, reason = next(iter(why.items()))
        return None, f"{NOT_LINEAR} {name!r}: {reason}"
    sizes: dict[str, int] = {}
    tree = functools.cache(lambda: plan_tree(spark, view.query, desired=desired))
    frames = prepare_changes(ci, sizes=sizes, tree=tree)
    if isinstance(frames, str):
        return None, frames
    ct = ci.terms(frames)
    reason = f"from the changes of {', '.join(s.name for s in changed)}"
    few = sum(sizes.values()) <= arrow.MAX_DRIVER_CHANGE_BYTES
    if observation is None and not with_error and few and desired is not None:
        in_driver = _terms_in_driver(ct, desired, tree, table)
        if in_driver is not None:
            return in_driver, f"{reason} ({in_driver.num_rows} correction(s) from change terms evaluated in the driver)"
    terms = _signed_terms(ct, desired=desired) or telescope(
        ct, lambda sign: spark.sql(view.query).select("*", F.lit(sign).cast("bigint").alias(DIFF))
    )
    union = terms[0]
    for t in terms[1:]:
        union = union.unionByName(t)
    union = apply_checks(union, view, with_error=with_error, weight=DIFF, observation=observation)
    columns = [c for c in union.columns if c != DIFF]
    if (
        observation is None
        and not with_error
        and sum(sizes.values()) <= arrow.MAX_DRIVER_CHANGE_BYTES
        and all(arrow.same_equality(f.dataType) for f in union.schema.fields)
    ):
        small = collected_corrections(union, columns, at=desc.time)
        if small is not None:
            return small, f"{reason} ({small.num_rows} correction(s) consolidated in the driver)"
    corr = consolidate(union, columns).select(*columns, F.lit(desc.time).cast("bigint").alias(TIME), DIFF)
    return corr, reason


def _signed_terms(ct: ChangeTerms, *, desired: DataFrame | None) -> list[DataFrame] | None:
    """One change term per changed source (:func:`telescope_signed`: the other sources read once, not twice),
    where the query can carry the sign (:func:`signed_query`) and Spark analyses each signed term to the
    query's own columns and ``_mv_diff``; else None (the caller makes two terms per source)."""
    from pyspark.errors import PySparkException
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType

    from mvsink.columns import DIFF

    if desired is None:
        return None
    view = ct.view
    try:
        terms = telescope_signed(
            ct,
            functools.partial(signed_query, view.query, weight=DIFF),
            finish=lambda term: term.withColumn(DIFF, F.col(DIFF).cast("bigint")),
        )
        if terms is None:
            return None
        want = [(f.name, f.dataType) for f in desired.schema.fields]
        differ = any([(f.name, f.dataType) for f in t.schema.fields] != [*want, (DIFF, LongType())] for t in terms)
    except PySparkException as exc:  # (over Spark Connect the analysis happens at .schema)
        log.info("view %s: the signed change terms did not analyse (%s): two terms per source", view.name, exc)
        return None
    if differ:
        log.info("view %s: the signed change terms' columns differ from the query's: two terms per source", view.name)
        return None
    return terms


def _terms_in_driver(
    ct: ChangeTerms, desired: DataFrame, tree: Callable[[], PlanNode], table: ViewTable | None = None
) -> pa.Table | None:
    """The corrections of small changes whose terms DuckDB evaluates in the driver
    (:func:`mvsink.incremental.duckdbterms.view_rows_in_driver`), consolidated there and stamped with the batch's
    time, in the table's Arrow schema; or None (Spark's terms follow)."""
    from mvsink.incremental.duckdbterms import view_rows_in_driver
    from mvsink.incremental.telescope import term_reads
    from mvsink.plan.tree import PlanFormatError

    if not all(arrow.same_equality(f.dataType) for f in desired.schema.fields):
        return None
    try:
        rows = view_rows_in_driver(ct, desired, term_reads(ct), tree=tree())
    except PlanFormatError:
        return None
    if rows is None:
        return None
    if table is not None:  # no Spark job: the next refreshes may need no Spark at all
        from mvsink.incremental.driverfacts import remember_linear

        remember_linear(ct, desired, tree(), table)
    return _stamped(consolidated_rows(rows), list(desired.columns), at=ct.desc.time, schema=desired.schema)


def collected_corrections(union: DataFrame, columns: list[str], *, at: int) -> pa.Table | None:
    """The change terms' rows collected in one Spark job and consolidated in the driver (:mod:`mvsink.engines.duckdb`),
    as corrections stamped ``at`` in the table's Arrow schema; None when they are too many for that."""
    from pyspark.sql import types as T

    from mvsink.columns import DIFF

    raw = arrow.collect_small(union.select(*columns, DIFF))
    if raw is None:
        log.info("over %d rows of change terms: consolidated by Spark", arrow.MAX_DRIVER_ROWS)
        return None
    return _stamped(consolidated_rows(raw), columns, at=at, schema=T.StructType([union.schema[c] for c in columns]))


def _stamped(net: pa.Table, columns: list[str], *, at: int, schema: StructType) -> pa.Table:
    """Consolidated change rows (``columns`` and ``_mv_diff``) as corrections stamped ``at``, in the table's Arrow
    schema of the view's columns ``schema``."""
    from mvsink.spark.sources import arrow_table_schema

    return stamped(net, columns, at=at, schema=arrow_table_schema(schema))


def stamped(net: pa.Table, columns: list[str], *, at: int, schema: pa.Schema) -> pa.Table:
    """Consolidated change rows (``columns`` and ``_mv_diff``) as corrections stamped ``at``, in the table's Arrow
    ``schema``."""
    from mvsink.columns import DIFF, TIME
    from mvsink.core.arrowvalues import repeat_int64

    return (
        net.select(columns)
        .append_column(TIME, repeat_int64(at, net.num_rows))
        .append_column(DIFF, net.column(DIFF))
        .cast(schema)
    )
