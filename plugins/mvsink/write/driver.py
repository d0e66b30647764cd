"""The write step without Spark: a small refresh of an aggregate view computed and staged in the refreshing process.

Where a Spark refresh of the same definition over the same source schemas kept its plan facts
(:mod:`mvsink.incremental.driverfacts`), a small change is refreshed exactly as that refresh's aggregate mode did it
(:mod:`mvsink.incremental.modes.aggregate`): the changed sources' change sets from their Delta logs, the change
terms' reads pruned by the change's join keys, the terms evaluated by DuckDB, Δ per group summed there, merged with
the persisted state of those groups and finalised in Python, the corrections staged with pyarrow. No Spark session
is opened and no JVM started, whichever runner was asked for (spark-submit, Spark Connect, in-process).

Anything the facts or the data do not allow — no facts kept, a change not usable incrementally, a change set Spark
must read, the scan guard, a state invariant, more groups than the driver merges — is a reason, logged, and the
write step runs on Spark as before, which decides the mode itself.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import TYPE_CHECKING, Final

from mvsink import settings
from mvsink.columns import DIFF, ERROR, TIME
from mvsink.core.batch import BatchDescription, WriteReport
from mvsink.core.costrecord import commit_cost, note, noting
from mvsink.core.deltalog import snapshot_cache
from mvsink.core.readlog import current_reads, read_log, record_full_diff_reads
from mvsink.core.schema import encode_schema
from mvsink.core.table import ViewTable

if TYPE_CHECKING:
    from collections.abc import Sequence

    import pyarrow as pa

    from mvsink.core.batch import SourceRead
    from mvsink.core.deltalog import ChangeFile, ChangeSet
    from mvsink.definitions.view import ViewDefinition
    from mvsink.incremental.driverfacts import DriverFacts, PartitionedTerm
    from mvsink.incremental.keyreads import ChangeFiles

log = logging.getLogger(__name__)

ENGINE_NOTE = "change terms evaluated in the driver, without Spark"  # (the Spark refresh's note, and how)

# The refresh without Spark takes change terms that read at most the full diff's bytes (times the scan ratio), not
# DRIVER_SCAN_FACTOR times them as a Spark refresh's terms in the driver may: its pruned reads have no chained key
# sets (a Spark job's), and the full diff it would be weighed against runs in DuckDB too. TPC-H Q8 on a change of
# part and supplier (SF 1, 2026-11-29 22:26 UTC): its terms read lineitem and orders whole, 590 MB, in 10.8 s
# without Spark (1.74x an overwrite), where the Spark refresh took 0.41x.
# 1.05, not 1: the full diff it is weighed against runs on Spark (a session opened and the query analysed, about 1 s on
# a warm Connect server), so terms that read the full diff's bytes and a small table again still cost less: TPC-H
# Q11's total at SF 1 (a sum over partsupp, supplier and nation, 43.2 MB), whose terms read partsupp once and supplier
# again, ran on Spark (1.4 s) only to evaluate the same terms in the driver.
SPARK_FREE_SCAN_FACTOR: Final = 1.05


def write_without_spark(view: ViewDefinition, desc: BatchDescription) -> WriteReport | None:
    """The write step's report for ``desc`` computed and staged without Spark, or None (the reason logged) where
    the write step must run on Spark (the module's docstring)."""
    if not settings.spark_free():
        return None
    t0 = time.monotonic()
    with snapshot_cache(), read_log(), noting() as notes:
        # An update that keeps every changed source's row count (a price list update, say) is first checked for
        # touching no column the query reads: nothing to write costs less than any mode's terms.
        # A change that adds or removes rows (by the files' footers) touches what the query reads: not checked.
        kind = change_kind(desc)
        untouched_first = kind == UPDATES
        first = _untouched_write(view, desc, t0) if untouched_first else None
        got: WriteReport | str = first if first is not None else _write(view, desc, t0)
        if isinstance(got, str):
            other = None if kind != OTHER else _untouched_write(view, desc, t0)
            got = other or _view_topk_write(view, desc, t0) or _full_write(view, desc, t0) or got
    if isinstance(got, str):
        log.info("view %s: the write step runs on Spark: %s", view.name, got)
        return None
    notes.pop("engine", None)
    got = dataclasses.replace(got, cost=commit_cost(notes, engine="driver", spark_jobs=0, phases=got.phases))
    log.info("view %s: write step without Spark %.2fs (%s)", view.name, got.seconds, _phases(got))
    return got


def _phases(report: WriteReport) -> str:
    return ", ".join(f"{k} {v:.2f}s" for k, v in report.phases.items()) or "-"


def _write(view: ViewDefinition, desc: BatchDescription, t0: float) -> WriteReport | str:
    from mvsink.incremental.driverfacts import AGGREGATE, LINEAR, recall

    why = _refused(view, desc)
    if why:
        return why
    table = ViewTable.open_path(desc.target, view.name)
    fr = table.frontier
    if not table.exists:
        return "the view's table does not exist yet"
    if fr.upper > desc.lower:
        return "the batch is stale"
    if ERROR in table.column_names:
        return "the view's table keeps check results"
    facts = recall(view, desc.sources, table)
    if isinstance(facts, str):
        return facts
    if tuple(c for c in table.column_names if c not in (TIME, DIFF)) != facts.columns:
        return "the table's columns are not those the plan facts were kept for"
    mode = AGGREGATE if facts.aggregate is not None else LINEAR
    if facts.mode != mode:
        return f"plan facts of mode {facts.mode!r}"
    t1 = time.monotonic()
    got = _corrections(view, desc, table, facts)
    if isinstance(got, str):
        return got
    corr, reason = got
    log.info("view %s: %s diff (%s)", view.name, mode, reason)
    reads = current_reads()
    head = WriteReport.begun(
        desc,
        view=view.name,
        read_version=fr.version,
        table_upper=fr.upper,
        schema=encode_schema(facts.aggregate.schema if facts.aggregate is not None else _table_schema(facts)),
        mode=mode,
        mode_reason=reason,
        phases={"plan": t1 - t0, "corrections": time.monotonic() - t1},
        reads={} if reads is None else {k: dict(v) for k, v in reads.sources.items()},
        spark_jobs=0,
    )
    return _staged(view, desc, corr, head, t0)


def _staged(view: ViewDefinition, desc: BatchDescription, corr: pa.Table, head: WriteReport, t0: float) -> WriteReport:
    """The report of corrections computed in the driver: staged with pyarrow, or counted for a dry run."""
    from mvsink.write.job import local_sizes, stage

    if desc.dry_run:
        sizes = local_sizes(corr)
        log.info("view %s: dry run: %d rows to add, %d to retract", view.name, sizes["added"], sizes["retracted"])
        return dataclasses.replace(
            head,
            status="dry_run",
            rows_added=sizes["added"],
            rows_retracted=sizes["retracted"],
            seconds=time.monotonic() - t0,
        )
    return stage(view, desc, corr, head, check_counts=dict, t0=t0)


UPDATES: Final = "updates"  # every changed source changed by updates alone
RESIZED: Final = "resized"  # a changed source without change data feed files holds more or fewer rows
OTHER: Final = "other"


def updates_only(desc: BatchDescription) -> bool:
    """Did every changed source (a table: a view source that changed is not) change by updates alone since the last
    refresh: change data feed files of update images only, files removed and added holding as many rows (by their
    Parquet footers), no deletion vectors?"""
    return change_kind(desc) == UPDATES


def change_kind(desc: BatchDescription) -> str:
    """:data:`UPDATES` where :func:`updates_only`; :data:`RESIZED` where a changed source's commits (none with change
    data feed files) added and removed files holding different numbers of rows: its rows, projected on any columns,
    cannot consolidate to no change, so the change touches what the query reads (TPC-H's RF1 and RF2); else
    :data:`OTHER`."""
    from mvsink.core.deltalog import change_set
    from mvsink.incremental.linear import changed_sources

    base = desc.base_versions
    if base is None:
        return OTHER
    changed = changed_sources(desc, base)  # (a view source's contents change with time: its log says)
    if not changed or any(s.kind != "path" for s in changed):
        return OTHER
    kind = UPDATES
    for s in changed:
        if s.name not in base:
            return OTHER
        cs = change_set(s.path, base[s.name], s.version)
        if isinstance(cs, str) or cs.deletion_vectors or cs.bytes > 1024 * 1024 * 1024:
            return OTHER
        if not (cs.cdc or cs.inserted or cs.deleted):
            return OTHER
        if cs.cdc and not _cdc_updates_only(cs.cdc):
            kind = OTHER
            continue
        if cs.inserted or cs.deleted:  # (commits without change data feed files: their added and removed files)
            rows = [_footer_rows(cs.inserted), _footer_rows(cs.deleted)]
            if None in rows or rows[0] != rows[1]:
                log.info("source %s: %s row(s) added against %s removed: not an update only", s.name, *rows)
                if None not in rows and not cs.cdc:
                    return RESIZED
                kind = OTHER
    return kind


def _cdc_updates_only(files: Sequence[ChangeFile]) -> bool:
    """Do the change data feed ``files`` hold update images only (no insert, no delete)?"""
    import pyarrow.compute as pc

    from mvsink.engines.arrow import parquet_columns

    for f in files:
        t = parquet_columns(f.path, ["_change_type"])
        if t is None:
            return False
        kinds = set(pc.unique(t.column("_change_type")).to_pylist())
        if not kinds <= {"update_preimage", "update_postimage"}:
            return False
    return True


def _footer_rows(files: Sequence[ChangeFile]) -> int | None:
    """The rows ``files`` hold, by their Parquet footers (None: one cannot be read)."""
    import pyarrow.parquet as pq

    from mvsink.core import storage

    n = 0
    for f in files:
        try:
            fs, at = storage.filesystem(f.path)
            with fs.open_input_file(at) as handle:
                n += pq.ParquetFile(handle).metadata.num_rows
        except (OSError, ValueError) as exc:
            log.info("the footer of %s could not be read: %s", f.path, exc)
            return None
    return n


def _untouched_write(view: ViewDefinition, desc: BatchDescription, t0: float) -> WriteReport | None:
    """The write step of a batch whose changes touch no column the query reads (:mod:`mvsink.incremental.untouched`):
    nothing staged, no Spark; or None."""
    from mvsink.incremental.untouched import untouched_change
    from mvsink.write.job import stage

    if view.checks or desc.dry_run:
        return None
    table = ViewTable.open_path(desc.target, view.name)
    if not table.exists or table.frontier.upper > desc.lower or ERROR in table.column_names:
        return None
    reason = untouched_change(view, desc)
    if reason is None:
        return None
    log.info("view %s: %s", view.name, reason)
    head = _begun(view, desc, table, mode="incremental", reason=reason, t0=t0)
    return stage(view, desc, table.arrow_schema().empty_table(), head, check_counts=dict, t0=t0)


def _view_topk_write(view: ViewDefinition, desc: BatchDescription, t0: float) -> WriteReport | None:
    """The write step of a top-k of one view source (:mod:`mvsink.incremental.viewtopk`: the form of a top-k over
    an aggregate's intermediate table), without Spark; or None (the reason logged)."""
    from mvsink.incremental.viewtopk import topk_without_spark

    if not settings.spark_free() or not settings.incremental_topk() or not view.incremental:
        return None
    got = topk_without_spark(view, desc)
    if isinstance(got, str):
        log.info("view %s: the top-k in the driver does not apply: %s", view.name, got)
        return None
    corr, reason, table = got
    return _staged(view, desc, corr, _begun(view, desc, table, mode="incremental:topk", reason=reason, t0=t0), t0)


def _full_write(view: ViewDefinition, desc: BatchDescription, t0: float) -> WriteReport | None:
    """The full diff of a view over a view source (TPC-H Q15's body over its intermediate table) by DuckDB, without
    Spark, as the last Spark refresh of the same definition over the same schemas computed it
    (:func:`mvsink.incremental.driverfacts.remember_full`), where its sources' files and the table's are at most
    :data:`SPARK_FREE_FULL_MAX_BYTES`; or None (the reason logged)."""
    from mvsink.definitions.intermediate import not_incremental
    from mvsink.incremental.driverfacts import FULL, FullDiffQuery, recall, term_key
    from mvsink.incremental.modes.duckdbdiff import run_full_diff

    why = _full_refused(view, desc)
    if why is not None:
        log.info("view %s: the full diff without Spark does not apply: %s", view.name, why)
        return None
    table = ViewTable.open_path(desc.target, view.name)
    facts = recall(view, desc.sources, table) if table.exists else "the view's table does not exist yet"
    if isinstance(facts, str):
        why = facts
    elif facts.mode != FULL or facts.schema is None or "" not in facts.terms:
        why = f"plan facts of mode {facts.mode!r}"
    elif table.frontier.upper > desc.lower:
        why = "the batch is stale"
    elif ERROR in table.column_names:
        why = "the view's table keeps check results"
    elif (changed := _changed(desc)) is not None and term_key(changed) not in facts.full_for:
        why = f"an incremental mode may apply to a change of {', '.join(changed)} (a Spark refresh tries it)"
    elif (size := _files_bytes(desc, table)) > SPARK_FREE_FULL_MAX_BYTES:
        why = f"{size} bytes of files to read, more than a full diff without Spark reads"
    if why is not None or isinstance(facts, str) or facts.schema is None:
        log.info("view %s: the full diff without Spark does not apply: %s", view.name, why)
        return None
    record_full_diff_reads(desc.sources, desc.target, table.frontier.version)
    spec = FullDiffQuery(query=str(facts.terms[""]), schemas=facts.schemas, schema=facts.schema)
    corr = run_full_diff(spec, desc, table)
    if isinstance(corr, str):
        log.info("view %s: the full diff without Spark does not apply: %s", view.name, corr)
        return None
    reason = f"a full diff in DuckDB without Spark: {corr.num_rows} correction(s)"
    why_full = desc.full_reason or (not_incremental(view) if not view.incremental else "")
    if why_full:
        reason = f"{why_full} ({reason})"
    return _staged(view, desc, corr, _begun(view, desc, table, mode="full", reason=reason, t0=t0), t0)


# A full diff without Spark skips the incremental modes a Spark refresh would try: only where it reads little
# (a view's body over an intermediate table and a dimension, TPC-H Q15: about 2 MB at SF 1).
SPARK_FREE_FULL_MAX_BYTES: Final = 64 * 1024 * 1024


def _full_refused(view: ViewDefinition, desc: BatchDescription) -> str | None:
    """Why no full diff of this batch runs without Spark, from the view, the batch and the settings, or None."""
    if not settings.spark_free() or not settings.duckdb_full_diff():
        return "refreshes without Spark or DuckDB's full diff are off"
    if view.checks or desc.dry_run:
        return "the view has checks, or a dry run"
    if not any(s.kind == "view" for s in desc.sources):
        return "no source is a view"
    return None


def _changed(desc: BatchDescription) -> tuple[str, ...] | None:
    """The sources that changed since the last refresh, in the view file's order; None where no earlier refresh of
    this definition is known (the full diff is then the refresh's only mode)."""
    from mvsink.incremental.linear import changed_sources

    base = desc.base_versions
    if base is None:
        return None
    return tuple(s.name for s in changed_sources(desc, base))


def _files_bytes(desc: BatchDescription, table: ViewTable) -> int:
    """The bytes of the sources' files at the batch's versions and of the table's active files (from the logs)."""
    from mvsink.core.deltalog import file_statistics

    total = 0
    for s in desc.sources:
        files = file_statistics(s.path, s.version, "")
        if files is None:
            return 1 << 62
        total += sum(f.size for f in files)
    files = file_statistics(desc.target, table.frontier.version, "")
    return total + (sum(f.size for f in files) if files is not None else 1 << 62)


def _begun(
    view: ViewDefinition, desc: BatchDescription, table: ViewTable, *, mode: str, reason: str, t0: float
) -> WriteReport:
    """The report of a write step without Spark that computed its corrections in one phase against ``table``'s
    schema (the sources' reads as recorded so far)."""
    reads = current_reads()
    fr = table.frontier
    return WriteReport.begun(
        desc,
        view=view.name,
        read_version=fr.version,
        table_upper=fr.upper,
        schema=encode_schema(table.arrow_schema()),
        mode=mode,
        mode_reason=reason,
        phases={"plan": 0.0, "corrections": time.monotonic() - t0},
        reads={} if reads is None else {k: dict(v) for k, v in reads.sources.items()},
        spark_jobs=0,
    )


def _table_schema(facts: DriverFacts) -> pa.Schema:
    assert facts.schema is not None
    return facts.schema


def view_refusal(view: ViewDefinition, sources: Sequence[SourceRead]) -> str | None:
    """Why no refresh of ``view`` over ``sources`` runs without Spark, judged on the definition and the settings
    alone, or None."""
    if not settings.spark_free():
        return "refreshes without Spark are off (MVSINK_SPARK_FREE)"
    if view.checks:
        return "the view has checks (Spark counts them)"
    if not view.incremental:
        return "incremental: false in the view file"
    if not settings.incremental_driver_terms():
        return "the change terms in the driver are off (MVSINK_INCREMENTAL_DRIVER_TERMS)"
    if any(s.kind != "path" for s in sources):
        return "a source is a view"
    return None


def _refused(view: ViewDefinition, desc: BatchDescription) -> str | None:
    """Why this refresh cannot run without Spark, judged on the view and the batch alone, or None."""
    why = view_refusal(view, desc.sources)
    if why:
        return why
    if desc.base_versions is None:
        return "no earlier refresh of this definition to start from"
    return None


def spark_free_outlook(view: ViewDefinition, sources: Sequence[SourceRead], table: ViewTable) -> str:
    """Whether the view's next small refresh over ``sources`` (as they are now) can run without Spark, in words
    (for ``mvsink explain``): the plan facts kept for it, or why not."""
    from mvsink.incremental.driverfacts import recall

    why = view_refusal(view, sources)
    if why is None and not table.exists:
        why = "the view has no table yet"
    if why is None:
        facts = recall(view, sources, table)
        if isinstance(facts, str):
            why = (
                f"{facts}; the first build, or an incremental refresh on Spark whose change terms run in the driver, "
                "keeps them"
                if facts.startswith("no plan facts")
                else facts
            )
        else:
            age = max(0.0, time.time() - facts.made_at / 1000)
            return (
                f"yes: a small change of a source is refreshed without Spark (plan facts of mode {facts.mode} "
                f"kept {age:.0f} s ago; the guards on the change still apply)"
            )
    return f"no: {why}"


def _corrections(
    view: ViewDefinition, desc: BatchDescription, table: ViewTable, facts: DriverFacts
) -> tuple[pa.Table, str] | str:
    """The corrections and the mode's reason, computed as the aggregate mode (or the linear mode) computes them in
    the driver, or why not."""
    from mvsink.engines.arrow import MAX_DRIVER_CHANGE_BYTES
    from mvsink.engines.duckdbsql import Untranslatable
    from mvsink.incremental import pruning
    from mvsink.incremental.driverfacts import term_key
    from mvsink.incremental.duckdbterms import TermInputs, run_terms
    from mvsink.incremental.scanguard import scan_reasons
    from mvsink.incremental.telescope import driver_term_reads

    base = desc.base_versions
    assert base is not None
    if table.frontier.version != desc.table_version:
        return f"the table moved from version {desc.table_version} to {table.frontier.version} after mint"
    got = _changes(desc, base, facts)
    if isinstance(got, str):
        return got
    changed, sets, files = got
    term = facts.partitioned.get(term_key([s.name for s in changed])) if facts.aggregate is not None else None
    if term is not None:
        return _partitioned(view, desc, base, table, facts, term, changed, files)
    bent = [s.name for s in changed if s.name not in facts.linear_in]
    if bent:
        return f"the query is not linear in {bent[0]!r}"
    if facts.aggregate is None and sum(cs.bytes for cs in sets.values()) > MAX_DRIVER_CHANGE_BYTES:
        return "the change is too large for the driver"  # (as the linear mode decides)
    try:
        pruned = driver_term_reads(desc, base, changed, files, facts.edges)
    except pruning.SparkNeeded as exc:
        return str(exc)
    if facts.aggregate is not None:  # (the linear mode has no scan guard)
        (too_big,) = scan_reasons(
            desc,
            base,
            changed,
            table,
            pruned=pruned,
            factors=(SPARK_FREE_SCAN_FACTOR,),
            mode="incremental:aggregate",
            engines=("driver",),
        )
        if too_big:
            return too_big

    def sql(names: tuple[str, ...]) -> str:
        got = facts.terms.get(term_key(names))
        if got is None:
            raise Untranslatable("no DuckDB SQL kept for this change term")
        return got

    din = run_terms(TermInputs(desc, base, changed, sets, facts.schemas, facts.edges), sql, pruned)
    if isinstance(din, str):
        return din
    names = ", ".join(s.name for s in changed)
    if facts.aggregate is None:
        return _linear(facts, din, at=desc.time, names=names)
    merged = _merged(facts, din, table, desc)
    if isinstance(merged, str):
        return merged
    corr, n_keys = merged
    return corr, f"{n_keys} affected group(s) updated from their state and the changes of {names} ({ENGINE_NOTE})"


def _merged(facts: DriverFacts, din: pa.Table, table: ViewTable, desc: BatchDescription) -> tuple[pa.Table, int] | str:
    """The corrections of an aggregate's signed input rows ``din``: Δ per group merged with the persisted state and
    finalised in Python (as the aggregate mode does in the driver), and how many groups; or why not."""
    from mvsink.incremental.aggmerge import merge_in_driver
    from mvsink.incremental.duckdbterms import group_delta

    assert facts.aggregate is not None
    delta = group_delta(facts.aggregate, din)
    if isinstance(delta, str):
        return delta
    merged = merge_in_driver(facts.aggregate, delta, table, lower=desc.lower, at=desc.time)
    if not isinstance(merged, str):
        note(groups=merged[1])
    return merged


def _partitioned(
    view: ViewDefinition,
    desc: BatchDescription,
    base: dict[str, int],
    table: ViewTable,
    facts: DriverFacts,
    term: PartitionedTerm,
    changed: list[SourceRead],
    files: dict[str, ChangeFiles],
) -> tuple[pa.Table, str] | str:
    """An aggregate's corrections by the partitioned recompute kept for these changed sources
    (:mod:`mvsink.write.driverpart`), merged into the state as the aggregate mode merges them, or why not."""
    from mvsink import settings
    from mvsink.write import driverpart

    assert facts.aggregate is not None
    if not settings.incremental_partitioned():
        return "the partitioned recompute is off (MVSINK_INCREMENTAL_PARTITIONED)"
    if not settings.incremental_driver_terms():
        return "MVSINK_INCREMENTAL_DRIVER_TERMS is off"
    din = driverpart.partitioned_rows(desc, base, changed, files, term, table)
    if isinstance(din, str):
        return din
    merged = _merged(facts, din, table, desc)
    if isinstance(merged, str):
        return merged
    corr, n_keys = merged
    names = ", ".join(s.name for s in changed)
    on = " = ".join(term.keys.values())
    return corr, (
        f"{n_keys} affected group(s) updated from their state and the changes of {names} (a partitioned recompute "
        f"on {on}) (its queries evaluated by DuckDB in the driver, without Spark)"
    )


def _changes(
    desc: BatchDescription, base: dict[str, int], facts: DriverFacts
) -> tuple[list[SourceRead], dict[str, ChangeSet], dict[str, ChangeFiles]] | str:
    """The changed sources, their change sets and plain change files (as the modes' change sets: the size guard, the
    log's sizes recorded as read), or why the refresh runs on Spark."""
    from mvsink.incremental.keyreads import ChangeFiles
    from mvsink.incremental.linear import changed_sources, max_fraction, plain_change, source_check, table_change

    why = source_check(desc, base)
    if why:
        return why
    changed = changed_sources(desc, base)
    if not changed:
        return "no source changed"
    if facts.aggregate is not None and not settings.incremental_aggregate():
        return "the aggregate-state refresh is off (MVSINK_INCREMENTAL_AGGREGATE)"
    fraction = max_fraction()
    sets: dict[str, ChangeSet] = {}
    files: dict[str, ChangeFiles] = {}
    for s in changed:
        cs = table_change(s, base[s.name], fraction)
        if isinstance(cs, str):
            return cs
        plain, partition_columns = plain_change(s)
        if not plain or cs.deletion_vectors:
            return f"the change of {s.name!r} is not plain Parquet files"
        sets[s.name] = cs
        files[s.name] = ChangeFiles(cs.files, tuple(partition_columns))
    return changed, sets, files


def _linear(facts: DriverFacts, din: pa.Table, *, at: int, names: str) -> tuple[pa.Table, str] | str:
    """A linear view's corrections from its signed change rows ``din``: cast to the table's types, consolidated,
    stamped ``at`` (as :func:`mvsink.incremental.linear.incremental_corrections` makes them in the driver)."""
    from mvsink.engines.duckdb import consolidated
    from mvsink.incremental.duckdbterms import as_view_rows
    from mvsink.incremental.linear import stamped

    schema = _table_schema(facts)
    columns = list(facts.columns)
    rows = as_view_rows(din, columns, schema)
    if isinstance(rows, str):
        return rows
    corr = stamped(consolidated(rows), columns, at=at, schema=schema)
    return corr, f"from the changes of {names} ({corr.num_rows} correction(s) from {ENGINE_NOTE})"
