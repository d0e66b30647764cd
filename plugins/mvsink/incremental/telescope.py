"""The change terms: the view's query evaluated with changed sources replaced by their change rows and the
others registered as each term reads them — filtered by the change's join keys where
:mod:`mvsink.incremental.pruning` finds that they may be.

With the new versions S' = S + dS, a query linear in each changed source changes by (inclusion-exclusion)

    Q(S1', S2') - Q(S1, S2) = Q(dS1, S2') + Q(S1', dS2) - Q(dS1, dS2)

one term per non-empty set of changed sources, its sign (-1)^(|set|+1): every term reads the other sources
at their **new** versions only. Delta's reader keeps a table's newest snapshot warm between queries and
rebuilds an older one for every read (time travel), so this costs far less there than the telescoping
``Q(dS1, S2) + Q(S1', dS2)``, which reads S2 at its old version; the terms with several change sets join
small sets only. Over :data:`MAX_NEW_ONLY` changed sources (2^n - 1 terms), and where the old versions are
read as plain file lists (an old version costs what the newest does), the telescoping is used: n terms.

:class:`ChangeInputs` is what the modes make the terms of (the write step's reads, the changed sources) and
:class:`ChangeTerms` adds the changed sources' change frames (:func:`mvsink.incremental.linear.prepare_changes`).
:func:`telescope` makes a term per choice of inserted (+1) or deleted (-1) rows of each change set;
:func:`telescope_signed` reads one change set with its sign, where the query can carry it (:func:`signed_query`).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import logging
import math
from typing import TYPE_CHECKING, Any

from mvsink.core.readlog import record, record_whole
from mvsink.incremental import keyreads, pruning
from mvsink.spark.session import is_connect

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from pyspark.sql import DataFrame, SparkSession

    from mvsink.core.batch import BatchDescription, SourceRead
    from mvsink.core.deltalog import ChangeSet
    from mvsink.definitions.view import ViewDefinition
    from mvsink.incremental.pruning import PrunedRead
    from mvsink.plan.joinkeys import Edge
    from mvsink.plan.tree import PlanNode

log = logging.getLogger(__name__)

MAX_NEW_ONLY = 3  # up to this many changed sources, terms read the others at their new versions only


@dataclasses.dataclass(frozen=True)
class ChangeInputs:
    """What every incremental mode reads a refresh's source changes with, as one value: the session, the view,
    the batch description (the versions and the time it reads), each source's version at the last refresh
    (``base``) and the sources that changed since (in the description's order; the change already found usable:
    :func:`mvsink.incremental.modes.full.refresh_change`)."""

    spark: SparkSession
    view: ViewDefinition
    desc: BatchDescription
    base: dict[str, int]
    changed: list[SourceRead]

    def terms(self, frames: dict[str, tuple[DataFrame, DataFrame]]) -> ChangeTerms:
        """These reads with the changed sources' change frames."""
        return ChangeTerms(self.spark, self.view, self.desc, self.base, self.changed, frames)


@dataclasses.dataclass(frozen=True)
class ChangeTerms(ChangeInputs):
    """:class:`ChangeInputs` with the changed sources' change frames: (inserted rows, deleted rows) per changed
    source (a :class:`ChangeFrames`, or a plain dict of them)."""

    frames: dict[str, tuple[DataFrame, DataFrame]]


@dataclasses.dataclass(frozen=True)
class Term:
    """One change term: ``changes`` read as their change rows, the sources named in ``old`` at the version
    the last refresh read, every other source at this batch's version; its rows weigh ``coefficient``."""

    changes: tuple[SourceRead, ...]
    old: frozenset[str]
    coefficient: int

    @property
    def key(self) -> str:
        return "+".join(s.name for s in self.changes)

    def version(self, s: SourceRead, base: dict[str, int]) -> int:
        """The version this term reads source ``s`` (not one of its changes) at."""
        return base[s.name] if s.name in self.old else s.version


