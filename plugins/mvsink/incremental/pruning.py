"""Change terms that read the other sources pruned by the change's join keys, and what a refresh read.

For a change term of the change set of A (or of several: :mod:`mvsink.incremental.telescope`), each edge of
:func:`mvsink.plan.joinkeys.join_edges` keyed by A (or by a source already pruned in this term: chained, as
Q5's lineitem -> supplier) gives a filter on another source: its join column within the keys. The keys are
read in the driver from plain Parquet files (a change set's change files; a pruned read's kept files) with
pyarrow (:mod:`mvsink.incremental.keyreads`), else collected in one Spark job per key source (Δ of A is small, the
change-set guard sees to that; a change set's keys once per refresh), compressed into at most
:data:`~mvsink.incremental.keyreads.MAX_RANGES` ranges (plus the exact list when it is short), and the read lists only the files whose min/max statistics may hold a key
(Delta's data skipping does it for a read through Delta's reader). Frames are made only when a key
collection or a term needs them (:data:`Lazy`), so the scan guard decides on the estimate alone. What each source's read will touch is estimated from
the same statistics (:func:`mvsink.core.deltalog.file_statistics`): the scan guard and the refresh's
``reads`` report use it.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from mvsink import settings
from mvsink.core.deltalog import ChangeFile, FileStats, absolute_path, active_bytes, file_statistics
from mvsink.incremental.keyreads import MAX_KEYS, ChangeFiles, Cover, KeyRanges, key_ranges, keys_in_driver, scan_keys
from mvsink.plan.joinkeys import Edge, join_edges

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from mvsink.core.batch import SourceRead
    from mvsink.location import Location, Where
    from mvsink.plan.tree import PlanNode

log = logging.getLogger(__name__)

Lazy = Callable[[], "DataFrame"]  # a frame made when first called (the same frame every call)


class SparkNeeded(Exception):  # noqa: N818 (a signal, not a failure)
    """A refresh without Spark reached something only Spark computes (a change set's keys that are not plain
    Parquet files, a chained key read): it runs on Spark instead."""


def spark_needed() -> DataFrame:
    """A :data:`Lazy` frame of a refresh without Spark: raises :class:`SparkNeeded`."""
    raise SparkNeeded("the change terms' pruned reads need a Spark job")


def lazy(make: Callable[[], DataFrame]) -> Lazy:
    """``make`` called once, when first needed: building a frame costs Spark analysis, which an estimate
    alone does not need."""
    return functools.cache(make)


def _collect_keys(df: DataFrame, columns: list[str]) -> dict[str, list[Any]] | None:
    """Each column's distinct values in ``df`` (one Spark job); None if a column has over :data:`MAX_KEYS`."""
    from pyspark.sql import functions as F

    row = df.agg(*[F.collect_set(F.col(f"`{c}`")).alias(f"k{i}") for i, c in enumerate(columns)]).collect()[0]
    out = {c: list(row[f"k{i}"]) for i, c in enumerate(columns)}
    if any(len(v) > MAX_KEYS for v in out.values()):
        return None
    return out


# ---------------------------------------------------------------- a term's pruned reads


def pruned_reads(edges: list[Edge], changed: str | Iterable[str]) -> list[Edge]:
    """The edges a term of the change set(s) of ``changed`` uses, in the order their keys become known: first
    those keyed by a changed source, then those keyed by a source already pruned (chained). A source is
    pruned by the edges of the first round that reaches it (another column's keys from sources pruned
    later, through it, would filter nothing more); a changed source is never a target."""
    seeds = {changed.casefold()} if isinstance(changed, str) else {c.casefold() for c in changed}
    known = set(seeds)
    out: list[Edge] = []
    pending = list(edges)
    progress = True
    while progress:
        progress = False
        for e in list(pending):
            target = e.target.source.casefold()
            if target in seeds or (target in known and all(o.target != e.target for o in out)):
                pending.remove(e)  # (a source already pruned by another column is not filtered again)
                continue
            if e.keys.source.casefold() in known:
                out.append(e)
                pending.remove(e)
                known.add(target)
                progress = True
    return out


@dataclasses.dataclass(frozen=True)
class PrunedRead:
    """Source ``source`` read by one term with its columns within the keys (what Delta will touch: ``files``
    of the snapshot's ``total_files``, ``bytes`` of ``total_bytes``)."""

    source: str
    filters: tuple[tuple[str, KeyRanges], ...]
    files: int
    bytes: int
    total_files: int
    total_bytes: int
    paths: tuple[Location, ...] | None = None  # the files kept (with the source's options), None: the log cannot tell

    def predicate(self) -> Column:
        return _and(list(self.filters))

    def frame(self, spark: SparkSession, s: SourceRead, version: int, whole: DataFrame) -> DataFrame:
        """This read of source ``s`` at ``version``: only the files the statistics keep, as plain Parquet
        (:func:`mvsink.spark.sources.read_delta_files`), else ``whole`` (Delta's reader skips them), filtered."""
        from mvsink.spark.sources import read_delta_files

        df = None
        if self.paths is not None:
            role = f"source {s.name!r}"
            df = read_delta_files(spark, s.path, version=version, files=list(self.paths), role=role)
        return (whole if df is None else df).where(self.predicate())


