"""``mvsink explain VIEW``: for each source, the refresh mode a change of it would take, and if that is the full
diff, why and what would change it.

A static answer, decided on the view's analysed plan by the refresh modes' own ``applies``
(:mod:`mvsink.incremental.modes`), one source changed at a time, over the sources as they are now: no change is read.
A refresh may still take the full diff where a mode's guard on the data says so (a change set over
``MVSINK_INCREMENTAL_MAX_FRACTION`` of its table, the scan guard, too many affected groups); the report says
which guards apply to each mode.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from mvsink import settings
from mvsink.columns import ERROR, is_hidden
from mvsink.core.commitinfo import REASON_HINTS
from mvsink.core.sourceschema import source_columns
from mvsink.core.table import ViewTable, open_readable
from mvsink.definitions.intermediate import NOT_INCREMENTAL, intermediate_split
from mvsink.exceptions import SourceError
from mvsink.incremental.aggplan import StatePlan, state_plan
from mvsink.incremental.costguard import PARTITIONED, change_estimates
from mvsink.incremental.duckdbterms import DRIVER_SCAN_FACTOR
from mvsink.incremental.modes.base import Change, NotApplicable, PlanFacts, RefreshMode
from mvsink.incremental.modes.linear import Linear
from mvsink.incremental.modes.registry import REFRESH_MODES, choose
from mvsink.incremental.modes.topk import TopK
from mvsink.incremental.partitioned import SCAN_FACTOR
from mvsink.incremental.pruning import pruned_reads
from mvsink.plan.joinkeys import Edge, join_edges
from mvsink.plan.splits import aggregate_split
from mvsink.spark.conf import apply_storage_conf
from mvsink.spark.sources import read_source
from mvsink.spark.validation import analyse
from mvsink.write.driver import spark_free_outlook

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from mvsink.core.batch import SourceRead
    from mvsink.definitions.catalog import Catalog
    from mvsink.definitions.view import ViewDefinition

CDF = "delta.enableChangeDataFeed"


@dataclasses.dataclass(frozen=True)
class ModeDecision:
    """One mode's answer for a change of one source: ``applies``, else why not (``kind``: see
    :data:`mvsink.incremental.modes.base.Kind`); for a mode turned off, ``fits_when_on``: would it apply with its
    setting on (else ``when_on_reason``: why not)."""

    mode: str
    applies: bool
    kind: str | None = None
    reason: str | None = None
    setting: str | None = None
    fits_when_on: bool | None = None
    when_on_reason: str | None = None  # why it would not apply with its setting on either


@dataclasses.dataclass(frozen=True)
class SourceExplain:
    """The mode a change of ``source`` would take (``label`` in words), why not an incremental one (``why``),
    what would make it incremental or cheaper (``fixes``), and each mode's answer."""

    source: str
    kind: str  # "path" (a Delta table) or "view" (an upstream view)
    mode: str
    label: str
    why: str | None
    fixes: tuple[str, ...]
    guard: str | None
    change_data_feed: bool | None  # the table's delta.enableChangeDataFeed (None: a view source)
    decisions: tuple[ModeDecision, ...]
    # the other sources its change term reads filtered by join keys: "lineitem by l_orderkey (orders.o_orderkey)"
    pruned: tuple[str, ...] = ()
    # the cost model's estimate of each candidate (mode/engine, or full): {"mode", "seconds", "basis", "points"};
    # empty where the mode has no scan guard (the model does not choose for it)
    estimates: tuple[dict[str, Any], ...] = ()
    cost_pick: str | None = None  # the candidate the cost model would pick
    cost_why: str | None = None  # why, and whether it decides (MVSINK_COST_MODEL)