def change_terms(changed: list[SourceRead], base: dict[str, int] | None = None) -> list[Term]:
    """The change terms of ``changed`` (the module's docstring): every non-empty subset, single sources first,
    each other source at its new version; over :data:`MAX_NEW_ONLY` sources, or where every source a term
    would read at its old version (``base``) is read there as a plain file list (:func:`_old_reads_cheap`),
    the telescoping (one term per source, the sources after it at their old versions)."""
    if len(changed) > MAX_NEW_ONLY or (base is not None and _old_reads_cheap(changed, base)):
        return [Term((s,), frozenset(o.name for o in changed[i + 1 :]), 1) for i, s in enumerate(changed)]
    return [
        Term(subset, frozenset(), 1 if k % 2 else -1)
        for k in range(1, len(changed) + 1)
        for subset in itertools.combinations(changed, k)
    ]


def _old_reads_cheap(changed: list[SourceRead], base: dict[str, int]) -> bool:
    """Would the telescoping read its old versions as cheaply as the newest? Yes where each is a table's
    snapshot read as a plain file list (:func:`mvsink.spark.sources.plain_files`: any version costs the same,
    where Delta's reader rebuilds an old snapshot per read): then its n terms beat the 2^n - 1 of reading the
    newest versions only (Q3 and Q5 over orders and lineitem: two terms, not three)."""
    from mvsink.spark.sources import plain_files

    return len(changed) > 1 and all(
        s.kind != "view" and plain_files(s.path, base[s.name]) is not None for s in changed[:-1]
    )


class ChangeFrames(dict[str, "tuple[DataFrame, DataFrame]"]):
    """Each changed source's (inserted, deleted) rows, and (once asked) the pruned reads of each change term
    (:func:`term_reads`, by :attr:`Term.key`); ``files``: the change files of the sources whose changes are
    plain Parquet files (their join keys are then read in the driver, without a Spark job).

    A source's frames may be :meth:`defer`-red: made when first looked up (building them costs Spark
    analysis, which the scan guard's estimate does not need)."""

    pruned: dict[str, list[PrunedRead]] | None = None
    files: dict[str, keyreads.ChangeFiles] | None = None
    sets: dict[str, ChangeSet] | None = None  # the change sets behind ``files`` (inserted, deleted, change feed)
    tree: Callable[[], PlanNode] | None = None  # the query's plan as the mode read it (the terms' join edges)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._pending: dict[str, Callable[[], tuple[DataFrame, DataFrame]]] = {}

    def defer(self, name: str, make: Callable[[], tuple[DataFrame, DataFrame]]) -> None:
        """Source ``name``'s frames are ``make()``, called when first looked up."""
        self._pending[name] = make

    def __missing__(self, name: str) -> tuple[DataFrame, DataFrame]:
        if name not in self._pending:
            raise KeyError(name)
        got = self._pending.pop(name)()
        self[name] = got
        return got

    def made(self) -> ChangeFrames:
        """Every deferred frame made (for iteration over the mapping)."""
        for name in list(self._pending):
            self[name]  # noqa: B018 (made by __missing__)
        return self

    def __contains__(self, name: object) -> bool:
        return super().__contains__(name) or name in self._pending

    def __len__(self) -> int:
        return super().__len__() + len(self._pending)

    def __iter__(self) -> Iterator[str]:
        return iter(list(super().keys()) + list(self._pending))

    def keys(self):  # type: ignore[no-untyped-def]
        return dict.keys(self.made())

    def values(self):  # type: ignore[no-untyped-def]
        return dict.values(self.made())

    def items(self):  # type: ignore[no-untyped-def]
        return dict.items(self.made())

    def get(self, name: str, default: Any = None) -> Any:
        return self[name] if name in self else default


# A term's registrations of its change sources (name -> frame) and the function that makes it once they are.
Choice = tuple[dict[str, "DataFrame"], "Callable[[], DataFrame]"]


