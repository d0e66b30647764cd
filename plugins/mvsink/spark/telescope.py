"""The telescoping of change terms: the view's query evaluated once per changed source, with that source
replaced by its change rows and the others registered as each term reads them (the changed sources before
it at their new versions, those after it at their old ones) — filtered by the change's join keys where
:mod:`mvsink.spark.pruning` finds that they may be.

    Q(S1', S2') - Q(S1, S2) = Q(dS1, S2) + Q(S1', dS2)

:func:`telescope` makes two terms per source (its inserted rows +1, its deleted rows -1);
:func:`telescope_signed` one, where the query can carry the sign (:func:`signed_query`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from mvsink.core.deltalog import active_bytes
from mvsink.spark import pruning

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import Column, DataFrame, SparkSession

    from mvsink.core.batch import BatchDescription, SourceRead
    from mvsink.definitions.view import ViewDefinition
    from mvsink.spark.pruning import PrunedRead

log = logging.getLogger(__name__)


def _is_remote(spark: SparkSession) -> bool:
    return type(spark).__module__.startswith("pyspark.sql.connect")


class ChangeFrames(dict[str, "tuple[DataFrame, DataFrame]"]):
    """Each changed source's (inserted, deleted) rows, and (once asked) the pruned reads of each source's
    change term (:func:`term_reads`)."""

    pruned: dict[str, list[PrunedRead]] | None = None


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

    def per_source(s: SourceRead) -> list[tuple[DataFrame, Callable[[], DataFrame]]]:
        plus, minus = frames[s.name]
        return [(plus, lambda: term(1)), (minus, lambda: term(-1))]

    return _telescoping(spark, view, desc, base, changed, per_source, frames)


def _telescoping(
    spark: SparkSession,
    view: ViewDefinition,
    desc: BatchDescription,
    base: dict[str, int],
    changed: list[SourceRead],
    per_source: Callable[[SourceRead], list[tuple[DataFrame, Callable[[], DataFrame]]]],
    frames: dict[str, tuple[DataFrame, DataFrame]],
) -> list[DataFrame]:
    """The loop of :func:`telescope` and :func:`telescope_signed`: for changed source i, the changed sources
    after it registered at their old versions, the sources its term may read pruned by its join keys
    registered filtered (:func:`term_reads`), then each (frame, term) of ``per_source(source i)``: the frame
    registered as the source and the term made; then source i at its new version and the others unfiltered.
    Leaves every source registered at the version ``desc`` reads."""
    terms: list[DataFrame] = []
    registered_old: list[SourceRead] = []
    pruned = term_reads(spark, view, desc, base, changed, frames)
    cache: dict[tuple[str, bool], DataFrame] = {}  # each source's read at a version made once (Delta loads it once)
    by_name = {s.name: s for s in desc.sources}
    filtered: list[SourceRead] = []
    try:
        for i, s in enumerate(changed):
            later = changed[i + 1 :]
            for o in later:  # sources after this one at their old version
                _register_source(spark, view, desc, base, o, old=True, cache=cache)
                registered_old.append(o)
            reads = {r.source: r for r in pruned.get(s.name, [])}
            made = per_source(s)
            n_terms = len(made)
            for o in desc.sources:
                if o.name == s.name:
                    continue
                version = base[o.name] if o in later else o.version
                r = reads.get(o.name)
                if r is None:
                    for _ in range(n_terms):
                        if o.kind != "view":
                            pruning.record_whole(o, version)
                    continue
                for _ in range(n_terms):
                    pruning.record(o.name, bytes_read=r.bytes, files=r.files)
                _register_source(
                    spark, view, desc, base, by_name[o.name], old=o in later, where=r.predicate(), cache=cache
                )
                filtered.append(o)
            for frame, make in made:
                frame.createOrReplaceTempView(s.name)
                t = make()
                # Classic Spark binds temp views when spark.sql analyses; Spark Connect re-analyses the SQL
                # at execution, after the views were re-registered, so there each term is pinned first.
                terms.append(t.localCheckpoint(eager=True) if _is_remote(spark) else t)
            _register_source(spark, view, desc, base, s, old=False, cache=cache)
            for o in filtered:
                _register_source(spark, view, desc, base, o, old=o in later, cache=cache)
            filtered = []
    finally:
        for src in registered_old + filtered:  # back at the version desc reads
            _register_source(spark, view, desc, base, src, old=False, cache=cache)
    return terms


def term_reads(
    spark: SparkSession,
    view: ViewDefinition,
    desc: BatchDescription,
    base: dict[str, int],
    changed: list[SourceRead],
    frames: dict[str, tuple[DataFrame, DataFrame]],
) -> dict[str, list[PrunedRead]]:
    """For each changed source, the other sources its change term reads pruned by its join keys
    (:mod:`mvsink.spark.pruning`; one Spark job per key source). Asked once per refresh: the result is
    kept on ``frames`` when it is a :class:`ChangeFrames`."""
    if isinstance(frames, ChangeFrames) and frames.pruned is not None:
        return frames.pruned
    out: dict[str, list[PrunedRead]] = {}
    if len(desc.sources) > 1:
        tp = pruning.TermPruning(spark, view.query, list(desc.sources))
        if tp.edges:
            for i, s in enumerate(changed):
                later = changed[i + 1 :]
                read_at = {
                    o.name: (
                        _source_frame(spark, view, desc, base, o, old=o in later),
                        base[o.name] if o in later else o.version,
                    )
                    for o in desc.sources
                    if o.name != s.name and o.kind != "view"
                }
                plus, minus = frames[s.name]
                out[s.name] = tp.reads(s, plus.unionByName(minus), read_at)
    if isinstance(frames, ChangeFrames):
        frames.pruned = out
    return out


def scan_estimate(
    desc: BatchDescription, changed: list[SourceRead], pruned: dict[str, list[PrunedRead]] | None
) -> tuple[int, int]:
    """(bytes the change terms read of the sources, bytes the full diff reads of them): each changed source's
    term reads every other source, pruned where :func:`term_reads` says so (a changed file set is small next
    to them: the change-set guard sees to that)."""
    size = {s.name: active_bytes(s.path, s.version) for s in desc.sources}
    terms = 0
    for s in changed:
        reads = {r.source: r.bytes for r in (pruned or {}).get(s.name, [])}
        terms += sum(reads.get(o.name, size[o.name]) for o in desc.sources if o.name != s.name)
    return terms, sum(size.values())


def _source_frame(
    spark: SparkSession, view: ViewDefinition, desc: BatchDescription, base: dict[str, int], s: SourceRead, *, old: bool
) -> DataFrame:
    """Source ``s`` as the last refresh read it (``old``) or as this batch reads it."""
    from mvsink.spark.sources import read_source

    if s.kind == "view":  # an upstream view's table at this batch's version, its contents at the old time
        assert desc.base_time is not None
        version, time = s.version, desc.base_time if old else desc.time
    else:
        version, time = base[s.name] if old else s.version, desc.time
    return read_source(spark, view, s, version=version, time=time)


def _register_source(
    spark: SparkSession,
    view: ViewDefinition,
    desc: BatchDescription,
    base: dict[str, int],
    s: SourceRead,
    *,
    old: bool,
    where: Column | None = None,
    cache: dict[tuple[str, bool], DataFrame] | None = None,
) -> None:
    """Register source ``s`` as the last refresh read it (``old``) or as this batch reads it (``where``: filtered;
    ``cache``: the reads already made, by source and ``old``)."""
    key = (s.name, old)
    df = cache.get(key) if cache is not None else None
    if df is None:
        df = _source_frame(spark, view, desc, base, s, old=old)
        if cache is not None:
            cache[key] = df
    (df if where is None else df.where(where)).createOrReplaceTempView(s.name)


SIGN = "_mv_sign"  # a signed change set's column: +1 an inserted row, -1 a deleted one


def signed_query(query: str, source: str, *, weight: str = "_mv_diff") -> str | None:
    """``query`` with a last column ``weight`` = ``source``'s :data:`SIGN` column, or None where that is not sure.

    For the one-term-per-source telescoping (:func:`telescope_signed`): the query must be one SELECT block
    (no set operation, no ``*`` that would pick the sign column up, no CTE) that reads ``source`` once,
    directly in its FROM/JOIN (not in a subquery). A rewrite of sqlglot's tree: its result is checked by
    Spark's analysis against the query's own columns before use (:func:`_signed_terms`).
    """
    import sqlglot
    from sqlglot import exp

    try:
        tree = sqlglot.parse_one(query, dialect="spark")
    except sqlglot.errors.ParseError:
        return None
    if (
        not isinstance(tree, exp.Select)
        or tree.args.get("with")
        or any(isinstance(e, exp.Star) for e in tree.expressions)
    ):
        return None
    if any(isinstance(e, exp.Column) and isinstance(e.this, exp.Star) for e in tree.expressions):
        return None
    refs = [t for t in tree.find_all(exp.Table) if t.name.lower() == source.lower()]
    if len(refs) != 1 or refs[0].args.get("db") or refs[0].find_ancestor(exp.Select) is not tree:
        return None
    if any(isinstance(t.parent, exp.Subquery) for t in refs):
        return None
    col = exp.column(SIGN, table=refs[0].alias_or_name)
    tree.set("expressions", [*tree.expressions, exp.alias_(col, weight)])
    return tree.sql(dialect="spark")


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

    def per_source(s: SourceRead) -> list[tuple[DataFrame, Callable[[], DataFrame]]]:
        plus, minus = frames[s.name]
        signed = plus.withColumn(sign_column, F.lit(1).cast("int")).unionByName(
            minus.withColumn(sign_column, F.lit(-1).cast("int"))
        )
        return [(signed, lambda: term(s.name))]

    return _telescoping(spark, view, desc, base, changed, per_source, frames)