def estimate(
    path: Where, version: int, filters: list[tuple[str, KeyRanges]]
) -> tuple[int, int, int, int, tuple[Location, ...]] | None:
    """(files, bytes) a read filtered by ``filters`` touches, the snapshot's (files, bytes), and the absolute
    paths of the files it touches; None if the log cannot tell."""
    per_column = {c: file_statistics(path, version, c) for c, _ in filters}
    first = next(iter(per_column.values()))
    paths = [absolute_path(path, f.path) for f in first] if first is not None else []
    return _estimate(per_column, paths, filters)


def _estimate(
    per_column: dict[str, list[FileStats] | None], paths: list[Location], filters: list[tuple[str, KeyRanges]]
) -> tuple[int, int, int, int, tuple[Location, ...]] | None:
    """:func:`estimate` from each filtered column's statistics (``per_column``, as :func:`file_statistics` gave them,
    one entry per active file in the same order) and the files' absolute ``paths`` (in that order)."""
    if any(per_column.get(c) is None for c, _ in filters):
        return None
    first = per_column[filters[0][0]]
    assert first is not None
    keep = [True] * len(first)
    for column, keys in filters:
        stats: list[FileStats] = per_column[column] or []
        for i, f in enumerate(stats):
            keep[i] = keep[i] and keys.may_hold(f.min, f.max)
    files = sum(keep)
    size = sum(f.size for f, k in zip(first, keep) if k)
    kept = tuple(p for p, k in zip(paths, keep, strict=True) if k)
    return files, size, len(first), sum(f.size for f in first), kept


@dataclasses.dataclass(frozen=True)
class _TargetFiles:
    """What the log says of a source a term may read pruned, at one version: its files if Spark reads them as plain
    Parquet (:func:`mvsink.spark.sources.plain_files`, else None), each file's statistics per column an edge filters
    it by (and ``""``: sizes only; :func:`file_statistics`), the files' absolute paths (in that order) and its
    active bytes."""

    listed: list[ChangeFile] | None
    stats: dict[str, list[FileStats] | None]
    paths: list[Location]
    size: int