def telescope(ct: ChangeTerms, term: Callable[[int], DataFrame]) -> list[DataFrame]:
    """``term(weight)`` once per change term and choice of inserted or deleted rows of each of its change sets
    (``weight``: the term's coefficient times the choices' signs), with the sources registered as that term
    reads them. Leaves every source registered at the version ``ct.desc`` reads."""
    frames = ct.frames

    def choices(t: Term) -> list[Choice]:
        out: list[Choice] = []
        for signs in itertools.product((1, -1), repeat=len(t.changes)):
            regs = {s.name: frames[s.name][0 if sign > 0 else 1] for s, sign in zip(t.changes, signs, strict=True)}
            weight = t.coefficient * math.prod(signs)
            out.append((regs, lambda weight=weight: term(weight)))  # type: ignore[misc]
        return out

    return _telescoping(ct, choices)


def _telescoping(ct: ChangeTerms, choices: Callable[[Term], list[Choice]]) -> list[DataFrame]:
    """The loop of :func:`telescope` and :func:`telescope_signed`: for each :class:`Term`, every other source
    registered at the version the term reads it (filtered by the term's join keys where :func:`term_reads`
    says so), then each of ``choices(term)``: its change frames registered and the term made. Leaves every
    source registered at the version ``ct.desc`` reads."""
    spark, desc, base = ct.spark, ct.desc, ct.base
    terms: list[DataFrame] = []
    pruned = term_reads(ct)
    cache: dict[tuple[str, bool], DataFrame] = {}  # each source's read at a version made once (Delta loads it once)
    current: dict[str, tuple[bool, int] | None] = {s.name: (False, 0) for s in desc.sources}  # as registered now
    try:
        for t in change_terms(ct.changed, base):
            reads = {r.source: r for r in pruned.get(t.key, [])}
            made = choices(t)
            mine = {s.name for s in t.changes}
            for o in desc.sources:
                if o.name in mine:
                    current[o.name] = None
                    continue
                old = o.name in t.old
                r = reads.get(o.name)
                for _ in made:
                    if r is not None:
                        record(o.name, bytes_read=r.bytes, files=r.files)
                    elif o.kind != "view":
                        record_whole(o.name, o.path, t.version(o, base))
                state = (old, id(r) if r is not None else 0)
                if current.get(o.name) != state:
                    _register_source(ct, o, old=old, read=r, cache=cache)
                    current[o.name] = state
            for regs, make in made:
                for name, frame in regs.items():
                    frame.createOrReplaceTempView(name)
                got = make()
                # Classic Spark binds temp views when spark.sql analyses; Spark Connect re-analyses the SQL
                # at execution, after the views were re-registered, so there each term is pinned first.
                terms.append(got.localCheckpoint(eager=True) if is_connect(spark) else got)
    finally:
        for src in desc.sources:  # back at the version desc reads
            if current.get(src.name) != (False, 0):
                _register_source(ct, src, old=False, cache=cache)
    return terms


def term_reads(ct: ChangeTerms) -> dict[str, list[PrunedRead]]:
    """For each change term (:func:`change_terms`, by :attr:`Term.key`), the other sources it reads pruned by
    its change sets' join keys (:mod:`mvsink.incremental.pruning`; one Spark job per key source). Asked once per
    refresh: the result is kept on ``ct.frames`` when it is a :class:`ChangeFrames`."""
    desc, base, frames = ct.desc, ct.base, ct.frames
    if isinstance(frames, ChangeFrames) and frames.pruned is not None:
        return frames.pruned
    out: dict[str, list[PrunedRead]] = {}
    if len(desc.sources) > 1:
        files = frames.files if isinstance(frames, ChangeFrames) else None
        tree = frames.tree if isinstance(frames, ChangeFrames) else None
        tp = pruning.TermPruning(ct.spark, ct.view.query, list(desc.sources), change_files=files, tree=tree)
        key = _reads_key(ct, tp, files is not None)
        if _LAST_READS and _LAST_READS[0][0] == key:
            out = _LAST_READS[0][1]
        else:
            cache: dict[tuple[str, bool], DataFrame] = {}
            out = _pruned(
                tp,
                desc,
                base,
                ct.changed,
                lambda o, old: functools.partial(_source_frame, ct, o, old=old, cache=cache),
                lambda name: functools.partial(_both, frames, name),
            )
            _LAST_READS[:] = [(key, out)]
    if isinstance(frames, ChangeFrames):
        frames.pruned = out
    return out


