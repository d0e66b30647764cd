"""The view's Delta table (the "shard"): :class:`ViewTable`, and helpers about any Delta table.

The table's ``upper`` is the version of a Delta application transaction
(``mvsink:upper:<view>``) committed atomically with the data; ``since`` lives the
same way under ``mvsink:since:<view>``. Each of our commits carries ``mvsink.*``
keys in its commit info (:class:`~mvsink.core.commitinfo.CommitInfo`) so ``history()``
reads as a refresh log.

:class:`ViewTable` owns the view's table: it opens it (a missing table is a state, not
None), refuses what a Parquet file-list read cannot honour, reads the frontiers and the
history, and makes every commit mvsink makes to it (create, bump, append, evolve,
compact). Nothing else builds delta-rs commit properties or transactions for our commits.
The free functions below it are about any Delta table (the sources too).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from mvsink.columns import is_hidden
from mvsink.core import storage
from mvsink.core.commitinfo import CommitInfo, HistoryEntry
from mvsink.core.deltalog import (
    cached_snapshot,
    commit_times,
    is_delta_table,
    keep_snapshot,
    newest_commit,
    snapshots_cached,
)
from mvsink.core.frontier import MISSING, Frontier
from mvsink.core.probe import check_conditional_writes
from mvsink.definitions.view import since_app_id, upper_app_id
from mvsink.exceptions import MvSinkError, ReadTimeError, SourceError, StoreError, UnsupportedFeatureError
from mvsink.location import Location, Where, parse
from mvsink.times import format_time

if TYPE_CHECKING:
    import pyarrow as pa
    from deltalake import DeltaTable

    from mvsink.core.batch import StagedFile
    from mvsink.definitions.view import ViewDefinition

log = logging.getLogger(__name__)

CHECKPOINT_INTERVAL = 10  # a checkpoint every this many versions of a view's table, unless it sets its own

# Reader features that make a table's data files more than plain Parquet: sources are read by Delta's reader,
# which honours them; a view's own table (committed by delta-rs, read by pyarrow and DuckDB too) must not use them.
UNSUPPORTED_READER_FEATURES = {
    "deletionVectors": "deletion vectors (rows deleted without rewriting files)",
    "columnMapping": "column mapping (physical column names differ from logical ones)",
    "typeWidening": "type widening (files hold narrower types than the table schema)",
    "variantType": "the VARIANT type",
    "variantType-preview": "the VARIANT type",
}


# ---------------------------------------------------------------- any Delta table (sources and views)


def open_delta(path: Where, *, version: int | None = None) -> DeltaTable | None:
    """Open the Delta table at ``path`` (at ``version``), or None if there is none.

    A table that is there but cannot be read (a broken log, a missing version) is a
    :class:`SourceError` (bad input); a failure to reach its store (network, permissions, a
    timeout) is a :class:`StoreError`, which a retry may fix.
    """
    if snapshots_cached():
        return _shared_delta(path, version)
    if not is_delta_table(path):
        return None
    return _open_delta(path, version)


def _shared_delta(path: Where, version: int | None) -> DeltaTable | None:
    """:func:`open_delta` inside :func:`~mvsink.core.deltalog.snapshot_cache`: one handle per table version, shared
    (a write that moves its handle goes through one of its own: :meth:`ViewTable._own`). The newest version is the
    newest commit file the log's listing shows now (as a new handle would find it), its handle shared only while
    that file is the same one (a table dropped and created again has new commit files)."""
    if version is not None:
        return cached_snapshot(("delta", path, version), lambda: open_delta_unshared(path, version))
    newest = newest_commit(path)
    if newest is None:
        return None
    v, mtime = newest

    def make() -> DeltaTable | None:
        dt = open_delta_unshared(path, v)
        keep_snapshot(("delta", path, v), dt)
        return dt

    return cached_snapshot(("delta-newest", path, v, mtime), make)


def open_delta_unshared(path: Where, version: int | None = None) -> DeltaTable | None:
    """:func:`open_delta` as a handle of the caller's own, even inside a snapshot cache (a commit moves its handle)."""
    if not is_delta_table(path):
        return None
    return _open_delta(path, version)


