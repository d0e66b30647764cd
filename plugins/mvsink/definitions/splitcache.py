"""The query-text splits of :mod:`mvsink.definitions.intermediate`, kept on this machine's disk (this module owns the
format: ``<MVSINK_CACHE_DIR>/splits/<key>.json``).

Which intermediate tables a view is refreshed through is decided on sqlglot's tree of its query: importing sqlglot
and parsing the query take about 0.15 s, which a refresh with nothing to do would otherwise spend in every process
(TPC-H Q11, split by its HAVING into two intermediates: 0.15 of its 0.30 s). :func:`kept` keeps each split's result,
the refusal (None) too, under a key of everything it is derived from: the split's kind and arguments (the query's
text, the sources' names, ...), the text of the modules that compute it and sqlglot's installed files. The result is
then what the split would compute again, so the cache is never wrong, only missing; as dbt's partial parsing, it is
a file of this machine's, and a worker without it (a new container) computes the split as before.

Anything unreadable or unwritable is not an error: the split is computed (and logged at debug level).
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final, TypeVar

log = logging.getLogger(__name__)

FOLDER: Final = "splits"
FORMAT: Final = 1  # bumped whenever what a kept split means changes
# The modules whose code computes the splits (beside this one): a change of any of them is a new key.
_MODULES: Final = ("having.py", "intermediate.py", "querytext.py", "splitcache.py")

T = TypeVar("T")


def kept(
    kind: str,
    inputs: Mapping[str, Any],
    compute: Callable[[], T | None],
    *,
    encode: Callable[[T], Any],
    decode: Callable[[Any], T],
) -> T | None:
    """``compute()``, or its result kept by an earlier call with the same ``kind`` and ``inputs`` (JSON values) on
    this machine. ``encode`` makes a result a JSON value; ``decode`` makes it back."""
    from mvsink import settings

    try:
        folder = settings.cache_dir() / FOLDER
        key = _key(kind, inputs)
    except Exception:  # noqa: BLE001 (no cache: the split is computed)
        log.debug("split cache not used", exc_info=True)
        return compute()
    path = folder / f"{key}.json"
    try:
        got = json.loads(path.read_text())
        if isinstance(got, dict) and got.get("key") == key:
            value = got.get("value")
            return None if value is None else decode(value)
    except FileNotFoundError:
        pass
    except Exception:  # noqa: BLE001 (an unreadable entry is computed again and written over)
        log.debug("split cache entry %s not read", path, exc_info=True)
    made = compute()
    try:
        text = json.dumps({"key": key, "kind": kind, "value": None if made is None else encode(made)})
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".{key}.{os.getpid()}.tmp"
        tmp.write_text(text)
        os.replace(tmp, path)
    except Exception:  # noqa: BLE001 (not kept: the next process computes it again)
        log.debug("split cache entry %s not written", path, exc_info=True)
    return made


def _key(kind: str, inputs: Mapping[str, Any]) -> str:
    """The key of ``kind``'s split of ``inputs``: a hash of them, of the splitting code and of sqlglot's files."""
    text = json.dumps([FORMAT, kind, dict(inputs), _code_stamp()], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:40]


@functools.cache
def _code_stamp() -> str:
    """A hash of the splitting modules' text and of sqlglot's installed package (its path, size and time): a new
    version of either keys new entries. Found without importing sqlglot."""
    import importlib.util

    h = hashlib.sha256()
    here = Path(__file__).parent
    for name in _MODULES:
        h.update((here / name).read_bytes())
    spec = importlib.util.find_spec("sqlglot")
    origin = spec.origin if spec is not None else None
    if origin is None:
        raise FileNotFoundError("sqlglot is not installed")
    for name in ("__init__.py", "_version.py"):
        p = Path(origin).parent / name
        if p.exists():
            st = p.stat()
            h.update(f"{p}:{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()
