"""A partitioned recompute of an aggregate's input without Spark, from kept plan facts.

A Spark refresh whose partitioned recompute (:mod:`mvsink.incremental.partitioned`) DuckDB evaluated in the driver
(:mod:`mvsink.incremental.partduck`) keeps how it did so for its set of changed sources
(:class:`~mvsink.incremental.driverfacts.PartitionedTerm`: the key column of each keyed source, DuckDB's text of the
query over the restricted sources, the sources' types). The next refresh that changes the same sources, over the same
definition and schemas, then runs it in the refreshing process (:mod:`mvsink.write.driver`):

- the changed keys are read from the changed sources' plain change files with pyarrow
  (:func:`mvsink.incremental.changedkeys.driver_keys`), as many and of the types the Spark refresh allows;
- each keyed source's rows holding a changed key are read by DuckDB from the files whose statistics may hold one,
  at the new version and (a changed source) the old one (:func:`mvsink.incremental.partreads.restricted_arrow`),
  within the same row caps; any other source is read whole, as DuckDB's scan of its files;
- the reads must pass the same scan guard as the Spark refresh's (the full diff's bytes, the table's included);
- a scalar subquery written into the text as a literal holds only while the sources it read are at the versions it
  was evaluated at (``pinned``).

The signed rows (``_mv_diff`` +1 for the new rows, -1 for the old) are what the aggregate mode sums per group. Any
refusal is a reason (a string): the refresh then runs on Spark, which decides again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mvsink.columns import DIFF

if TYPE_CHECKING:
    import pyarrow as pa

    from mvsink.core.batch import BatchDescription, SourceRead
    from mvsink.core.deltalog import ChangeFile
    from mvsink.core.table import ViewTable
    from mvsink.incremental.driverfacts import PartitionedTerm
    from mvsink.incremental.keyreads import ChangeFiles, KeyRanges


def partitioned_rows(
    desc: BatchDescription,
    base: dict[str, int],
    changed: list[SourceRead],
    files: dict[str, ChangeFiles],
    term: PartitionedTerm,
    table: ViewTable,
) -> pa.Table | str:
    """The signed rows of the aggregate's input over the changed keys' partitions, by ``term`` (the module's
    docstring), or why the refresh runs on Spark."""
    import pyarrow as pa

    from mvsink.core.deltalog import active_bytes
    from mvsink.incremental import keyreads
    from mvsink.incremental.duckdbterms import DRIVER_SCAN_FACTOR, MAX_SCAN_BYTES, MAX_TERM_BYTES, snapshot_relation
    from mvsink.incremental.partduck import evaluate
    from mvsink.incremental.partitioned import scan_guard
    from mvsink.incremental.partreads import restricted_arrow

    described = " = ".join(term.keys.values())
    for s in desc.sources:
        if s.name in term.pinned and term.pinned[s.name] != s.version:
            return f"source {s.name!r} moved since its scalar subquery was evaluated"
    keys = _changed_keys(changed, files, term, described)
    if isinstance(keys, str):
        return keys
    ranges = keyreads.key_ranges(keys[0])
    names = {(name, old): t for name, old, t in term.tables}
    is_changed = {s.name for s in changed}
    tables: dict[str, pa.Table | str] = {}
    read_bytes = 0.0
    budget = {"scan": MAX_SCAN_BYTES, "memory": MAX_TERM_BYTES}
    for s in desc.sources:
        widened = term.widened.get(s.name)
        if widened is None:
            return f"no kept read of source {s.name!r}"
        column = term.keys.get(s.name)
        if column is None:  # (read whole: an unchanged source, as DuckDB scans its files)
            if s.name in is_changed:
                return f"the changed source {s.name!r} is not keyed"
            rel = snapshot_relation(s, s.version, None, widened.names, widened, budget)
            if isinstance(rel, str):
                return rel
            tables[names[(s.name, False)]] = rel[0]
            read_bytes += 2 * active_bytes(s.path, s.version)  # (as the Spark refresh's guard counts a whole read)
            continue
        new = _kept_files(s, s.version, column, ranges, nulls=keys[1])
        old = _kept_files(s, base[s.name], column, ranges, nulls=keys[1]) if s.name in is_changed else None
        if isinstance(new, str):
            return new
        if isinstance(old, str):
            return old
        size = sum(f.size for f in {f.path: f for fs in (new, old or ()) for f in fs}.values())
        read_bytes += size / DRIVER_SCAN_FACTOR
        rows = restricted_arrow(
            s.name, new, old, term.reads[s.name], column=column, values=keys[0], nulls=keys[1], size=size
        )
        if isinstance(rows, str):
            return rows
        for side in ("new", "old") if (s.name, True) in names else ("new",):
            got_rows = rows[side] if rows is not None else term.reads[s.name].empty_table()
            try:
                tables[names[(s.name, side == "old")]] = got_rows.cast(widened)
            except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
                return f"source {s.name!r}: its rows do not widen to DuckDB's types ({exc})"
    full = sum(active_bytes(s.path, s.version) for s in desc.sources) + active_bytes(table.path, table.version)
    refused = scan_guard(described, read_bytes, full)
    if refused:
        return refused
    return evaluate(term.sql, tables, weight=DIFF)


def _changed_keys(
    changed: list[SourceRead], files: dict[str, ChangeFiles], term: PartitionedTerm, described: str
) -> tuple[list[Any], bool] | str:
    """The changed sources' keys, read from their plain change files in the driver, and whether one is NULL."""
    from mvsink.incremental.changedkeys import checked_keys, driver_keys

    values: set[Any] = set()
    nulls = False
    for s in changed:
        column = term.keys.get(s.name)
        if column is None:
            return f"the changed source {s.name!r} has no key column"
        got = driver_keys(files.get(s.name), column)
        if got is None:
            return f"the changed keys of {s.name!r} are not read in the driver"
        values |= set(got[0])
        nulls = nulls or got[1]
    return checked_keys(values, nulls, described)


def _kept_files(
    s: SourceRead, version: int, column: str, ranges: KeyRanges, *, nulls: bool
) -> tuple[ChangeFile, ...] | str:
    """Source ``s``'s plain Parquet files at ``version`` whose statistics may hold one of the keys (every file
    where a key is NULL or the log does not tell), each on the local disk."""
    from mvsink.incremental import pruning
    from mvsink.spark.sources import snapshot

    if s.kind != "path" or version < 0:
        return f"source {s.name!r} is not a Delta path"
    snap = snapshot(s.path, version, role=f"source {s.name!r}")
    if snap.files is None:
        return f"source {s.name!r} needs Delta's reader"
    if snap.partition_columns:
        return f"source {s.name!r} is partitioned"
    files = list(snap.files)
    if not nulls and not ranges.empty:
        est = pruning.estimate(s.path, version, [(column, ranges)])
        if est is not None:
            keep = set(est[4])
            files = [f for f in files if f.path in keep]
    if any(not f.path.is_local for f in files):
        return f"source {s.name!r} is not on the local disk"
    return tuple(files)