@dataclasses.dataclass(frozen=True)
class ExplainReport:
    """What ``mvsink explain`` says of a view: its facts, then per source the mode a change of it would take."""

    view: str
    incremental: bool
    key: tuple[str, ...]
    checks: tuple[str, ...]
    table_exists: bool
    state_columns: tuple[str, ...]
    state_reason: str | None  # why the view keeps no aggregate state
    group_keys: tuple[str, ...]  # the keys of its top aggregate, DISTINCT or window (the affected-groups split)
    sources: tuple[SourceExplain, ...]
    # can its next small refresh run without Spark ("yes: ..." or "no: why"; write/driver.py)
    without_spark: str = ""
    # a top-k over an aggregate: how it is refreshed through its intermediate table (the rest is of that table)
    intermediate: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def summary(self) -> str:
        """The report as text, one line per fact and per source, its why and fixes indented below."""
        lines = [
            f"view {self.view}: incremental: {'true' if self.incremental else 'false'}; "
            f"key: {', '.join(self.key) or '(none declared)'}; checks: {', '.join(self.checks) or 'none'}"
            + ("" if self.table_exists else "; no table yet (the first refresh is a full diff)")
        ]
        if self.intermediate:
            lines.append(f"  {self.intermediate}")
        if self.state_columns:
            lines.append(f"  aggregate state kept: {', '.join(self.state_columns)}")
        else:
            lines.append(f"  no aggregate state: {self.state_reason or 'none kept'}")
        if self.group_keys:
            lines.append(f"  groups by: {', '.join(self.group_keys)}")
        if self.without_spark:
            lines.append(f"  without Spark: {self.without_spark}")
        for s in self.sources:
            what = "view" if s.kind == "view" else "table"
            lines.append(f"  a change of `{s.source}` ({what}) → {s.label}")
            if s.why:
                lines.append(f"      why: {s.why}")
            for f in s.fixes:
                lines.append(f"      fix: {f}")
            if s.guard:
                lines.append(f"      at refresh time: {s.guard}")
            for p in s.pruned:
                lines.append(f"      reads {p}")
            if s.estimates:
                est = ", ".join(f"{e['mode']} {e['seconds']:.2f} s ({e['basis']})" for e in s.estimates)
                lines.append(f"      estimates: {est}")
                lines.append(f"      cost model: would pick {s.cost_pick}: {s.cost_why}")
        return "\n".join(lines)


def explain_view(view: ViewDefinition, *, catalog: Catalog, spark: SparkSession) -> ExplainReport:
    """Explain ``view`` (see the module docstring) on ``spark``, which gets each source as a temp view. A top-k over
    an aggregate refreshed through an intermediate table (:mod:`mvsink.definitions.intermediate`) is explained by
    that table's modes, as is an aggregate in a WITH clause."""
    split = intermediate_split(view, columns_of=source_columns)
    if split is not None:
        inner = explain_view(split.inner, catalog=catalog, spark=spark)
        return dataclasses.replace(
            inner,
            view=view.name,
            key=tuple(view.key),
            table_exists=ViewTable.open(view).exists,
            intermediate=(
                f"refreshed through its intermediate table {split.inner.name} ({split.inner.target}, every group of "
                f"its aggregate)"
                + "".join(f" and {v.name} ({v.target})" for v in split.more)
                + f", refreshed first; the view is {split.outer_role}. Below: the intermediate table's "
                "state and modes"
            ),
        )
    apply_storage_conf(spark, view)
    reads = _register_sources(spark, view, catalog)
    result = analyse(spark, view)
    table = ViewTable.open(view)
    columns = table.column_names if table.exists else []
    with_error = bool(view.checks) or ERROR in columns
    state, no_state = _state(spark, view, result, columns if table.exists else None, with_error=with_error)
    plan = PlanFacts(spark, view, result, state, with_error, no_state=no_state)
    edges = _edges(plan)
    sources = tuple(
        _with_estimates(
            dataclasses.replace(_explain_source(view, plan, s), pruned=_pruned(edges, s.name, reads)), reads, table
        )
        for s in reads
    )
    return ExplainReport(
        view=view.name,
        incremental=view.incremental,
        key=tuple(view.key),
        checks=tuple(c.name for c in view.checks),
        table_exists=table.exists,
        state_columns=tuple(state.state_columns) if state else (),
        state_reason=no_state,
        group_keys=_group_keys(plan),
        sources=sources,
        without_spark=spark_free_outlook(view, reads, table),
    )


def explain_json(view: ViewDefinition, *, catalog: Catalog, spark: SparkSession) -> dict[str, Any]:
    """:func:`explain_view` as a JSON-ready dict (for the views page and ``mvsink explain --json``)."""
    return explain_view(view, catalog=catalog, spark=spark).to_dict()