# The last pruned reads made (one entry): the modes a write step tries in turn (the aggregate state, then the affected
# groups) ask for the same terms' reads, whose key sets may each cost a Spark job (TPC-H Q9 on a change of part,
# partsupp and supplier at SF 1: ~5 s of key jobs, twice, before the full diff)
_LAST_READS: list[tuple[tuple[Any, ...], dict[str, list[PrunedRead]]]] = []


def _reads_key(ct: ChangeTerms, tp: pruning.TermPruning, driver_files: bool) -> tuple[Any, ...]:
    """What :func:`term_reads`' result is a function of: the batch, each source's location and version, the versions
    of the last refresh, the changed sources, the plan's join edges, where the change sets' keys are read, and the
    pruning's size threshold (pruned reads are values: key ranges and files, no frames)."""
    desc = ct.desc
    return (
        str(desc.target),
        desc.lower,
        desc.time,
        tuple((s.name, s.kind, str(s.path), s.version) for s in desc.sources),
        tuple(sorted(ct.base.items())),
        tuple(s.name for s in ct.changed),
        tuple(sorted((e.keys.source, e.keys.name, e.target.source, e.target.name) for e in tp.edges)),
        driver_files,
        tp.min_bytes,
    )


def driver_term_reads(
    desc: BatchDescription,
    base: dict[str, int],
    changed: list[SourceRead],
    files: dict[str, keyreads.ChangeFiles],
    edges: tuple[Edge, ...],
) -> dict[str, list[PrunedRead]]:
    """:func:`term_reads` without Spark, on the kept plan facts' join ``edges`` and the changed sources' plain change
    ``files``; raises :class:`~mvsink.incremental.pruning.SparkNeeded` where a key set needs a Spark job."""
    if len(desc.sources) < 2:
        return {}
    tp = pruning.TermPruning(None, "", list(desc.sources), change_files=files, edges=edges)
    return _pruned(tp, desc, base, changed, lambda o, old: pruning.spark_needed, lambda name: pruning.spark_needed)


def _pruned(
    tp: pruning.TermPruning,
    desc: BatchDescription,
    base: dict[str, int],
    changed: list[SourceRead],
    source_frame: Callable[[SourceRead, bool], Callable[[], DataFrame]],
    change_frame: Callable[[str], Callable[[], DataFrame]],
) -> dict[str, list[PrunedRead]]:
    """The loop of :func:`term_reads`: each term's pruned reads, with the frames a key collection may need."""
    out: dict[str, list[PrunedRead]] = {}
    if not tp.edges:
        return out
    for t in change_terms(changed, base):
        mine = {s.name for s in t.changes}
        read_at = {
            o.name: (pruning.lazy(source_frame(o, o.name in t.old)), t.version(o, base))
            for o in desc.sources
            if o.name not in mine and o.kind != "view"
        }
        seeds = {s.name: pruning.lazy(change_frame(s.name)) for s in t.changes}
        out[t.key] = tp.reads(seeds, read_at)
    return out


def _both(frames: dict[str, tuple[DataFrame, DataFrame]], name: str) -> DataFrame:
    plus, minus = frames[name]
    return plus.unionByName(minus)