def _open_delta(path: Where, version: int | None) -> DeltaTable:
    from deltalake import DeltaTable

    opts = storage.delta_options(path)
    try:
        return DeltaTable(path, version=version, storage_options=opts)
    except OSError as exc:  # delta-rs raises OSError for its object store's (I/O, network) failures
        if opts is None:  # local disk: a missing or unreadable file is a broken table, as it always was
            raise SourceError(
                f"Delta table at {path} cannot be opened: {type(exc).__name__}: {exc}. Fix: check the table's "
                "_delta_log."
            ) from exc
        raise StoreError(
            f"Delta table at {path} cannot be reached: {type(exc).__name__}: {exc}. Fix: check the store is "
            "reachable and the credentials allow reading it; the refresh may be retried."
        ) from exc
    except Exception as exc:  # delta-rs raises several types; all mean "cannot read this table"
        raise SourceError(
            f"Delta table at {path} cannot be opened: {type(exc).__name__}: {exc}. Fix: check the table's _delta_log."
        ) from exc


def plain_parquet_files(dt: DeltaTable) -> bool:
    """Are the table's data files plain Parquet with its logical schema (no column mapping, type widening,
    VARIANT, deletion vectors enabled)? Then changed files may be read as Parquet; else through Delta."""
    proto = dt.protocol()
    config = dt.metadata().configuration or {}
    if set(proto.reader_features or []) & set(UNSUPPORTED_READER_FEATURES):
        return False
    return proto.min_reader_version == 1 and config.get("delta.columnMapping.mode", "none") == "none"


def check_readable(dt: DeltaTable, *, path: Where, role: str) -> None:
    """Refuse a view's own table with reader features that pyarrow and DuckDB reads of its files cannot honour."""
    proto = dt.protocol()
    features = set(proto.reader_features or [])
    config = dt.metadata().configuration or {}
    problems = [desc for f, desc in UNSUPPORTED_READER_FEATURES.items() if f in features]
    mode = config.get("delta.columnMapping.mode", "none")
    if (proto.min_reader_version == 2 or mode != "none") and UNSUPPORTED_READER_FEATURES[
        "columnMapping"
    ] not in problems:
        problems.append(UNSUPPORTED_READER_FEATURES["columnMapping"])
    if proto.min_reader_version > 3:
        problems.append(f"reader version {proto.min_reader_version}")
    if problems:
        raise UnsupportedFeatureError(
            f"{role}: Delta table {path} uses {', '.join(problems)}; a view's own table is committed by mvsink "
            "and read as plain Parquet, so it must not. Fix: do not enable the feature on a view's table (it was "
            "changed by another writer); recreate the view's table (drop it and refresh)."
        )


def open_readable(path: Where, *, version: int | None = None, role: str) -> DeltaTable:
    """The Delta table at ``path`` (at ``version``) ("role" names it in errors); a clear error if there is none.
    Any reader feature is fine: Spark reads sources through Delta's own reader."""
    dt = (
        open_delta(path, version=version)
        if version is None
        else cached_snapshot(("delta", path, version), lambda: open_delta(path, version=version))
    )
    if dt is None:
        raise no_table(path, role=role)
    return dt


def no_table(path: Where, *, role: str) -> SourceError:
    """The error for a Delta table that is not there ("role" names it)."""
    return SourceError(f"{role}: no Delta table at {path}. Fix: create it or correct the path.")


def version_at(path: Where, t_ms: int, *, role: str) -> int:
    """The Delta version of the table at ``path`` as of time ``t_ms`` (last commit at or before it)."""
    if not is_delta_table(path):
        raise SourceError(
            f"{role}: no Delta table at {path}. Fix: create the table, or correct the path in the view file."
        )
    times = commit_times(path)
    at = [v for v, ts in times.items() if ts <= t_ms]
    if not at:
        first = min(times)
        raise SourceError(
            f"{role}: Delta table {path} has no version at or before {format_time(t_ms)} (its oldest retained commit, "
            f"version {first}, is from {format_time(times[first])}). Fix: refresh at a later time, or move the "
            "view's as_of past the source's creation."
        )
    return max(at)


