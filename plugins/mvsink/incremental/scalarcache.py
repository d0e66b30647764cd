"""The values of uncorrelated scalar subqueries over unchanged sources, kept beside the view's table for the next
refresh (:mod:`mvsink.incremental.scalars`; this module owns the format: ``<target>/_mv_scalars/<name>.json``).

A partitioned recompute evaluates such a subquery once, on Spark (TPC-H Q22's average balance of customers, when
only orders changed: a Spark job of about 0.5-0.8 s at SF 1 on a warm Connect server, a third of the refresh). Its
value is a function of the subquery's text, the snapshots of the sources it reads and the Spark settings that
change a value (ANSI mode, the session time zone); kept under a key of exactly those, the next refresh that reads
the same snapshots writes the same literal in without asking Spark. One file per subquery (its name a hash of the
text) holds the latest value, so a source's new version replaces it rather than adding files.

Fails closed: a subquery over a view source (its rows depend on the batch's time, not only on its table's version)
or a source of unknown version or id is never kept; a file that cannot be read or parsed, or whose key differs, is
a miss; a write that fails is logged and ignored (never an error), and a dry run writes nothing.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from mvsink.location import joinpath

if TYPE_CHECKING:
    from mvsink.core.batch import SourceRead
    from mvsink.location import Where

log = logging.getLogger(__name__)

FOLDER: Final = "_mv_scalars"
FORMAT: Final = 1  # bumped whenever what a kept value means changes: older files then never match


class ScalarCache:
    """Kept scalar values of one view's table (``target``), for a refresh over the sources ``reads``;
    ``settings``: the Spark settings a value depends on, as (name, value) pairs; ``write``: False for a dry run."""

    def __init__(
        self, target: Where, reads: Sequence[SourceRead], settings: Sequence[tuple[str, str]], *, write: bool = True
    ) -> None:
        self._target = target
        self._reads = {s.name.casefold(): s for s in reads}
        self._settings = [list(p) for p in settings]
        self._write = write

    def key(self, text: str, tables: Sequence[str]) -> str | None:
        """The key of ``text`` (Spark SQL of the subquery) over the sources named ``tables``, or None where one is
        not a Delta table at a path of known version and id."""
        snapshots = []
        for t in sorted({t.casefold() for t in tables}):
            s = self._reads.get(t)
            if s is None or s.kind != "path" or s.version < 0 or not s.table_id:
                return None
            snapshots.append([t, s.path.to_json(), s.version, s.table_id])
        body = json.dumps([FORMAT, text, snapshots, self._settings], sort_keys=True, default=str)
        return hashlib.sha256(body.encode()).hexdigest()

    def get(self, text: str, tables: Sequence[str]) -> str | None:
        """The literal kept for ``text`` over these snapshots, or None."""
        from mvsink.core import storage

        key = self.key(text, tables)
        if key is None:
            return None
        try:
            raw = storage.read_text(self._path(text))
            kept = json.loads(raw) if raw is not None else None
        except Exception as exc:  # noqa: BLE001 (an unreadable value: Spark evaluates the subquery again)
            log.info("the kept value of a scalar subquery could not be read (%s)", type(exc).__name__)
            return None
        if not isinstance(kept, dict) or kept.get("key") != key or not isinstance(kept.get("literal"), str):
            return None
        return str(kept["literal"])

    def put(self, text: str, tables: Sequence[str], literal: str) -> None:
        """Keep ``literal`` for ``text`` over these snapshots (replacing what was kept for ``text``)."""
        from mvsink.core import storage

        key = self.key(text, tables)
        if key is None or not self._write:
            return
        doc = {"key": key, "text": text, "literal": literal, "made_at": int(time.time() * 1000)}
        try:
            storage.write_text(self._path(text), json.dumps(doc, sort_keys=True))
        except Exception as exc:  # noqa: BLE001 (not kept: the next refresh asks Spark again)
            log.info("the value of a scalar subquery was not kept (%s: %s)", type(exc).__name__, exc)

    def _path(self, text: str) -> Where:
        name = hashlib.sha256(json.dumps([FORMAT, text]).encode()).hexdigest()[:32]
        return joinpath(self._target, FOLDER, f"{name}.json")
