"""The full diff (``full``): ``desired - persisted`` over the whole view, the mode that always applies and is
tried last (:data:`mvsink.incremental.modes.registry.REFRESH_MODES`).

Its reason is why no incremental mode ran: the other modes' refusals, or — its own decision, before any mode is
tried — why the refresh's change cannot be used at all (:func:`refresh_change`: no earlier refresh, the table
moved, no check counts to start from, ``incremental: false``, a source's change unknown). Two engines compute it:
the refreshing process (:func:`mvsink.engines.arrow.full_diff`) for a small view without checks, else Spark
(:func:`spark_full_diff`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from mvsink.columns import DIFF, ERROR, TIME
from mvsink.core.checks import add_counts
from mvsink.core.deltalog import current_reads, file_statistics, record_whole
from mvsink.engines.arrow import full_diff
from mvsink.incremental.linear import changed_sources, source_check
from mvsink.incremental.modes.base import Change, Corrections, Decision, NotApplicable, PlanFacts, WriteInputs
from mvsink.spark.declaredchecks import apply_checks
from mvsink.spark.sources import arrow_table_schema
from mvsink.spark.transforms import consolidate, corrections

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from mvsink.core.batch import WriteMode
    from mvsink.settings import Setting

NO_EARLIER = "no earlier refresh of this definition to start from"
NOT_INCREMENTAL = "incremental: false in the view file"
NO_CHECK_COUNTS = "the last refresh recorded no check counts to start from"


class FullDiff:
    """The full diff: always applies; its reason is the refusals before it (see the module docstring)."""

    name: Final[WriteMode] = "full"
    title: Final = "full diff"
    label: Final = "full diff"
    phrase: Final[str | None] = None
    setting: Final[Setting | None] = None
    guard: Final[str | None] = None

    def applies(self, plan: PlanFacts, change: Change) -> Decision:
        return None

    def fits(self, plan: PlanFacts, change: Change) -> Decision:
        return None

    def run(self, plan: PlanFacts, inputs: WriteInputs, change: Change) -> Corrections:
        """The corrections, computed in the refreshing process when the view is small and has no checks (its
        ``reason`` then says so), else by Spark (lazily: the stage runs it)."""
        _record_whole_reads(inputs)
        desired = inputs.state.desired if inputs.state else inputs.result
        if inputs.table.exists and not inputs.with_error:  # (checks are counted by Spark observations)
            desc = inputs.desc
            local = full_diff(desired, inputs.table, arrow_table_schema(desired.schema), lower=desc.lower, at=desc.time)
            if local is not None:
                return Corrections(local, f"a full diff in the driver: {local.num_rows} correction(s)")
        return Corrections(spark_full_diff(inputs, desired), "")


def unusable(reason: str) -> Change:
    """A change no incremental mode may try, and why (the full diff follows with that reason)."""
    return Change((), NotApplicable(reason, "change"))


def refresh_change(inputs: WriteInputs) -> Change:
    """The change this refresh applies (its changed sources), or — the full diff's own decision — why no
    incremental mode may try it (``refusal``, of kind ``change``).

    Reads no data (a view source's check reads its table's log)."""
    desc, view, table = inputs.desc, inputs.view, inputs.table
    base = desc.base_versions
    if not table.exists:
        return unusable(desc.full_reason or NO_EARLIER)
    if base is None:
        return unusable(NOT_INCREMENTAL if not view.incremental else desc.full_reason or NO_EARLIER)
    if table.frontier.version != desc.table_version:
        return unusable(f"the table moved from version {desc.table_version} to {table.frontier.version} after mint")
    zero = {c.name: {"action": c.action, "rows": 0} for c in view.checks}
    if view.checks and add_counts(view, desc.base_checks or {}, zero) is None:
        return unusable(NO_CHECK_COUNTS)
    why = source_check(desc, base)
    if why:
        return unusable(why)
    return Change(tuple(s.name for s in changed_sources(desc, base)))


def spark_full_diff(inputs: WriteInputs, desired: DataFrame) -> DataFrame:
    """The full diff by Spark: ``desired`` (with the view's checks applied) against the table's rows before the
    batch, consolidated (an empty table when there is none yet)."""
    from pyspark.sql import functions as F

    view, desc, with_error = inputs.view, inputs.desc, inputs.with_error
    persisted: DataFrame | None = None
    if inputs.table.exists:
        table_rows = inputs.table_df()
        user_t = [c for c in table_rows.columns if c not in (TIME, DIFF, ERROR)]
        err = [F.col(ERROR) if ERROR in table_rows.columns else F.lit(None).cast("string").alias(ERROR)]
        # the table's columns under the query's names and types (the table's strings carry no collation)
        stored = dict(zip(user_t, desired.schema.fields))
        renamed = table_rows.select(
            *[
                (F.col(a) if table_rows.schema[a].dataType == f.dataType else F.col(a).cast(f.dataType)).alias(f.name)
                for a, f in stored.items()
            ],
            *(err if with_error else []),
            TIME,
            DIFF,
        )
        persisted = consolidate(renamed, [c for c in renamed.columns if c not in (TIME, DIFF)], before=desc.lower)
    checked = apply_checks(desired, view, with_error=with_error, observation=inputs.check_obs)
    if persisted is None:
        persisted = inputs.spark.createDataFrame([], checked.schema).withColumn(DIFF, F.lit(0).cast("bigint"))
    return corrections(checked, persisted, time=desc.time)


def _record_whole_reads(inputs: WriteInputs) -> None:
    """The read log (:mod:`mvsink.incremental.pruning`) of a full diff: every table source whole and the view's
    table (``_table``), in place of what a mode that declined may have logged."""
    got = current_reads()
    if got is None:
        return
    got.sources.clear()
    for s in inputs.desc.sources:
        if s.kind != "view":
            record_whole(s.name, s.path, s.version)
    version = inputs.table.frontier.version if inputs.table.exists else -1
    table_files = file_statistics(inputs.desc.target, version, "") if version >= 0 else None
    if table_files is not None:
        got.add("_table", bytes_read=sum(f.size for f in table_files), files=len(table_files))