def table_id(dt: DeltaTable) -> str:
    """The table's id (``metaData.id``): tells a re-created table at the same path from the old one."""
    return str(dt.metadata().id)


# ---------------------------------------------------------------- frontiers and read times


# ---------------------------------------------------------------- the view's table


class ViewTable:
    """A view's Delta table at one version: frontiers, history, active files, and our commits.

    :meth:`open` never fails for a table that does not exist yet: :attr:`exists` is False, the
    frontier is upper 0, since 0, version -1, history and active files are empty, and
    :meth:`require` (or :attr:`delta`) raises a clear error for callers that need the table.
    The handle does not follow later commits (delta-rs's own commits included): :meth:`reload`.
    """

    def __init__(self, path: Where, name: str, dt: DeltaTable | None) -> None:
        self.path = path
        self.name = name
        self.app_id = upper_app_id(name)
        self.since_app_id = since_app_id(name)
        self._dt = dt
        self._frontier: tuple[DeltaTable, Frontier] | None = None  # (the handle it was read from, it)

    def __repr__(self) -> str:
        return f"ViewTable({self.name!r}, {self.path!r}, version={self.version})"

    # ------------------------------------------------------------ opening

    @classmethod
    def open(cls, view: ViewDefinition, *, version: int | None = None, check: bool = True) -> ViewTable:
        """The view's table (latest, or at ``version``); with ``check``, refuse unreadable features."""
        return cls.open_path(view.target, view.name, version=version, check=check)

    @classmethod
    def open_path(
        cls, path: Where, name: str | None = None, *, version: int | None = None, check: bool = True
    ) -> ViewTable:
        """The view table at ``path``. Without ``name``, the view's name comes from the table itself
        (its Delta name, else the create commit's ``mvsink.view``); there must then be a table."""
        dt = open_delta(path, version=version)
        if name is None:
            if dt is None:
                raise ReadTimeError(f"no Delta table at {path}. Fix: pass a view's table path or its name.")
            name = _view_name_of(dt, path)
        table = cls(path, name, dt)
        if check and dt is not None:
            table.check_readable()
        return table

    @classmethod
    def create(cls, view: ViewDefinition, schema: pa.Schema) -> ViewTable:
        """Create the view's empty table (a lost creation race is fine) and open it.

        The create commits version 0 or nothing (``max_commit_retries=0``): with retries, delta-rs rebases
        a create that lost the race onto the winner's table as version 1, a second create commit
        (new table id) that racing refreshes on object storage produced.
        """
        from deltalake import DeltaTable
        from deltalake.transaction import CommitProperties

        info = CommitInfo(operation="create", view=view.name)
        check_conditional_writes(view.target)
        try:
            DeltaTable.create(
                view.target.uri,
                storage_options=storage.delta_options(view.target),
                schema=schema,
                mode="error",
                name=view.name,
                description=(view.description or None),
                commit_properties=CommitProperties(custom_metadata=info.to_metadata(), max_commit_retries=0),
            )
            log.info("view %s: created table %s", view.name, view.target)
        except Exception:
            if not is_delta_table(view.target):  # not a lost creation race: a real failure
                raise
        return cls.open(view)

    def reload(self) -> ViewTable:
        """Follow the table to its latest version (it may have been created since)."""
        if self._dt is None or snapshots_cached():  # (a shared handle is never moved: open_delta)
            self._dt = open_delta(self.path)
        else:
            self._dt.update_incremental()
        return self

    def _own(self) -> DeltaTable:
        """This table's handle to write through: one of its own at this version where handles are shared (a write or
        a schema change moves the handle it goes through to the new version)."""
        dt = self.delta
        if not snapshots_cached():
            return dt
        own = open_delta_unshared(self.path, self.version)
        if own is None:
            raise no_table(self.path, role=self.role)
        return own

    def at_version(self, version: int) -> ViewTable:
        return ViewTable(self.path, self.name, open_delta(self.path, version=version))

    # ------------------------------------------------------------ state

    @property
    def exists(self) -> bool:
        return self._dt is not None

    @property
    def role(self) -> str:
        return f"view {self.name}: target table"

    @property
    def delta(self) -> DeltaTable:
        """The delta-rs handle; a clear error if the table does not exist yet."""
        if self._dt is None:
            raise ReadTimeError(
                f"view {self.name}: table {self.path} does not exist yet. "
                f"Fix: refresh the view first (mvsink refresh {self.name} --at TIME)."
            )
        return self._dt

    def require(self) -> ViewTable:
        """This table, or a clear error if it does not exist yet."""
        self.delta  # noqa: B018 - raises when missing
        return self

    def check_readable(self) -> ViewTable:
        if self._dt is not None:
            check_readable(self._dt, path=self.path, role=self.role)
        return self

    @property
    def version(self) -> int:
        return int(self._dt.version()) if self._dt is not None else -1

    @property
    def frontier(self) -> Frontier:
        """upper, since and the Delta version they were read at (read once per handle and version)."""
        dt = self._dt
        if dt is None:
            return MISSING
        version = int(dt.version())
        kept = self._frontier
        if kept is not None and kept[0] is dt and kept[1].version == version:
            return kept[1]
        fr = Frontier(
            upper=dt.transaction_version(self.app_id) or 0,
            since=dt.transaction_version(self.since_app_id) or 0,
            version=version,
        )
        self._frontier = (dt, fr)
        return fr

    @property
    def column_names(self) -> list[str]:
        return [f.name for f in self._dt.schema().fields] if self._dt is not None else []

    def arrow_schema(self) -> pa.Schema:
        import pyarrow as pa

        return pa.schema(self.delta.schema().to_arrow())

    # ------------------------------------------------------------ files and rows

    def add_actions(self) -> pa.Table:
        """The active files' add actions (path, size_bytes, num_records, min./max. stats), flattened."""
        from mvsink.core.deltalog import pyarrow_table

        return pyarrow_table(self.delta.get_add_actions(flatten=True))

    def active_paths(self) -> set[str]:
        """Paths (relative to the table root, as in the log) of the active files; empty if missing."""
        if self._dt is None:
            return set()
        actions = self.delta.get_add_actions(flatten=True)  # arro3's table: no pyarrow import for this
        return set(actions.column("path").to_pylist()) if actions.num_rows else set()

    def file_uris(self) -> list[Location]:
        """The active files, with the table's store options."""
        root = parse(self.path)
        return [root.file(u) for u in self.delta.file_uris()]

    def updates_before(self, columns: Sequence[str] | None, *, lower: int) -> pa.Table:
        """The updates with ``_mv_time < lower``: the user columns (hidden state included) renamed to ``columns``
        in order (None: none of them), and ``_mv_diff``; read with pyarrow over the active files, not
        consolidated."""
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        from mvsink.columns import DIFF, ERROR, TIME
        from mvsink.core.arrowvalues import empty_table, scalar_of
        from mvsink.core.schema import plain_type

        names = [c for c in self.column_names if c not in (TIME, DIFF, ERROR)] if columns is not None else []
        # Each active file read on its own (not delta-rs's to_pyarrow_dataset, whose fragments wrongly drop a
        # filtered column's rows when the add action has no stats for it, as ours have none for strings; nor a
        # pyarrow dataset, whose module imports pandas: 0.2 s of a small refresh's process).
        schema = pa.schema(
            [f.with_type(plain_type(f.type)) for f in self.arrow_schema() if f.name in (*names, DIFF, TIME)]
        )  # delta-rs may give view types, which pyarrow's filters cannot compare with plain values
        wanted = [*names, DIFF]
        parts = []
        for uri in self.file_uris():
            fs, at = storage.filesystem(uri)
            with fs.open_input_file(at) as handle:
                pf = pq.ParquetFile(handle)
                have = set(pf.schema_arrow.names)
                got = pf.read(columns=[c for c in (*wanted, TIME) if c in have])
            n = got.num_rows
            got = pa.Table.from_arrays(
                [got.column(f.name).cast(f.type) if f.name in have else pa.nulls(n, f.type) for f in schema],
                schema=schema,
            )
            times = got.column(TIME)
            latest = pc.max(times).as_py()
            if latest is not None and latest >= lower:  # (usually every update is before lower: no copy)
                got = got.filter(pc.less(times, scalar_of(lower, pa.int64())))
            parts.append(got.select(wanted))
        rows = pa.concat_tables(parts) if parts else empty_table(pa.schema([schema.field(c) for c in wanted]))
        return rows.rename_columns([*(columns or []), DIFF])

    def updates(self) -> pa.Table:
        """Every update at this version: user columns, ``_mv_time``, ``_mv_diff`` (and ``_mv_error``).

        Hidden columns (an aggregate's state) are left out: readers never see them, and updates that
        change only the state cancel out when the rest is consolidated.
        """
        import pyarrow as pa

        t = pa.table(self.delta.to_pyarrow_table())
        return t.drop_columns([c for c in t.column_names if is_hidden(c)])

    # ------------------------------------------------------------ history

    def history(self, limit: int | None = None) -> list[HistoryEntry]:
        """Commits, newest first (empty if the table does not exist)."""
        if self._dt is None:
            return []
        return [HistoryEntry.of(h) for h in self._dt.history(limit)]

    def commits_after(self, version: int, *, limit: int = 1000) -> list[HistoryEntry]:
        """Commits of versions ``> version`` up to this handle's version, oldest first."""
        n = self.version - version
        if n <= 0:
            return []
        if n > limit:
            raise MvSinkError(f"table {self.path}: {n} commits since version {version}; too many to re-validate")
        return sorted((h for h in self.history(n) if h.version > version), key=lambda h: h.version)

    def last_content_change(self, *, limit: int) -> HistoryEntry | None:
        """The newest commit that may have changed contents (not one of our content-preserving ones),
        among the last ``limit`` commits; None if there is none there. Usually the newest commit is (a refresh's
        append, empty or not): the newest few are read first, the rest only if none of those is."""
        looked = 0
        for n in (min(limit, 4), limit):
            entries = self.history(n)
            for h in entries[looked:]:
                if h.info is None or not h.info.content_preserving:
                    return h
            if len(entries) < n:
                return None
            looked = len(entries)
        return None

    # ------------------------------------------------------------ our commits

    def commit_files(self, info: CommitInfo, files: Sequence[StagedFile], *, upper: int) -> int | None:
        """Add ``files`` and set the upper to ``upper`` in one commit at exactly this handle's version + 1.

        Returns the new version, or None if another commit took that version (a lost race:
        re-validate on a reloaded table). The append (``upper = info.upper``) and the bump (no
        files, ``upper = info.lower``) are such commits.
        """
        from deltalake.exceptions import CommitFailedError
        from deltalake.transaction import AddAction, CommitProperties, RemoveAction, Transaction

        dt = self.delta  # (delta-rs does not move a handle a transaction commits through: it may be shared)
        now_ms = int(time.time() * 1000)
        actions: list[AddAction | RemoveAction] = [
            AddAction(
                path=f.path, size=f.size, partition_values={}, modification_time=now_ms, data_change=True, stats=f.stats
            )
            for f in files
        ]
        version = self.version + 1
        try:
            dt.create_write_transaction(
                actions,
                mode="append",
                schema=dt.schema(),
                commit_properties=CommitProperties(
                    custom_metadata=info.to_metadata(),
                    max_commit_retries=0,
                    app_transactions=[Transaction(self.app_id, upper)],
                ),
            )
        except CommitFailedError as exc:
            log.info("view %s: %s commit at version %d lost a race (%s)", self.name, info.operation, version, exc)
            return None
        self._checkpoint_if_due(version)
        return version

    def _checkpoint_if_due(self, version: int) -> None:
        """A checkpoint of ``version`` (just committed) every ``delta.checkpointInterval`` versions (default
        :data:`CHECKPOINT_INTERVAL`): an open then replays at most that many commits (an hourly view commits hourly,
        changed or not). Not a commit; one that fails is logged only."""
        try:
            config = self.delta.metadata().configuration or {}
            every = int(config.get("delta.checkpointInterval") or CHECKPOINT_INTERVAL)
            if every <= 0 or version % every:
                return
            dt = open_delta_unshared(self.path, version)
            if dt is not None:
                dt.create_checkpoint()
                log.info("view %s: checkpoint of version %d written", self.name, version)
        except Exception:  # noqa: BLE001 (the commit landed; the next due version writes one)
            log.warning("view %s: checkpoint of version %d not written", self.name, version, exc_info=True)

    def add_error_column(self, info: CommitInfo) -> bool:
        """Add the nullable ``_mv_error`` column (content-preserving: existing rows read it as NULL).

        False if it did not commit (someone else added it, or another commit landed): re-validate.
        Any other failure raises :class:`StoreError` naming the real cause (it must not pass for a
        lost race, to surface later as "lost N commit races").
        """
        from deltalake import Field
        from deltalake.exceptions import CommitFailedError, DeltaError
        from deltalake.schema import PrimitiveType
        from deltalake.transaction import CommitProperties

        from mvsink.columns import ERROR

        try:
            self._own().alter.add_columns(
                [Field(ERROR, PrimitiveType("string"), nullable=True)],
                commit_properties=CommitProperties(custom_metadata=info.to_metadata(), max_commit_retries=0),
            )
        except CommitFailedError as exc:  # lost a race: re-validate
            log.info("view %s: adding %s did not commit (%s); re-validating", self.name, ERROR, exc)
            return False
        except DeltaError as exc:
            now = open_delta(self.path)
            if now is not None and ERROR in [f.name for f in now.schema().fields]:  # another writer added it
                log.info("view %s: %s was added by another writer (%s); re-validating", self.name, ERROR, exc)
                return False
            raise StoreError(
                f"view {self.name}: adding column {ERROR} to {self.path} failed: "
                f"{type(exc).__name__}: {exc}. Fix: check the table's storage (permissions, space) "
                "and re-run the refresh."
            ) from exc
        log.info("view %s: added column %s to %s (the view now has checks)", self.name, ERROR, self.path)
        return True

    def commit_compaction(self, data: pa.RecordBatchReader, *, predicate: str, info: CommitInfo) -> int | None:
        """Replace the rows matching ``predicate`` by ``data`` and set since to ``info.since``, in one
        commit at exactly this handle's version + 1; None if another commit took that version."""
        from deltalake import write_deltalake
        from deltalake.exceptions import CommitFailedError
        from deltalake.transaction import CommitProperties, Transaction

        assert info.since is not None
        version = self.version + 1
        try:
            write_deltalake(
                self._own(),
                data,
                mode="overwrite",
                predicate=predicate,
                commit_properties=CommitProperties(
                    custom_metadata=info.to_metadata(),
                    max_commit_retries=0,
                    app_transactions=[Transaction(self.since_app_id, info.since)],
                ),
            )
        except CommitFailedError as exc:
            log.info("view %s: compaction at version %d lost a race (%s)", self.name, version, exc)
            return None
        self._checkpoint_if_due(version)
        return version


def _view_name_of(dt: DeltaTable, path: Where) -> str:
    """The view name a table was created for (its Delta name, else the create commit's ``mvsink.view``)."""
    name = dt.metadata().name
    if name:
        return str(name)
    for h in dt.history():
        info = CommitInfo.from_history(h)
        if info is not None and info.view:
            return str(info.view)
    raise ReadTimeError(
        f"table {path} is not a view of this project (no view name in its metadata or log). "
        "Fix: pass the view's name or its view definition."
    )
