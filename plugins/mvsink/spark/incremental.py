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
same corrections the full diff computes, consolidated per row; the full diff stays the
fallback, so anything this module cannot prove safe (an aggregate above a changed source,
a schema change, a vacuumed file, a change set that is most of the table) just costs time.
"""

from __future__ import annotations

import functools
import logging
from collections import defaultdict
from typing import TYPE_CHECKING

from mvsink import settings
from mvsink.core import storage
from mvsink.core.deltalog import ChangeFile, ChangeSet, active_bytes, cached_snapshot, change_set

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import DataFrame, Observation, SparkSession
    from pyspark.sql.types import StructType

    from mvsink.core.batch import BatchDescription, SourceRead
    from mvsink.definitions.view import ViewDefinition

log = logging.getLogger(__name__)

CHANGE_TYPE = "_change_type"
_PLUS_TYPES = ("insert", "update_postimage")
_MINUS_TYPES = ("delete", "update_preimage")
NOT_LINEAR = "not linear in"


# ---------------------------------------------------------------- Spark side


def _read_files(
    spark: SparkSession,
    files: list[ChangeFile],
    schema: StructType,
    partition_columns: list[str],
    *,
    with_change_type: bool,
) -> DataFrame:
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    data_schema = T.StructType([f for f in schema.fields if f.name not in partition_columns])
    if with_change_type:
        data_schema = data_schema.add(CHANGE_TYPE, T.StringType())
    names = schema.names + ([CHANGE_TYPE] if with_change_type else [])
    groups: dict[tuple[tuple[str, str | None], ...], list[str]] = defaultdict(list)
    for f in files:
        groups[f.partition_values].append(f.path)
    out: DataFrame | None = None
    for pv, paths in groups.items():
        df = spark.read.schema(data_schema).parquet(*(storage.spark_uri(p) for p in paths))
        values = dict(pv)
        for c in partition_columns:
            df = df.withColumn(c, F.lit(values.get(c)).cast(schema[c].dataType))
        df = df.select(*names)
        out = df if out is None else out.unionByName(df)
    if out is None:
        return spark.createDataFrame([], T.StructType([schema[n] for n in schema.names]))
    return out


def change_frames(
    spark: SparkSession, changes: ChangeSet, schema: StructType, partition_columns: list[str]
) -> tuple[DataFrame, DataFrame]:
    """(inserted rows, deleted rows) of a change set, as DataFrames with the source's schema."""
    from pyspark.sql import functions as F

    plus = _read_files(spark, changes.inserted, schema, partition_columns, with_change_type=False)
    minus = _read_files(spark, changes.deleted, schema, partition_columns, with_change_type=False)
    if changes.cdc:
        cdc = _read_files(spark, changes.cdc, schema, partition_columns, with_change_type=True)
        plus = plus.unionByName(cdc.where(F.col(CHANGE_TYPE).isin(*_PLUS_TYPES)).drop(CHANGE_TYPE))
        minus = minus.unionByName(cdc.where(F.col(CHANGE_TYPE).isin(*_MINUS_TYPES)).drop(CHANGE_TYPE))
    return plus, minus


def _is_remote(spark: SparkSession) -> bool:
    return type(spark).__module__.startswith("pyspark.sql.connect")


def max_fraction() -> float:
    """``MVSINK_INCREMENTAL_MAX_FRACTION`` (a bad value raises SettingsError, never a silent default)."""
    return settings.incremental_max_fraction()


def prepare_changes(
    spark: SparkSession, view: ViewDefinition, desc: BatchDescription, base: dict[str, int], changed: list[SourceRead]
) -> dict[str, tuple[DataFrame, DataFrame]] | str:
    """(inserted, deleted) rows of each changed source since ``base``, or why they cannot be used.

    Refuses a change set that is over :func:`max_fraction` of the source's files (the size guard).
    """
    from mvsink.core.table import open_delta

    changes: dict[str, ChangeSet] = {}
    fraction = max_fraction()
    for s in changed:
        cs = change_set(s.path, base[s.name], s.version)
        if isinstance(cs, str):
            return f"source {s.name!r}: {cs}"
        total = active_bytes(s.path, s.version)
        if total and cs.bytes > fraction * total:
            return (
                f"source {s.name!r} changed {cs.bytes} bytes of files against {total} "
                f"(over {fraction:.0%}; enable delta.enableChangeDataFeed on it for smaller change sets)"
            )
        changes[s.name] = cs
    frames: dict[str, tuple[DataFrame, DataFrame]] = {}
    for s in changed:
        sdt = cached_snapshot(("delta", s.path, s.version), functools.partial(open_delta, s.path, version=s.version))
        partition_columns = list(sdt.metadata().partition_columns) if sdt is not None else []
        frames[s.name] = change_frames(spark, changes[s.name], spark.table(s.name).schema, partition_columns)
    return frames


