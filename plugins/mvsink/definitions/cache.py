"""Work derived from view definitions alone, kept on this machine's disk (this module owns the format:
``<MVSINK_CACHE_DIR>/<kind>/<key>.json``): a refresh with nothing to do then spends its time on the tables, not on
parsing its own definition again.

- ``splits/``: the texts :mod:`mvsink.definitions.intermediate` splits a query into (a top-k, a ``WITH``, a
  ``HAVING``), or its refusal. Deciding them takes sqlglot's tree of the query: importing sqlglot and parsing took
  0.15 s of a TPC-H Q11 refresh's 0.30 s.
- ``yaml/``: a view file's YAML document (:func:`yaml_document`), so that reading the views imports no PyYAML
  (13-16 ms of every command-line and Airflow refresh process).

:func:`kept` keeps each result under a key of everything it is derived from: its kind and inputs (a query's text
and the view's names; a file's text), the text of the modules that compute it and the installed files of the
library they use (sqlglot, PyYAML). The result is then what would be computed again, so the cache is never wrong,
only missing; as dbt's partial parsing, it is a file of this machine's, and a worker without it (a new container)
computes as before. Anything unreadable or unwritable is not an error: the result is computed (logged at debug).
"""

from __future__ import annotations

import datetime
import functools
import hashlib
import json
import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final, TypeVar

log = logging.getLogger(__name__)

FORMAT: Final = 1  # bumped whenever what a kept entry means changes
SPLITS: Final = ("splits", ("having.py", "intermediate.py", "querytext.py", "cache.py"), "sqlglot")
YAML: Final = ("yaml", ("cache.py",), "yaml")

T = TypeVar("T")


def kept(
    kind: str,
    inputs: Mapping[str, Any],
    compute: Callable[[], T | None],
    *,
    encode: Callable[[T], Any],
    decode: Callable[[Any], T],
    family: tuple[str, tuple[str, ...], str] = SPLITS,
) -> T | None:
    """``compute()``, or its result kept by an earlier call with the same ``kind`` and ``inputs`` (JSON values) on
    this machine. ``encode`` makes a result a JSON value (raising where it cannot: then it is not kept); ``decode``
    makes it back. ``family``: the folder, this package's modules that compute it, and the library they use
    (:data:`SPLITS`, :data:`YAML`)."""
    from mvsink import settings

    folder_name, modules, library = family
    try:
        folder = settings.cache_dir() / folder_name
        key = _key(kind, inputs, modules, library)
    except Exception:  # noqa: BLE001 (no cache: computed)
        log.debug("cache not used for %s", kind, exc_info=True)
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
        log.debug("cache entry %s not read", path, exc_info=True)
    made = compute()
    try:
        text = json.dumps({"key": key, "kind": kind, "value": None if made is None else encode(made)})
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".{key}.{os.getpid()}.tmp"
        tmp.write_text(text)
        os.replace(tmp, path)
    except Exception:  # noqa: BLE001 (not kept: the next process computes it again)
        log.debug("cache entry %s not written", path, exc_info=True)
    return made


def yaml_document(text: str, load: Callable[[str], Any]) -> Any:
    """``load(text)`` (PyYAML's safe load of a view file), kept by the file's text. A document of other values than
    mappings with string keys, lists, strings, numbers, booleans, nulls, dates and times is not kept; an error of
    ``load`` propagates and is not kept either."""
    return kept("yaml", {"text": text}, lambda: load(text), encode=_encode, decode=_decode, family=YAML)


def _encode(v: Any) -> Any:
    """A YAML value as JSON, every mapping and time tagged (so a mapping of the document is never read as a tag)."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, datetime.datetime):
        return {"datetime": v.isoformat()}
    if isinstance(v, datetime.date):
        return {"date": v.isoformat()}
    if isinstance(v, list):
        return [_encode(x) for x in v]
    if isinstance(v, dict) and all(isinstance(k, str) for k in v):
        return {"map": [[k, _encode(x)] for k, x in v.items()]}
    raise TypeError(f"a YAML value of type {type(v).__name__} is not kept")


def _decode(v: Any) -> Any:
    if isinstance(v, list):
        return [_decode(x) for x in v]
    if not isinstance(v, dict):
        return v
    if "map" in v:
        return {k: _decode(x) for k, x in v["map"]}
    if "datetime" in v:
        return datetime.datetime.fromisoformat(v["datetime"])
    return datetime.date.fromisoformat(v["date"])


def _key(kind: str, inputs: Mapping[str, Any], modules: tuple[str, ...], library: str) -> str:
    """The key of ``kind``'s result for ``inputs``: a hash of them, of the code and of the library's files."""
    text = json.dumps([FORMAT, kind, dict(inputs), _code_stamp(modules, library)], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:40]


@functools.cache
def _code_stamp(modules: tuple[str, ...], library: str) -> str:
    """A hash of ``modules``' text (of this package) and of ``library``'s installed package (its files' paths, sizes
    and times): a new version of either keys new entries. Found without importing the library."""
    import importlib.util

    h = hashlib.sha256()
    here = Path(__file__).parent
    for name in modules:
        h.update((here / name).read_bytes())
    spec = importlib.util.find_spec(library)
    origin = spec.origin if spec is not None else None
    if origin is None:
        raise FileNotFoundError(f"{library} is not installed")
    for p in sorted(Path(origin).parent.iterdir()):
        if p.suffix in (".py", ".so") or p.name.startswith("_version"):
            st = p.stat()
            h.update(f"{p}:{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()
