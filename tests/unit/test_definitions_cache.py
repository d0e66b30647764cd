"""mvsink.definitions.cache: a query's split and a view file's YAML document kept on this machine, read back in a
process that then imports neither sqlglot nor PyYAML; never wrong (a new key for new inputs or code), only missing
(unreadable or unwritable: computed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mvsink.definitions import cache, intermediate
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
        got = cache.kept("t", {"q": "a"}, _counting(calls, ("x", "y")), encode=list, decode=tuple)
        assert got == ("x", "y")
    assert len(calls) == 1
    assert len(list((tmp_path / "cache" / "splits").glob("*.json"))) == 1
    # a refusal is kept too; other inputs are another entry
    assert cache.kept("t", {"q": "b"}, _counting(calls, None), encode=list, decode=tuple) is None
    assert cache.kept("t", {"q": "b"}, _counting(calls, None), encode=list, decode=tuple) is None
    assert len(calls) == 2
    assert cache.kept("u", {"q": "a"}, _counting(calls, ("z",)), encode=list, decode=tuple) == ("z",)
    assert len(calls) == 3


def test_an_unreadable_entry_or_folder_is_computed(tmp_path, monkeypatch):
    monkeypatch.setenv("MVSINK_CACHE_DIR", str(tmp_path / "cache"))
    calls: list[int] = []
    cache.kept("t", {"q": "a"}, _counting(calls, ("x",)), encode=list, decode=tuple)
    (entry,) = (tmp_path / "cache" / "splits").glob("*.json")
    entry.write_text("{not json")
    assert cache.kept("t", {"q": "a"}, _counting(calls, ("x",)), encode=list, decode=tuple) == ("x",)
    assert len(calls) == 2 and json.loads(entry.read_text())["value"] == ["x"]  # written over
    entry.write_text(json.dumps({"key": "another", "value": ["wrong"]}))  # not this key's: never used
    assert cache.kept("t", {"q": "a"}, _counting(calls, ("x",)), encode=list, decode=tuple) == ("x",)
    assert len(calls) == 3
    blocked = tmp_path / "file"
    blocked.write_text("")
    monkeypatch.setenv("MVSINK_CACHE_DIR", str(blocked / "below"))  # a folder that cannot be made
    assert cache.kept("t", {"q": "a"}, _counting(calls, ("x",)), encode=list, decode=tuple) == ("x",)
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


DOCS = [
    "name: v\nas_of: 2026-01-01T00:00:00Z\nuntil: 2026-03-01 12:30:00.123456+02:00\nday: 2026-02-03\n"
    "naive: 2026-01-01 10:00:00\nn: 3\nx: 1.5e300\nneg: -0.0\nbig: 123456789012345678901234567890\n"
    "ok: true\nnone: ~\ns: 'ünïcödé \\u2603 '\nlist: [1, 'a', [2, {k: v}], null]\n"
    "map: {a: {b: {c: [2026-01-01]}}, 'map': 1, datetime: x}\n",
    "- a list\n- of things\n",
    "just text\n",
]


@pytest.mark.parametrize("text", DOCS)
def test_a_kept_yaml_document_is_the_loaded_one(tmp_path, monkeypatch, text):
    import yaml

    monkeypatch.setenv("MVSINK_CACHE_DIR", str(tmp_path / "cache"))
    loaded = yaml.safe_load(text)
    calls: list[int] = []

    def load(t):
        calls.append(1)
        return yaml.safe_load(t)

    first = cache.yaml_document(text, load)
    again = cache.yaml_document(text, load)
    assert first == again == loaded and len(calls) == 1
    assert repr(again) == repr(loaded)  # the same types, time zones and all


def test_a_yaml_document_that_json_cannot_hold_is_loaded_every_time(tmp_path, monkeypatch):
    import yaml

    monkeypatch.setenv("MVSINK_CACHE_DIR", str(tmp_path / "cache"))
    calls: list[int] = []

    def load(t):
        calls.append(1)
        return yaml.safe_load(t)

    for text in ("spark_conf: {1: a}\n", "b: !!binary aGVsbG8=\n", "s: !!set {a, b}\n"):
        assert cache.yaml_document(text, load) == cache.yaml_document(text, load) == yaml.safe_load(text)
    assert len(calls) == 6 and not list((tmp_path / "cache" / "yaml").glob("*.json"))
    with pytest.raises(yaml.YAMLError):  # an error is not kept either
        cache.yaml_document("a: [\n", load)
    assert not list((tmp_path / "cache" / "yaml").glob("*.json"))


def test_every_view_file_reads_the_same_from_the_cache(tmp_path, monkeypatch):
    """The repository's view files and the documentation's full example under each form of schedule, read with an
    empty cache and again from it: the same definitions; a bad file, the same error."""
    repo = Path(__file__).resolve().parents[2]
    doc = (repo / "docs" / "view-files.md").read_text()
    example = doc.split("```yaml\n", 1)[1].split("```", 1)[0]
    schedules = [
        '"0 * * * *"',
        "{every: 1h, aligned_to: 2026-11-01T00:30:00+01:00}",
        "{at: [2026-11-01T00:00:00Z, 2026-11-02]}",
        "manual",
    ]
    texts = [p.read_text() for p in sorted(repo.glob("dags/views/*.yaml"))]
    texts += [example.replace('schedule: "0 * * * *"', f"schedule: {s}") for s in schedules]
    texts += [example.replace("as_of: 2026-11-01T00:00:00Z", "as_of: 2026-11-01"), example + "bogus: 1\n"]
    monkeypatch.setenv("MVSINK_CACHE_DIR", str(tmp_path / "cache"))
    read = 0
    for text in texts:

        def parse(text=text):
            return parse_view(text, file=str(tmp_path / "views" / "v.yaml"), data_root=tmp_path)

        try:
            first = parse()
        except Exception as exc:  # noqa: BLE001 (a bad view: the same error from the cache)
            with pytest.raises(type(exc)) as again:
                parse()
            assert str(again.value) == str(exc)
            continue
        assert parse() == first
        read += 1
    assert read == len(texts) - 1  # (the one with an unknown field is refused, twice alike)
    assert len(list((tmp_path / "cache" / "yaml").glob("*.json"))) == len(texts)


def test_a_process_reading_view_files_it_read_before_imports_no_yaml(tmp_path):
    folder = tmp_path / "views"
    folder.mkdir()
    (folder / "v.yaml").write_text(
        "name: v\nquery: SELECT id FROM orders\nsources: {orders: orders}\ntarget: v\nas_of: 2026-01-01T00:00:00Z\n"
    )
    script = textwrap.dedent(
        f"""
        import sys
        from mvsink.definitions.catalog import Catalog
        view = Catalog({str(folder)!r}).get("v")
        print(view.name, view.as_of, "yaml" in sys.modules)
        """
    )
    env = {**os.environ, "PYTHONPATH": str(PLUGINS), "MVSINK_CACHE_DIR": str(tmp_path / "cache")}
    env["MVSINK_DATA_ROOT"] = str(tmp_path)
    runs = [
        subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True).stdout
        for _ in range(2)
    ]
    assert runs == ["v 1767225600000 True\n", "v 1767225600000 False\n"]