def _source_frame(
    ci: ChangeInputs, s: SourceRead, *, old: bool, cache: dict[tuple[str, bool], DataFrame] | None = None
) -> DataFrame:
    """Source ``s`` as the last refresh read it (``old``) or as this batch reads it (``cache``: the reads
    already made, by source and ``old``)."""
    from mvsink.spark.sources import read_source

    desc = ci.desc
    key = (s.name, old)
    if cache is not None and key in cache:
        return cache[key]
    if s.kind == "view":  # an upstream view's table at this batch's version, its contents at the old time
        assert desc.base_time is not None
        version, time = s.version, desc.base_time if old else desc.time
    else:
        version, time = ci.base[s.name] if old else s.version, desc.time
    df = read_source(ci.spark, ci.view, s, version=version, time=time)
    if cache is not None:
        cache[key] = df
    return df


def _register_source(
    ci: ChangeInputs,
    s: SourceRead,
    *,
    old: bool,
    read: PrunedRead | None = None,
    cache: dict[tuple[str, bool], DataFrame] | None = None,
) -> None:
    """Register source ``s`` as the last refresh read it (``old``) or as this batch reads it (``read``: pruned by
    a term's join keys; ``cache``: the reads already made, by source and ``old``)."""
    df = _source_frame(ci, s, old=old, cache=cache)
    if read is not None:
        df = read.frame(ci.spark, s, ci.base[s.name] if old else s.version, df)
    df.createOrReplaceTempView(s.name)


SIGN = "_mv_sign"  # a signed change set's column: +1 an inserted row, -1 a deleted one


def signed_query(query: str, source: str | tuple[str, ...], *, weight: str = "_mv_diff") -> str | None:
    """``query`` with a last column ``weight`` = ``source``'s :data:`SIGN` column (of several sources: the product of
    theirs), or None where that is not sure.

    For the one-term-per-source telescoping (:func:`telescope_signed`): the query must be one SELECT block
    (no set operation, no ``*`` that would pick the sign column up, no CTE) that reads each source once,
    directly in its FROM/JOIN (not in a subquery); with several sources, no NATURAL join (it would join on
    the sign columns); or a projection and filter of one such block, a derived table (TPC-H Q7, Q8, Q9: ``SELECT ...
    FROM (SELECT ... FROM the sources) AS t``), the sign carried out through its alias. A rewrite of sqlglot's tree: its result is checked by Spark's analysis against the
    query's own columns before use (:func:`_signed_terms`).
    """
    import sqlglot
    from sqlglot import exp

    sources = (source,) if isinstance(source, str) else source
    try:
        tree = sqlglot.parse_one(query, dialect="spark")
    except sqlglot.errors.ParseError:
        return None
    if (
        not isinstance(tree, exp.Select)
        or tree.args.get("with_")  # (sqlglot's key of a WITH clause)
        or any(isinstance(e, exp.Star) for e in tree.expressions)
    ):
        return None
    if any(isinstance(e, exp.Column) and isinstance(e.this, exp.Star) for e in tree.expressions):
        return None
    derived = _derived_table(tree)
    if derived is not None:  # SELECT ... FROM (SELECT ... FROM the sources) AS t [WHERE ...]: signed within
        inner, alias = derived
        for name in sources:  # (read once in all: not again in the outer block's filter)
            if sum(1 for t in tree.find_all(exp.Table) if t.name.lower() == name.lower()) != 1:
                return None
        signed = signed_query(inner.sql(dialect="spark"), sources, weight=weight)
        if signed is None:
            return None
        inner.replace(sqlglot.parse_one(signed, dialect="spark"))
        tree.set("expressions", [*tree.expressions, exp.alias_(exp.column(weight, table=alias), weight)])
        return tree.sql(dialect="spark")
    if len(sources) > 1 and any("NATURAL" in str(j.args.get("method") or "").upper() for j in tree.find_all(exp.Join)):
        return None
    sign: exp.Expression | None = None
    for name in sources:
        refs = [t for t in tree.find_all(exp.Table) if t.name.lower() == name.lower()]
        if len(refs) != 1 or refs[0].args.get("db") or refs[0].find_ancestor(exp.Select) is not tree:
            return None
        if any(isinstance(t.parent, exp.Subquery) for t in refs):
            return None
        col = exp.column(SIGN, table=refs[0].alias_or_name)
        sign = col if sign is None else exp.Mul(this=sign, expression=col)
    if sign is None or len({n.lower() for n in sources}) != len(sources):
        return None
    tree.set("expressions", [*tree.expressions, exp.alias_(sign, weight)])
    return tree.sql(dialect="spark")


