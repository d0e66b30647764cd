"""mvsink.definitions.splitcache: a query's split kept on this machine, read back in a process that then imports no
sqlglot; never wrong (a new key for new inputs or code), only missing (unreadable or unwritable: computed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mvsink.definitions import intermediate, splitcache
from mvsink.definitions.viewfile import parse_view

pytestmark = pytest.mark.unit

PLUGINS = Path(__file__).resolve().parents[2] / "plugins"

Q11 = (
    "SELECT ps_partkey, sum(ps_supplycost * ps_availqty) AS value FROM partsupp, supplier "
    "WHERE ps_suppkey = s_suppkey GROUP BY ps_partkey "
    "HAVING sum(ps_supplycost * ps_availqty) > (SELECT sum(ps_supplycost * ps_availqty) * 0.0001 "
    "FROM partsupp, supplier WHERE ps_suppkey = s_suppkey)"
)


def _view(data: Path, query: str, *, key: str = ""):
    text = (
        f"name: q11\nquery: {json.dumps(query)}\nsources: {{partsupp: partsupp, supplier: supplier}}\n"
        f"target: q11\nas_of: 2026-01-01T00:00:00Z\n{key}"
    )
    return parse_view(text, file=str(data / "views" / "q11.yaml"), data_root=data)


def _counting(calls: list[int], value):
    def compute():
        calls.append(1)
        return value

    return compute


def test_a_split_is_computed_once_and_read_back(tmp_path, monkeypatch):
    monkeypatch.setenv("MVSINK_CACHE_DIR", str(tmp_path / "cache"))
    calls: list[int] = []
    for _ in range(3):
        got = splitcache.kept("t", {"q": "a"}, _counting(calls, ("x", "y")), encode=list, decode=tuple)
        assert got == ("x", "y")
    assert len(calls) == 1
    assert len(list((tmp_path / "cache" / "splits").glob("*.json"))) == 1
    # a refusal is kept too; other inputs are another entry
    assert splitcache.kept("t", {"q": "b"}, _counting(calls, None), encode=list, decode=tuple) is None
    assert splitcache.kept("t", {"q": "b"}, _counting(calls, None), encode=list, decode=tuple) is None
    assert len(calls) == 2
    assert splitcache.kept("u", {"q": "a"}, _counting(calls, ("z",)), encode=list, decode=tuple) == ("z",)
    assert len(calls) == 3


def test_an_unreadable_entry_or_folder_is_computed(tmp_path, monkeypatch):
    monkeypatch.setenv("MVSINK_CACHE_DIR", str(tmp_path / "cache"))
    calls: list[int] = []
    splitcache.kept("t", {"q": "a"}, _counting(calls, ("x",)), encode=list, decode=tuple)
    (entry,) = (tmp_path / "cache" / "splits").glob("*.json")
    entry.write_text("{not json")
    assert splitcache.kept("t", {"q": "a"}, _counting(calls, ("x",)), encode=list, decode=tuple) == ("x",)
    assert len(calls) == 2 and json.loads(entry.read_text())["value"] == ["x"]  # written over
    entry.write_text(json.dumps({"key": "another", "value": ["wrong"]}))  # not this key's: never used
    assert splitcache.kept("t", {"q": "a"}, _counting(calls, ("x",)), encode=list, decode=tuple) == ("x",)
    assert len(calls) == 3
    blocked = tmp_path / "file"
    blocked.write_text("")
    monkeypatch.setenv("MVSINK_CACHE_DIR", str(blocked / "below"))  # a folder that cannot be made
    assert splitcache.kept("t", {"q": "a"}, _counting(calls, ("x",)), encode=list, decode=tuple) == ("x",)
    assert len(calls) == 4


def test_a_kept_having_split_is_the_computed_one(tmp_path, monkeypatch):
    monkeypatch.setenv("MVSINK_CACHE_DIR", str(tmp_path / "cache"))
    view = _view(tmp_path, Q11)
    computed = intermediate.split_having(view.query, sources=["partsupp", "supplier"], view="q11")
    assert computed is not None
    first = intermediate.intermediate_split(view)
    again = intermediate.intermediate_split(view)  # read back
    assert first == again and first is not None and first.kind == intermediate.HAVING
    assert [v.query for v in first.inners] == [computed.inner, *(text for text, _ in computed.scalars)]
    assert first.outer.query == computed.outer
    (entry,) = (tmp_path / "cache" / "splits").glob("*.json")
    assert json.loads(entry.read_text())["kind"] == "having"


def test_a_refresh_process_with_the_split_kept_imports_no_sqlglot(tmp_path):
    """The split of a HAVING view, a top-k and a WITH clause in a new process: the first computes them (sqlglot), a
    second reads them back and imports no sqlglot."""
    cache = tmp_path / "cache"
    views = {
        "having": (Q11, "", "{partsupp: partsupp, supplier: supplier}"),
        "topk": (
            "SELECT ps_partkey, sum(ps_availqty) AS q FROM partsupp GROUP BY ps_partkey ORDER BY q DESC LIMIT 5",
            "key: [ps_partkey]\n",
            "{partsupp: partsupp}",
        ),
        "cte": (
            "WITH t AS (SELECT ps_suppkey, sum(ps_availqty) AS q FROM partsupp GROUP BY ps_suppkey) "
            "SELECT s_suppkey, q FROM supplier, t WHERE s_suppkey = ps_suppkey",
            "",
            "{partsupp: partsupp, supplier: supplier}",
        ),
    }
    for kind, (query, key, sources) in views.items():
        folder = tmp_path / kind
        (folder / "views").mkdir(parents=True)
        (folder / "views" / "q11.yaml").write_text(
            f"name: q11\nquery: {json.dumps(query)}\nsources: {sources}\ntarget: q11\nas_of: 2026-01-01T00:00:00Z\n{key}"
        )
    script = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        from mvsink.definitions.intermediate import intermediate_split
        from mvsink.definitions.viewfile import load_view_file
        kinds = []
        for kind in {sorted(views)!r}:
            folder = Path({str(tmp_path)!r}) / kind
            view = load_view_file(folder / "views" / "q11.yaml", data_root=folder)
            kinds.append(intermediate_split(view).kind)
        print(kinds, "sqlglot" in sys.modules)
        """
    )
    env = {**os.environ, "PYTHONPATH": str(PLUGINS), "MVSINK_CACHE_DIR": str(cache)}
    runs = [
        subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True).stdout
        for _ in range(2)
    ]
    # computed (sqlglot parsed the queries), then kept (no sqlglot in the process)
    assert runs == ["['cte', 'having', 'topk'] True\n", "['cte', 'having', 'topk'] False\n"]
    assert len(list((cache / "splits").glob("*.json"))) == 3
