"""Plan facts kept for refreshes without Spark: what a small aggregate refresh in the driver needs of Spark's
analysis, written by a Spark refresh beside the view's table and read by the next ones (this module owns the
format: ``<target>/_mv_plans/<key>.json``).

A refresh whose change terms DuckDB evaluated and whose state Python merged and finalised
(:mod:`mvsink.incremental.modes.aggregate`) used, of Spark, only facts of the plan: the Arrow schema each source is
read as, each change term's SQL (translated to DuckDB's, with the change sets' signs), the join edges that prune
the terms' reads, which sources the aggregate's input is linear in, and the state's types
(:class:`~mvsink.incremental.aggfacts.AggregateFacts`). :func:`remember` keeps them under a key of everything they
were derived from — the view's query, options and Spark settings, each source's location and Delta schema
(partition columns, column mapping), the table's columns and the facts' format — so the next refresh of the same
definition over the same schemas finds them (:func:`recall`) and runs in the refreshing process
(:mod:`mvsink.write.driver`) without a Spark session. What Spark's server decides on its own (ANSI mode) is
taken again after ``MVSINK_PLAN_FACTS_MAX_AGE``. Facts that cannot be kept or read are not an error: the refresh
runs on Spark.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import logging
import time
from typing import TYPE_CHECKING, Any, Final

from mvsink.columns import DIFF, TIME
from mvsink.incremental.aggfacts import AggregateFacts
from mvsink.location import joinpath
from mvsink.plan.joinkeys import Column, Edge

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    import pyarrow as pa
    from pyspark.sql import DataFrame

    from mvsink.core.batch import BatchDescription, SourceRead, WriteMode
    from mvsink.core.table import ViewTable
    from mvsink.definitions.view import ViewDefinition
    from mvsink.incremental.aggplan import StatePlan
    from mvsink.incremental.telescope import ChangeInputs
    from mvsink.location import Where
    from mvsink.plan.tree import PlanNode

log = logging.getLogger(__name__)

FOLDER: Final = "_mv_plans"
FORMAT: Final = 2  # bumped whenever what the facts mean changes: older files are then never found
AGGREGATE: Final[WriteMode] = "incremental:aggregate"
LINEAR: Final[WriteMode] = "incremental"
FULL: Final[WriteMode] = "full"  # a full diff DuckDB evaluates: ``terms[""]`` its query (remember_full)


@dataclasses.dataclass(frozen=True)
class FullDiffQuery:
    """What DuckDB's full diff of a view evaluates, once Spark's plan allowed it: ``query`` (DuckDB SQL of the
    view's rows over the sources by name), each source's read (``schemas``: the columns it gives, DuckDB's types)
    and the table's Arrow ``schema`` of the query's columns; ``full_for``: the change sets (term keys) no
    incremental mode applies to, by the plan (:func:`remember_full` keeps them)."""

    query: str
    schemas: dict[str, pa.Schema]
    schema: pa.Schema
    full_for: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class PartitionedTerm:
    """How DuckDB evaluated a partitioned recompute of an aggregate's input for one set of changed sources
    (:mod:`mvsink.incremental.partduck`), so that the next change of that set is recomputed without Spark
    (:mod:`mvsink.write.driverpart`): ``keys``, each keyed source's key column; ``tables``, the name the SQL reads
    each source under (``old``: at the last refresh's version); ``sql``, DuckDB's text over the new and over the
    old restricted sources; ``reads``, each keyed source's restricted rows as Spark types them (Arrow);
    ``widened``, each source as DuckDB reads it (decimals widened); ``pinned``, the versions of the unchanged
    sources a scalar subquery written into ``sql`` as a literal was evaluated over (the facts apply only while
    they are the versions read)."""

    keys: dict[str, str]
    tables: tuple[tuple[str, bool, str], ...]
    sql: tuple[str, str]
    reads: dict[str, pa.Schema]
    widened: dict[str, pa.Schema]
    pinned: dict[str, int]

    def to_dict(self) -> dict[str, Any]:
        from mvsink.core.schema import encode_schema

        return {
            "keys": self.keys,
            "tables": [list(t) for t in self.tables],
            "sql": list(self.sql),
            "reads": {k: encode_schema(v) for k, v in self.reads.items()},
            "widened": {k: encode_schema(v) for k, v in self.widened.items()},
            "pinned": self.pinned,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PartitionedTerm:
        from mvsink.core.schema import decode_schema

        new, old = d["sql"]
        return cls(
            keys={str(k): str(v) for k, v in d["keys"].items()},
            tables=tuple((str(a), bool(b), str(c)) for a, b, c in d["tables"]),
            sql=(str(new), str(old)),
            reads={k: decode_schema(v) for k, v in d["reads"].items()},
            widened={k: decode_schema(v) for k, v in d["widened"].items()},
            pinned={str(k): int(v) for k, v in d["pinned"].items()},
        )


@dataclasses.dataclass(frozen=True)
class DriverFacts:
    """The plan facts of one view definition over given source schemas (the module's docstring).

    ``terms``: per set of changed sources (their names joined by ``+`` in the view file's order) the DuckDB SQL of
    that change term (None: its sign could not be carried); ``made_at``: when (epoch milliseconds).
    """

    key: str
    made_at: int
    mode: str
    schemas: dict[str, pa.Schema]
    edges: tuple[Edge, ...]
    linear_in: tuple[str, ...]
    terms: dict[str, str | None]
    aggregate: AggregateFacts | None = None
    schema: pa.Schema | None = None
    full_for: tuple[str, ...] = ()  # (mode full) the change sets (term keys) no incremental mode applies to
    partitioned: dict[str, PartitionedTerm] = dataclasses.field(default_factory=dict)  # (aggregate) per term key

    @property
    def columns(self) -> tuple[str, ...]:
        """The table's columns of the view (visible, and an aggregate's hidden state)."""
        if self.aggregate is not None:
            return self.aggregate.columns
        assert self.schema is not None
        return tuple(c for c in self.schema.names if c not in (TIME, DIFF))

    def to_json(self) -> str:
        from mvsink.core.schema import encode_schema

        return json.dumps(
            {
                "format": FORMAT,
                "key": self.key,
                "made_at": self.made_at,
                "mode": self.mode,
                "schemas": {k: encode_schema(v) for k, v in self.schemas.items()},
                "edges": [[e.keys.source, e.keys.name, e.target.source, e.target.name] for e in self.edges],
                "linear_in": list(self.linear_in),
                "terms": self.terms,
                "aggregate": None if self.aggregate is None else self.aggregate.to_json(),
                "schema": None if self.schema is None else encode_schema(self.schema),
                "full_for": list(self.full_for),
                "partitioned": {k: v.to_dict() for k, v in self.partitioned.items()},
            },
            indent=1,
        )

    @classmethod
    def from_json(cls, text: str) -> DriverFacts:
        from mvsink.core.schema import decode_schema

        d = json.loads(text)
        if d.get("format") != FORMAT:
            raise ValueError(f"plan facts of format {d.get('format')!r}, not {FORMAT}")
        return cls(
            key=str(d["key"]),
            made_at=int(d["made_at"]),
            mode=str(d["mode"]),
            schemas={k: decode_schema(v) for k, v in d["schemas"].items()},
            edges=tuple(Edge(Column(a, b), Column(c, e)) for a, b, c, e in d["edges"]),
            linear_in=tuple(d["linear_in"]),
            terms={k: (None if v is None else str(v)) for k, v in d["terms"].items()},
            aggregate=None if d.get("aggregate") is None else AggregateFacts.from_json(d["aggregate"]),
            schema=None if d.get("schema") is None else decode_schema(d["schema"]),
            full_for=tuple(d.get("full_for") or ()),
            partitioned={k: PartitionedTerm.from_dict(v) for k, v in (d.get("partitioned") or {}).items()},
        )


def term_key(names: tuple[str, ...] | list[str]) -> str:
    """The key of a change term's SQL in :attr:`DriverFacts.terms`: its changed sources' names."""
    return "+".join(names)


def facts_key(
    view: ViewDefinition, reads: Sequence[SourceRead], table: ViewTable, *, columns: Sequence[str] | None = None
) -> str | None:
    """The key plan facts of ``view`` are kept under for the sources at the versions ``reads`` gives and the table
    as it is (or as a first build makes it: ``columns``, every column of the table in its order), or None where a
    source is not a Delta table (at a path, or a view's) or its log cannot be read here."""
    sources: list[list[Any]] = []
    for s in reads:
        if s.kind not in ("path", "view") or s.version < 0:
            return None
        schema = _delta_schema(s)
        if schema is None:
            return None
        sources.append([s.name, str(s.path), schema] + ([s.kind, s.view] if s.kind == "view" else []))
    parts = {
        "format": FORMAT,
        "query": view.query,
        "incremental": view.incremental,
        "checks": len(view.checks),
        "spark_conf": sorted(view.spark_conf.items()),
        "sources": sources,
        "table": list(table.column_names if columns is None else columns),
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:32]


def _delta_schema(s: SourceRead) -> list[Any] | None:
    """Source ``s``'s Delta schema at the version read (its JSON, partition columns and table properties)."""
    import functools

    from mvsink.core.deltalog import cached_snapshot
    from mvsink.core.table import open_delta

    dt = cached_snapshot(("delta", s.path, s.version), functools.partial(open_delta, s.path, version=s.version))
    if dt is None:
        return None
    meta = dt.metadata()
    return [dt.schema().to_json(), list(meta.partition_columns), sorted((meta.configuration or {}).items())]


def facts_path(target: Where, key: str) -> Where:
    return joinpath(target, FOLDER, f"{key}.json")


def recall(view: ViewDefinition, reads: Sequence[SourceRead], table: ViewTable) -> DriverFacts | str:
    """The plan facts kept for ``view`` over the sources at the versions ``reads`` gives and ``table``, or why
    there are none (none kept, older than ``MVSINK_PLAN_FACTS_MAX_AGE``, unreadable)."""
    key = facts_key(view, reads, table)
    if key is None:
        return "a source is not a Delta table at a path"
    return _recall(table.path, key)


def _recall(target: Where, key: str) -> DriverFacts | str:
    """:func:`recall` of the facts kept under ``key`` beside the table at ``target``."""
    from mvsink import settings
    from mvsink.core import storage

    try:
        text = storage.read_text(facts_path(target, key))
    except Exception as exc:  # noqa: BLE001 (unreadable facts: Spark takes them again)
        return f"the kept plan facts could not be read ({type(exc).__name__})"
    if text is None:
        return "no plan facts kept for this definition and these source schemas"
    try:
        facts = DriverFacts.from_json(text)
    except (ValueError, KeyError, TypeError) as exc:
        return f"the kept plan facts are not readable ({exc})"
    age = time.time() - facts.made_at / 1000
    if facts.key != key or age > settings.plan_facts_max_age():
        return f"the kept plan facts are {age:.0f} s old (MVSINK_PLAN_FACTS_MAX_AGE)"
    return facts


def remember(
    ci: ChangeInputs,
    plan: StatePlan,
    tree: PlanNode,
    facts: AggregateFacts,
    table: ViewTable,
    *,
    columns: Sequence[str] | None = None,
) -> DriverFacts | None:
    """Keep the plan facts of this aggregate refresh, whose change terms DuckDB evaluated and whose state Python
    merged and finalised, for the next refreshes without Spark (unless fresh ones are kept already); the facts, or
    None where they are not kept (logged; never an error). ``tree``: the aggregate input's plan; ``columns``: the
    table's columns as a first build makes them (:func:`mvsink.incremental.modes.full.remember_built`)."""
    if facts.finalise is None:
        return None
    q = plan.queries
    return _keep(
        ci,
        table,
        lambda key: _derive(ci, key, AGGREGATE, q.input_query, q.signed_input, tree, aggregate=facts),
        columns=columns,
    )


def remember_partitioned(
    ci: ChangeInputs,
    plan: StatePlan,
    tree: PlanNode,
    facts: AggregateFacts,
    table: ViewTable,
    terms: dict[str, PartitionedTerm],
    *,
    columns: Sequence[str] | None = None,
) -> DriverFacts | None:
    """Keep how DuckDB evaluates a partitioned recompute of this aggregate's input (``terms``: per set of changed
    sources, by term key) beside the plan facts, so that the next refresh changing those sources runs without
    Spark; the facts, or None (logged; never an error). Facts kept already gain the terms. ``tree``: the aggregate
    input's plan; ``columns``: the table's columns as a first build makes them."""
    from mvsink import settings
    from mvsink.core import storage

    if facts.finalise is None or not settings.spark_free() or ci.desc.dry_run or not terms:
        return None
    if columns is None and not table.exists:
        return None
    key = facts_key(ci.view, ci.desc.sources, table, columns=columns)
    if key is None:
        return None
    try:
        kept = _recall(ci.desc.target, key)
        if isinstance(kept, str):
            q = plan.queries
            kept = _derive(ci, key, AGGREGATE, q.input_query, q.signed_input, tree, aggregate=facts)
        elif kept.mode != AGGREGATE or all(kept.partitioned.get(k) == v for k, v in terms.items()):
            return None
        made = dataclasses.replace(kept, partitioned={**kept.partitioned, **terms})
        storage.write_text(facts_path(ci.desc.target, key), made.to_json())
    except Exception:  # noqa: BLE001 (the refresh does not depend on them)
        log.warning("view %s: plan facts of the partitioned recompute not kept", ci.view.name, exc_info=True)
        return None
    log.info(
        "view %s: plan facts kept for partitioned recomputes without Spark of %s (%s)",
        ci.view.name,
        ", ".join(terms),
        key,
    )
    return made


def remember_linear(
    ci: ChangeInputs,
    desired: DataFrame,
    tree: PlanNode,
    table: ViewTable,
    *,
    columns: Sequence[str] | None = None,
) -> DriverFacts | None:
    """:func:`remember` for a linear view whose change terms DuckDB evaluated (``desired``: its query analysed,
    ``tree``: its plan)."""
    import functools

    from mvsink.columns import DIFF
    from mvsink.incremental.telescope import signed_query
    from mvsink.spark.sources import arrow_table_schema

    query = ci.view.query
    signed = functools.partial(signed_query, query, weight=DIFF)
    schema = arrow_table_schema(desired.schema)
    return _keep(ci, table, lambda key: _derive(ci, key, LINEAR, query, signed, tree, schema=schema), columns=columns)


def remember_full(
    view: ViewDefinition,
    desc: BatchDescription,
    table: ViewTable,
    spec: FullDiffQuery,
    *,
    columns: Sequence[str] | None = None,
) -> DriverFacts | None:
    """Keep what DuckDB's full diff of ``view`` evaluated (``spec``: its query and the sources' reads, as Spark's
    analysis allowed them) for the next refreshes of the same definition over the same schemas, which then run it
    without Spark (:func:`mvsink.write.driver.write_without_spark`); the facts, or None (logged; never an error).
    ``columns``: the table's columns as a first build makes them."""
    from mvsink import settings
    from mvsink.core import storage

    if not settings.spark_free() or desc.dry_run or (columns is None and not table.exists) or not spec.full_for:
        return None
    key = facts_key(view, desc.sources, table, columns=columns)
    if key is None:
        return None
    try:
        if not isinstance(_recall(desc.target, key), str):  # (fresh facts are kept already)
            return None
        made = DriverFacts(
            key=key,
            made_at=int(time.time() * 1000),
            mode=FULL,
            schemas=dict(spec.schemas),
            edges=(),
            linear_in=(),
            terms={"": spec.query},
            schema=spec.schema,
            full_for=spec.full_for,
        )
        storage.write_text(facts_path(desc.target, key), made.to_json())
    except Exception:  # noqa: BLE001 (the refresh does not depend on them)
        log.warning("view %s: plan facts of the full diff not kept", view.name, exc_info=True)
        return None
    log.info("view %s: plan facts kept for full diffs without Spark (%s)", view.name, key)
    return made


def _keep(
    ci: ChangeInputs,
    table: ViewTable,
    derive: Callable[[str], DriverFacts],
    *,
    columns: Sequence[str] | None = None,
) -> DriverFacts | None:
    from mvsink import settings
    from mvsink.core import storage

    if not settings.spark_free() or ci.desc.dry_run or (columns is None and not table.exists):
        return None  # (a dry run writes nothing)
    key = facts_key(ci.view, ci.desc.sources, table, columns=columns)
    if key is None:
        return None
    try:
        if not isinstance(_recall(ci.desc.target, key), str):  # (fresh facts are kept already)
            return None
        made = derive(key)
        if columns is not None and any(made.terms.get(term_key((n,))) is None for n in made.linear_in):
            # (a first build: no term ran in DuckDB yet, so facts only where each one-source term translates)
            log.info("view %s: plan facts not kept: a change term has no DuckDB SQL", ci.view.name)
            return None
        storage.write_text(facts_path(ci.desc.target, key), made.to_json())
    except Exception:  # noqa: BLE001 (the refresh does not depend on them)
        log.warning("view %s: plan facts not kept for refreshes without Spark", ci.view.name, exc_info=True)
        return None
    log.info("view %s: plan facts kept for refreshes without Spark (%s)", ci.view.name, key)
    return made


def _derive(
    ci: ChangeInputs,
    key: str,
    mode: WriteMode,
    query: str,
    signed: Callable[[tuple[str, ...]], str | None],
    tree: PlanNode,
    *,
    aggregate: AggregateFacts | None = None,
    schema: pa.Schema | None = None,
) -> DriverFacts:
    """The facts, from Spark's analysis (the sources registered at ``ci.desc``'s versions): ``query`` is what the
    change terms evaluate (an aggregate's input, or a linear view's query), ``signed`` its signed SQL per set of
    changed sources, ``tree`` its plan."""
    from mvsink.engines.duckdbsql import Untranslatable
    from mvsink.engines.duckdbtext import duckdb_schema, duckdb_sql
    from mvsink.incremental.duckdbterms import referenced_columns
    from mvsink.incremental.telescope import MAX_NEW_ONLY
    from mvsink.plan.joinkeys import join_edges
    from mvsink.plan.linearity import nonlinear_reason

    spark, desc = ci.spark, ci.desc
    columns = referenced_columns(query)
    zone = str(spark.conf.get("spark.sql.session.timeZone"))
    schemas = {s.name: duckdb_schema(spark.table(s.name).schema, columns, zone) for s in desc.sources}
    names = [s.name for s in desc.sources]
    terms: dict[str, str | None] = {}
    for k in range(1, min(len(names), MAX_NEW_ONLY) + 1):
        for subset in itertools.combinations(names, k):
            sql = signed(subset)
            try:
                terms[term_key(subset)] = None if sql is None else duckdb_sql(sql)
            except Untranslatable:
                terms[term_key(subset)] = None
    return DriverFacts(
        key=key,
        made_at=int(time.time() * 1000),
        mode=mode,
        schemas=schemas,
        edges=tuple(join_edges(tree)),
        linear_in=tuple(n for n in names if not nonlinear_reason(tree, n)),
        terms=terms,
        aggregate=aggregate,
        schema=schema,
    )