def telescope(
    spark: SparkSession,
    view: ViewDefinition,
    desc: BatchDescription,
    base: dict[str, int],
    changed: list[SourceRead],
    frames: dict[str, tuple[DataFrame, DataFrame]],
    term: Callable[[int], DataFrame],
) -> list[DataFrame]:
    """``term(sign)`` once per change term, with the sources registered as that term reads them.

    Term of source i: source i is its inserted (+1) or deleted (-1) rows, the changed sources before it
    at their new versions and those after it at their old ones (telescoping). Leaves every source
    registered at the version ``desc`` reads.
    """

    def register(s: SourceRead, version: int) -> None:
        _register_snapshot(spark, view, s, version)

    terms: list[DataFrame] = []
    registered_old: list[SourceRead] = []
    try:
        for i, s in enumerate(changed):
            for later in changed[i + 1 :]:  # sources after this one at their old version
                register(later, base[later.name])
                registered_old.append(later)
            plus, minus = frames[s.name]
            for frame, sign in ((plus, 1), (minus, -1)):
                frame.createOrReplaceTempView(s.name)
                t = term(sign)
                # Classic Spark binds temp views when spark.sql analyses; Spark Connect re-analyses the SQL
                # at execution, after the views were re-registered, so there each term is pinned first.
                terms.append(t.localCheckpoint(eager=True) if _is_remote(spark) else t)
            register(s, s.version)
    finally:
        for src in registered_old:  # back at the version desc reads
            register(src, src.version)
    return terms


def source_check(desc: BatchDescription, base: dict[str, int]) -> str | None:
    """Why the sources' changes since ``base`` cannot be used at all (None: they can)."""
    if any(s.kind != "path" for s in desc.sources):
        return "a source is a view"
    if any(s.name not in base or base[s.name] > s.version for s in desc.sources):
        return "the last refresh's source versions are unknown"
    return None


def incremental_corrections(
    spark: SparkSession,
    view: ViewDefinition,
    desc: BatchDescription,
    *,
    base: dict[str, int],
    desired: DataFrame | None = None,
    with_error: bool = False,
    observation: Observation | None = None,
) -> tuple[DataFrame | None, str]:
    """Corrections of ``desc`` computed from the sources' changes since ``base``, or (None, why not).

    The view's checks (a per-row projection and filter) are applied to the signed change terms;
    ``observation`` then receives the change's signed check counts. Leaves every source registered
    at the version ``desc`` reads, as the full diff expects. A reason that starts with
    :data:`NOT_LINEAR` means only the linearity failed (the affected-groups mode may still apply).
    """
    from pyspark.sql import functions as F

    from mvsink.columns import DIFF, TIME
    from mvsink.spark.checks import apply_checks
    from mvsink.spark.plan import linearity
    from mvsink.spark.transforms import consolidate

    changed = [s for s in desc.sources if base.get(s.name) != s.version]
    why_not = source_check(desc, base)
    if why_not:
        return None, why_not
    why = {k: v for k, v in linearity(spark, view.query, [s.name for s in changed], desired=desired).items() if v}
    if why:  # the plan first: in classic Spark it is already analysed (Connect: one EXPLAIN)
        name, reason = next(iter(why.items()))
        return None, f"{NOT_LINEAR} {name!r}: {reason}"
    frames = prepare_changes(spark, view, desc, base, changed)
    if isinstance(frames, str):
        return None, frames
    terms = telescope(
        spark,
        view,
        desc,
        base,
        changed,
        frames,
        lambda sign: spark.sql(view.query).select("*", F.lit(sign).cast("bigint").alias(DIFF)),
    )
    union = terms[0]
    for t in terms[1:]:
        union = union.unionByName(t)
    union = apply_checks(union, view, with_error=with_error, weight=DIFF, observation=observation)
    columns = [c for c in union.columns if c != DIFF]
    corr = consolidate(union, columns).select(*columns, F.lit(desc.time).cast("bigint").alias(TIME), DIFF)
    return corr, f"from the changes of {', '.join(s.name for s in changed)}"


def _register_snapshot(spark: SparkSession, view: ViewDefinition, s: SourceRead, version: int) -> None:
    """Register source ``s`` at ``version`` under its name."""
    from mvsink.spark.sources import read_delta

    role = f"view {view.name}: source '{s.name}'"
    read_delta(spark, s.path, version=version, role=role).createOrReplaceTempView(s.name)


def telescope_signed(
    spark: SparkSession,
    view: ViewDefinition,
    desc: BatchDescription,
    base: dict[str, int],
    changed: list[SourceRead],
    frames: dict[str, tuple[DataFrame, DataFrame]],
    term: Callable[[str], DataFrame],
    *,
    sign_column: str,
) -> list[DataFrame]:
    """:func:`telescope` with one term per changed source instead of two.

    The source is registered as its inserted and deleted rows together, ``sign_column`` +1 or -1 on each,
    and ``term(source name)`` must carry that column on as the rows' weight; the other sources are read
    once per source rather than twice. Leaves every source registered at the version ``desc`` reads.
    """
    from pyspark.sql import functions as F

    terms: list[DataFrame] = []
    registered_old: list[SourceRead] = []
    try:
        for i, s in enumerate(changed):
            for later in changed[i + 1 :]:  # sources after this one at their old version
                _register_snapshot(spark, view, later, base[later.name])
                registered_old.append(later)
            plus, minus = frames[s.name]
            signed = plus.withColumn(sign_column, F.lit(1).cast("int")).unionByName(
                minus.withColumn(sign_column, F.lit(-1).cast("int"))
            )
            signed.createOrReplaceTempView(s.name)
            t = term(s.name)
            terms.append(t.localCheckpoint(eager=True) if _is_remote(spark) else t)
            _register_snapshot(spark, view, s, s.version)
    finally:
        for src in registered_old:  # back at the version desc reads
            _register_snapshot(spark, view, src, src.version)
    return terms