def _with_estimates(s: SourceExplain, reads: list[SourceRead], table: ViewTable) -> SourceExplain:
    """``s`` with the cost model's estimates for a change of its source (where its mode has a scan guard)."""
    got = change_estimates(
        s.mode, s.source, reads, table, driver_factor=DRIVER_SCAN_FACTOR, partition_factor=SCAN_FACTOR
    )
    if got is None:
        return s
    decides = (
        f"{settings.COST_MODEL.name} is on: it decides"
        if settings.cost_model()
        else f"{settings.COST_MODEL.name} is off: the scan guard decides ({got.prior_picked})"
    )
    return dataclasses.replace(
        s,
        estimates=tuple(
            {"mode": e.key, "seconds": round(e.seconds, 4), "basis": e.basis, "points": e.points} for e in got.estimates
        ),
        cost_pick=got.picked,
        cost_why=f"{got.why}; {_estimate_basis(s.mode)}; {decides}",
    )


def _estimate_basis(mode: str) -> str:
    """What explain's estimate of ``mode`` reads, not knowing the change."""
    if mode == PARTITIONED:
        return "the recompute's reads are the last recorded recompute's (else both versions read whole: an upper bound)"
    return "the change terms read the other sources unpruned here (an upper bound)"


def _register_sources(spark: SparkSession, view: ViewDefinition, catalog: Catalog) -> list[SourceRead]:
    """Each source as a temp view, as it is now (a table's latest version; an upstream view's newest contents)."""
    from mvsink.core.batch import SourceRead

    out = []
    for s in view.sources:
        role = f"view {view.name}: source '{s.name}'"
        if s.kind == "path":
            assert s.path is not None
            dt = open_readable(s.path, role=role)
            read = SourceRead(name=s.name, kind="path", path=s.path, version=dt.version())
            time = 0
        else:
            up = catalog.upstream(view, s)
            fr = ViewTable.open(up, check=False).frontier
            if fr.version < 0:
                raise SourceError(
                    f"{role}: view {up.name} has no table yet, so the query cannot be analysed. "
                    f"Fix: refresh {up.name} first (mvsink refresh {up.name} --at ...)."
                )
            read = SourceRead(name=s.name, kind="view", path=up.target, version=fr.version, view=up.name)
            time = max(fr.upper - 1, fr.since)
        read_source(spark, view, read, version=read.version, time=time).createOrReplaceTempView(s.name)
        out.append(read)
    return out


def _state(
    spark: SparkSession, view: ViewDefinition, result: DataFrame, columns: list[str] | None, *, with_error: bool
) -> tuple[StatePlan | None, str | None]:
    """The aggregate state the table keeps (or a new table would), else None and why (as write decides it)."""
    have = [c for c in columns if is_hidden(c)] if columns is not None else None
    if have == []:
        return None, "the table was created without it (a new target path would add it)"
    if have is None and not view.incremental:
        return None, NOT_INCREMENTAL
    if have is None and with_error:
        return None, "the view has checks"
    plan = state_plan(spark, view, result)
    if isinstance(plan, str):
        return None, plan
    if have is not None and list(plan.state_columns) != have:
        return None, (
            f"the table holds state {have} for an earlier definition, which the query cannot keep: the next "
            "refresh is refused (point `target` at a new table path to rebuild the view)"
        )
    return plan, None


def _group_keys(plan: PlanFacts) -> tuple[str, ...]:
    tree = plan.desired_tree
    split = tree if isinstance(tree, str) else aggregate_split(tree)
    if isinstance(split, str):
        return ()
    columns = plan.desired.columns
    return tuple(columns[p] for p in split.key_positions)


def _edges(plan: PlanFacts) -> list[Edge]:
    tree = plan.tree  # (the change terms evaluate the view's query, or the input query of the same joins)
    return [] if isinstance(tree, str) else join_edges(tree)


def _pruned(edges: list[Edge], source: str, sources: list[SourceRead]) -> tuple[str, ...]:
    """What the term of a change of ``source`` reads filtered by join keys (table sources only; a source
    under ``MVSINK_INCREMENTAL_PRUNE_MIN_BYTES`` is read whole at refresh time)."""
    tables = {s.name.casefold() for s in sources if s.kind != "view"}
    return tuple(
        f"`{e.target.source}` where {e.target.name} is among the keys of {e.keys.source}.{e.keys.name}"
        for e in pruned_reads(edges, source)
        if e.target.source.casefold() in tables
    )