class TermPruning:
    """The pruned reads of the change terms of one refresh (the plan's edges found once: from ``tree()``, the
    query's plan as the caller already analysed it, else from ``query`` analysed again)."""

    def __init__(
        self,
        spark: SparkSession | None,
        query: str,
        sources: list[SourceRead],
        *,
        change_files: dict[str, ChangeFiles] | None = None,
        tree: Callable[[], PlanNode] | None = None,
        edges: Sequence[Edge] | None = None,
    ) -> None:
        self.spark = spark
        self.change_files = {k.casefold(): v for k, v in (change_files or {}).items()}
        self.sources = {s.name.casefold(): s for s in sources}
        self.edges: list[Edge] = []
        self.min_bytes = settings.incremental_prune_min_bytes()
        from mvsink.plan.read import plan_tree
        from mvsink.plan.tree import PlanFormatError

        self._keys: dict[str, dict[str, list[Any]] | None] = {}  # each change set's keys, once per refresh
        self._files: dict[tuple[str, int], _TargetFiles] = {}  # each target's files at a version, read once
        if edges is not None:  # (kept plan facts: a refresh without Spark)
            self.edges = list(edges)
            return
        assert spark is not None
        try:
            self.edges = join_edges(tree() if tree is not None else plan_tree(spark, query))
        except PlanFormatError as exc:
            log.info("change terms read the other sources whole: the plan could not be read (%s)", exc)

    def _worth(self, target: str, read_at: dict[str, tuple[Lazy, int]]) -> bool:
        """Can a key filter skip files of source ``target``: at least ``MVSINK_INCREMENTAL_PRUNE_MIN_BYTES`` in more
        than one file (what its log says of its files is read here, once per version, for :meth:`_read` and
        :meth:`_read_keys` too)."""
        s = self.sources[target]
        f = self._target_files(s, read_at[s.name][1])
        whole = f.stats[""]
        return f.size >= self.min_bytes and (whole is None or len(whole) > 1)

    def _target_files(self, s: SourceRead, version: int) -> _TargetFiles:
        from mvsink.spark.sources import plain_files

        key = (s.name.casefold(), version)
        if key not in self._files:
            listed = plain_files(s.path, version)
            columns = sorted({e.target.name for e in self.edges if e.target.source.casefold() == key[0]})
            stats = {c: file_statistics(s.path, version, c) for c in ["", *columns]}
            whole = stats[""]
            size = active_bytes(s.path, version) if whole is None else sum(f.size for f in whole)
            paths = [absolute_path(s.path, f.path) for f in whole or []]
            self._files[key] = _TargetFiles(listed, stats, paths, size)
        return self._files[key]

    def reads(self, seeds: dict[str, Lazy], read_at: dict[str, tuple[Lazy, int]]) -> list[PrunedRead]:
        """The pruned reads of the term whose change sets are ``seeds`` (source name -> its change rows, made
        when first needed); ``read_at``: each other source's frame (likewise) and version as the term reads it.

        A change set's keys are read in the driver where its files allow (:func:`keys_in_driver`), else
        collected in one Spark job, once per refresh whichever terms use them; keys of a pruned read (chained)
        cost a Spark job each. No frame is made that no key collection needs, so a refresh the scan guard
        then refuses has built no Spark plan. A source smaller than ``MVSINK_INCREMENTAL_PRUNE_MIN_BYTES``
        or of one file is read whole: a key filter cannot skip a file there."""
        plan = [
            e
            for e in pruned_reads(self.edges, list(seeds))
            if (t := self.sources.get(e.target.source.casefold())) is not None and t.kind != "view"
        ]
        if not plan:
            return []
        term = "+".join(seeds)
        filters, reads = self._filters(term, seeds, read_at, plan)
        return self._kept(term, filters, reads)

    def _filters(
        self, term: str, seeds: dict[str, Lazy], read_at: dict[str, tuple[Lazy, int]], plan: list[Edge]
    ) -> tuple[dict[str, list[tuple[str, KeyRanges]]], dict[str, PrunedRead]]:
        """The key filters of each source the term reads pruned (by casefolded name), and each one's read with
        them (:meth:`reads`' rounds: the edges whose key source is known, one Spark job per key source)."""
        frames: dict[str, Lazy] = {name.casefold(): df for name, df in seeds.items()}
        seed_names = set(frames)
        filters: dict[str, list[tuple[str, KeyRanges]]] = {}
        reads: dict[
            str, PrunedRead
        ] = {}  # each target's read with its filters so far (the log's estimate once a round)
        skipped: set[str] = set()
        pending = list(plan)
        while pending:  # rounds: the edges whose key source is known, one Spark job per key source
            ready = [e for e in pending if e.keys.source.casefold() in frames]
            if not ready:
                break
            by_source: dict[str, list[Edge]] = {}
            for e in ready:
                pending.remove(e)
                target = e.target.source.casefold()
                if target in skipped or (target not in filters and not self._worth(target, read_at)):
                    skipped.add(target)
                    continue
                by_source.setdefault(e.keys.source.casefold(), []).append(e)
            touched: set[str] = set()
            for key_src, edges in by_source.items():
                columns = sorted({e.keys.name for e in edges})
                if key_src in seed_names:  # a change set: every column any edge keys by, once per refresh
                    keys = self._seed_keys(key_src, frames[key_src], columns)
                else:  # a pruned read's keys: in the driver where its files allow, else one Spark job
                    cover = self._cover(key_src, edges, by_source, pending, filters, read_at)
                    got = self._read_keys(reads[key_src], read_at, columns, cover)
                    if isinstance(got, Cover):
                        for target in sorted({e.target.source.casefold() for e in edges}):
                            skipped.add(target)
                            log.info(
                                "term of %s: %s read whole: keys of %s reach each of its file(s)",
                                term,
                                self.sources[target].name,
                                key_src,
                            )
                        continue
                    keys = got if got is not None else _collect_keys(frames[key_src](), columns)
                if keys is None:
                    log.info("term of %s: over %d keys of %s; read whole where they lead", term, MAX_KEYS, key_src)
                    continue
                for e in edges:
                    target = e.target.source.casefold()
                    filters.setdefault(target, []).append((e.target.name, key_ranges(keys[e.keys.name])))
                    touched.add(target)
            for target in touched:
                s = self.sources[target]
                reads[target] = self._read(s, filters[target], read_at[s.name])
                frames[target] = lazy(
                    functools.partial(self._frame, reads[target], s, read_at[s.name][1], read_at[s.name][0])
                )
        return filters, reads

    def _kept(
        self, term: str, filters: dict[str, list[tuple[str, KeyRanges]]], reads: dict[str, PrunedRead]
    ) -> list[PrunedRead]:
        """The pruned reads worth making (their keys skip a file), each logged."""
        out = []
        for target in filters:
            s = self.sources[target]
            r = reads[target]  # the read as its last round left it (a later round may add a filter)
            files, size, total_files, total_bytes = r.files, r.bytes, r.total_files, r.total_bytes
            if r.paths is not None and files == total_files:
                # the keys skip no file: read whole, so every term reads the same frame (Spark reuses one scan
                # and exchange across the terms' union; a filter per term would make each scan its own)
                log.info("term of %s: %s read whole: its keys skip none of its %d file(s)", term, s.name, total_files)
                continue
            out.append(r)
            log.info(
                "term of %s: %s read where %s: %d of %d file(s), %.1f of %.1f MB",
                term,
                s.name,
                " and ".join(f"{c} in {len(k.ranges)} range(s)" for c, k in r.filters),
                files,
                total_files,
                size / 1e6,
                total_bytes / 1e6,
            )
        return out

    def _read_keys(
        self, r: PrunedRead, read_at: dict[str, tuple[Lazy, int]], columns: list[str], cover: Cover | None = None
    ) -> dict[str, list[Any]] | Cover | None:
        """``columns``' distinct values in pruned read ``r``'s rows, read in the driver from the files it keeps
        when they are plain Parquet (:func:`keys_in_driver`), else None; ``cover`` once the keys read reach every
        file it names (the read then stops: :class:`Cover`)."""
        s = self.sources[r.source.casefold()]
        listed = self._target_files(s, read_at[s.name][1]).listed
        if listed is None or r.paths is None:
            return None
        kept = set(r.paths)
        files = tuple(f for f in listed if f.path in kept)
        parts = tuple(sorted({name for f in files for name, _ in f.partition_values}))
        return scan_keys(ChangeFiles(files, parts), columns, r.filters, cover)

    def _cover(
        self,
        key_src: str,
        edges: list[Edge],
        by_source: dict[str, list[Edge]],
        pending: list[Edge],
        filters: dict[str, list[tuple[str, KeyRanges]]],
        read_at: dict[str, tuple[Lazy, int]],
    ) -> Cover | None:
        """The :class:`Cover` of the targets of ``edges`` (keyed by pruned read ``key_src``) where their files are all
        they decide: no target has another filter (earlier, from another key source of this round, or later) nor
        keys another edge whose target is worth a filter (:meth:`_worth`), and the log has the statistics of every column
        they filter; else None."""
        targets = {e.target.source.casefold() for e in edges}
        if targets & set(filters):
            return None
        if any(e.target.source.casefold() in targets for src, es in by_source.items() if src != key_src for e in es):
            return None
        later = [e for e in pending if self._worth(e.target.source.casefold(), read_at)]  # (others filter nothing)
        if any(e.target.source.casefold() in targets or e.keys.source.casefold() in targets for e in later):
            return None
        spans: dict[str, list[tuple[Any, Any]]] = {}
        for e in edges:
            s = self.sources[e.target.source.casefold()]
            f = self._target_files(s, read_at[s.name][1])
            stats = f.stats.get(e.target.name)
            if stats is None or f.stats[""] is None:
                return None
            spans.setdefault(e.keys.name, []).extend((x.min, x.max) for x in stats)
        return Cover(spans)

    def _frame(self, r: PrunedRead, s: SourceRead, version: int, whole: Lazy) -> DataFrame:
        if self.spark is None:
            raise SparkNeeded("a chained pruned read needs a Spark job")
        return r.frame(self.spark, s, version, whole())

    def _read(self, s: SourceRead, fs: list[tuple[str, KeyRanges]], at: tuple[Lazy, int]) -> PrunedRead:
        """Source ``s`` read by a term at ``at``'s version with its columns within ``fs`` (the log's estimate of it)."""
        f = self._target_files(s, at[1])
        est = _estimate(f.stats, f.paths, fs)
        files, size, total_files, total_bytes, paths = est if est is not None else (0, 0, 0, 0, None)
        return PrunedRead(s.name, tuple(fs), files, size, total_files, total_bytes, paths)

    def _seed_keys(self, source: str, delta: Lazy, columns: list[str]) -> dict[str, list[Any]] | None:
        """The keys of change set ``source`` (``delta()``: its rows) in ``columns``: read once for every column an
        edge keys by (in the driver, else in one Spark job) and kept for the refresh's other terms."""
        if source not in self._keys:
            wanted = sorted({e.keys.name for e in self.edges if e.keys.source.casefold() == source} | set(columns))
            got = None
            if source in self.change_files:
                got = keys_in_driver(self.change_files[source], wanted)
            self._keys[source] = got if got is not None else _collect_keys(delta(), wanted)
        got = self._keys[source]
        return None if got is None else {c: got[c] for c in columns}


def _and(filters: list[tuple[str, KeyRanges]]) -> Column:
    cond = None
    for column, keys in filters:
        p = keys.predicate(column)
        cond = p if cond is None else cond & p
    assert cond is not None
    return cond