def _derived_table(tree: Any) -> tuple[Any, str] | None:
    """The one SELECT block ``tree`` reads from, and its alias, where ``tree`` is a projection (and filter) of it
    alone: ``SELECT ... FROM (SELECT ...) AS t [WHERE ...]`` (no join, aggregate, DISTINCT, window or limit in
    ``tree``, none in the inner block but its joins and filters); else None."""
    from sqlglot import exp

    src = tree.args.get("from_") or tree.args.get("from")
    if src is None or not isinstance(src.this, exp.Subquery) or tree.args.get("joins"):
        return None
    inner = src.this.this
    alias = src.this.alias_or_name
    plain = ("group", "having", "distinct", "limit", "offset", "order", "qualify", "windows", "with_", "laterals")
    for block in (tree, inner):
        if not isinstance(block, exp.Select) or any(block.args.get(k) for k in plain):
            return None
        if any(isinstance(e, exp.Window | exp.AggFunc) for x in block.expressions for e in x.walk()):
            return None
    if not alias:
        return None
    return inner, alias


def telescope_signed(
    ct: ChangeTerms,
    signed_sql: Callable[[tuple[str, ...]], str | None],
    *,
    finish: Callable[[DataFrame], DataFrame] | None = None,
    weight: str = "_mv_diff",
) -> list[DataFrame] | None:
    """:func:`telescope` with the change sets of each term read at once instead of twice each; None where the
    query cannot carry some changed source's sign (``signed_sql((name,))`` is None).

    Each is registered as its inserted and deleted rows together, :data:`SIGN` +1 or -1 on each, and
    ``signed_sql(source names)`` (e.g. :func:`signed_query`; asked once per tuple of names) is the query that
    carries the product of those columns on as the rows' ``weight`` column, or None for the sets that cannot
    be signed together; ``finish`` (if given) is applied to each term's query. A term of several change sets
    that are not signed together reads its first one signed and chooses the others' inserted or deleted rows as
    in :func:`telescope`, their signs multiplied into ``weight``; the term's coefficient is multiplied in too.
    Leaves every source registered at the version ``ct.desc`` reads.
    """
    from pyspark.sql import functions as F

    spark, frames = ct.spark, ct.frames
    sql = functools.cache(signed_sql)
    if not all(sql((s.name,)) for s in ct.changed):
        return None

    def signed(s: SourceRead) -> DataFrame:
        plus, minus = frames[s.name]
        return plus.withColumn(SIGN, F.lit(1).cast("int")).unionByName(minus.withColumn(SIGN, F.lit(-1).cast("int")))

    def make(names: tuple[str, ...], factor: int) -> DataFrame:
        got = spark.sql(sql(names) or "")
        got = got if finish is None else finish(got)
        return got if factor == 1 else got.withColumn(weight, F.col(weight) * F.lit(factor))

    def choices(t: Term) -> list[Choice]:
        names = tuple(s.name for s in t.changes)
        if len(names) > 1 and sql(names) is not None:  # every change set signed together: one choice
            regs = {s.name: signed(s) for s in t.changes}
            return [(regs, lambda: make(names, t.coefficient))]
        first, rest = t.changes[0], t.changes[1:]
        out: list[Choice] = []
        for signs in itertools.product((1, -1), repeat=len(rest)):
            regs = {first.name: signed(first)}
            regs.update({s.name: frames[s.name][0 if sign > 0 else 1] for s, sign in zip(rest, signs, strict=True)})
            factor = t.coefficient * math.prod(signs)
            out.append((regs, lambda factor=factor: make((first.name,), factor)))  # type: ignore[misc]
        return out

    return _telescoping(ct, choices)