def _explain_source(view: ViewDefinition, plan: PlanFacts, s: SourceRead) -> SourceExplain:
    """The registry's choice for a change of ``s`` alone (:func:`~mvsink.incremental.modes.registry.choose`,
    judged on the plan), each mode's answer, and what would make it incremental or cheaper."""
    cdf = _change_data_feed(view, s)
    refusal = None if view.incremental else NotApplicable(NOT_INCREMENTAL, "change")
    change = Change((s.name,), refusal)
    got = choose(REFRESH_MODES, plan, change, None, run=False)
    assert got.chosen is not None  # (the registry ends with the full diff, which always applies)
    decisions: list[ModeDecision] = []
    turned_on: list[tuple[RefreshMode, NotApplicable]] = []  # why a mode turned off would not apply either
    for mode, d in got.refusals:
        if d is refusal:  # the change's refusal, no mode's answer
            continue
        when_on = mode.fits(plan, change) if d.kind == "disabled" else None
        fits = when_on is None if d.kind == "disabled" else None
        why_off = when_on.reason if when_on is not None else None
        decisions.append(ModeDecision(mode.name, False, d.kind, d.reason, d.setting, fits, why_off))
        if when_on is not None:
            turned_on.append((mode, when_on))
    if not got.full:
        decisions.append(ModeDecision(got.mode, True))
    fixes = _fixes(view, plan, s, [*got.refusals, *turned_on], full=got.full)
    if not got.full and s.kind == "path" and cdf is False:
        fixes.append(
            f"enable {CDF} on the table of `{s.name}` (ALTER TABLE ... SET TBLPROPERTIES ('{CDF}' = 'true')): "
            "without it a DELETE, UPDATE or MERGE's change set is every file it rewrote, and one over "
            f"{settings.INCREMENTAL_MAX_FRACTION.name} of the table takes the full diff"
        )
    return SourceExplain(
        source=s.name,
        kind=s.kind,
        mode=got.mode,
        label=got.chosen.label,
        why=got.reason if got.full else None,
        fixes=tuple(fixes),
        guard=got.chosen.guard,
        change_data_feed=cdf,
        decisions=tuple(decisions),
    )


def _change_data_feed(view: ViewDefinition, s: SourceRead) -> bool | None:
    if s.kind != "path":
        return None
    dt = open_readable(s.path, version=s.version, role=f"view {view.name}: source '{s.name}'")
    return str(dt.metadata().configuration.get(CDF, "false")).lower() == "true"


def _fixes(
    view: ViewDefinition,
    plan: PlanFacts,
    s: SourceRead,
    refusals: list[tuple[RefreshMode, NotApplicable]],
    *,
    full: bool,
) -> list[str]:
    """What would let a change of ``s`` take an incremental mode (when none applies), the cheapest first."""
    if not full:
        return []
    if not view.incremental:
        return ["set `incremental: true` in the view file (the default)"]
    out: list[str] = []
    for mode, r in refusals:
        if r.kind == "disabled" and mode.fits(plan, Change((s.name,))) is None:
            out.append(f"set {r.setting}=true: a change of `{s.name}` would then refresh by {mode.label}")
    if any(r.kind == "checks" for _, r in refusals):
        out.append(
            "move the view's checks to a view over this one: a view with checks refreshes incrementally only "
            "when its query is linear"
        )
    topk = next((r for m, r in refusals if isinstance(m, TopK) and r.kind == "shape"), None)
    off = next((r.setting for m, r in refusals if isinstance(m, TopK) and r.kind == "disabled"), None)
    also = f" (and set {off}=true for the top-k refresh)" if off else ""
    if topk is not None and not view.key:
        out.append(
            "declare the view's `key` (columns unique per row) and list all of it in the ORDER BY, as plain "
            f"columns of the view: ties make the top k arbitrary{also}"
        )
    elif topk is not None and "key column" in topk.reason:
        out.append(f"list every key column ({', '.join(view.key)}) in the ORDER BY, as plain columns of the view{also}")
    linear = refusals[0][1].reason if refusals else ""
    for words, hint in REASON_HINTS:
        if any(w in linear for w in words):
            out.append(hint)
            break
    if not out and any(not isinstance(m, Linear) and r.kind == "shape" for m, r in refusals):
        out.append(
            "rewrite the query: COUNT/SUM/AVG of integers or decimals in one GROUP BY keep state; other "
            "aggregates, DISTINCT and windows need their keys (GROUP BY, PARTITION BY) as plain columns of the "
            "view; ORDER BY ... LIMIT needs a declared key"
        )
    return out
