"""What a write step read of each source: bytes and files, estimated from the Delta log's sizes
(:func:`read_log` collects, :func:`record` adds; :mod:`mvsink.core.deltalog` gives the sizes)."""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from mvsink.core.deltalog import active_bytes, file_statistics

if TYPE_CHECKING:
    from mvsink.core.batch import SourceRead
    from mvsink.location import Where


@dataclasses.dataclass
class ReadLog:
    """Bytes and files read per source over one write step (estimated from the Delta log's statistics)."""

    sources: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)

    def add(self, source: str, *, bytes_read: int, files: int) -> None:
        got = self.sources.setdefault(source, {"bytes": 0, "files": 0})
        got["bytes"] += int(bytes_read)
        got["files"] += int(files)


_READS: contextvars.ContextVar[ReadLog | None] = contextvars.ContextVar("mvsink_reads", default=None)


@contextlib.contextmanager
def read_log() -> Iterator[ReadLog]:
    """Collect what the write step reads (:func:`record`) into the yielded log."""
    got = ReadLog()
    token = _READS.set(got)
    try:
        yield got
    finally:
        _READS.reset(token)


def current_reads() -> ReadLog | None:
    """The log :func:`read_log` opened (None outside one)."""
    return _READS.get()


def record(source: str, *, bytes_read: int, files: int) -> None:
    log_ = _READS.get()
    if log_ is not None:
        log_.add(source, bytes_read=bytes_read, files=files)


def record_full_diff_reads(sources: Sequence[SourceRead], target: Where, version: int) -> None:
    """A full diff's reads: each table source whole and the view's table at ``version`` (``_table``; none below 0),
    in place of what was recorded before; a view source's rows are its upstream's, not counted."""
    got = _READS.get()
    if got is None:
        return
    got.sources.clear()
    for s in sources:
        if s.kind != "view":
            record_whole(s.name, s.path, s.version)
    files = file_statistics(target, version, "") if version >= 0 else None
    if files is not None:
        got.add("_table", bytes_read=sum(f.size for f in files), files=len(files))


def record_whole(source: str, path: Where, version: int) -> None:
    """Source ``source`` (the table at ``path``) read whole at ``version``."""
    stats = file_statistics(path, version, "")
    if stats is None:
        record(source, bytes_read=active_bytes(path, version), files=0)
    else:
        record(source, bytes_read=sum(f.size for f in stats), files=len(stats))
