"""Unit tests of view files: parse_view, load_views, Catalog, definition_hash (no Spark)."""

from __future__ import annotations

import dataclasses
import textwrap
from pathlib import Path

import pytest

from mvsink.definitions.catalog import Catalog, load_views
from mvsink.definitions.view import Schedule, Source, ViewDefinition, load_view_file, parse_view
from mvsink.exceptions import MvSinkError, ViewDefinitionError

pytestmark = pytest.mark.unit

JAN1 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
HOUR = 3_600_000
FILE = "views/v.yaml"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    monkeypatch.delenv("MVSINK_DATA_ROOT", raising=False)
    monkeypatch.delenv("MVSINK_VIEWS_DIR", raising=False)


def yml(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


MINIMAL = {
    "name": "v",
    "query": "SELECT a FROM orders",
    "sources": "{orders: orders}",
    "target": "out",
    "as_of": "0",
}


def doc(**fields: str | None) -> str:
    """YAML text of a view: MINIMAL with fields replaced (value None drops the field)."""
    merged = {**MINIMAL, **fields}
    lines = []
    for k, v in merged.items():
        if v is None:
            continue
        if "\n" in v:
            lines.append(f"{k}: |\n" + textwrap.indent(v, "  "))
        else:
            lines.append(f"{k}: {v}")
    return "\n".join(lines) + "\n"


def parse(text: str, root: Path = Path("/data"), file: str = FILE) -> ViewDefinition:
    return parse_view(text, file=file, data_root=root)


def expect_error(text: str, field: str | None, *fragments: str, file: str = FILE) -> str:
    with pytest.raises(ViewDefinitionError) as ei:
        parse(text, file=file)
    msg = str(ei.value)
    assert msg.startswith(f"view file {file}: "), msg
    if field is not None:
        assert f"field '{field}'" in msg, msg
    assert "Fix: " in msg, msg
    for f in fragments:
        assert f in msg, msg
    return msg


# --------------------------------------------------------------------------- valid views


def test_full_valid_view(tmp_path):
    root = tmp_path / "data"
    nations = root / "abs" / "nations"  # absolute, inside the data root
    text = yml(f"""
        name: revenue_by_nation
        description: "  Revenue per nation, refreshed hourly.  "
        query: |
          SELECT n.name AS nation, sum(o.amount) AS revenue, max(u.x) AS x
          FROM orders o JOIN nations n ON o.nation_id = n.id
          LEFT JOIN upstream u ON u.id = n.id
          GROUP BY n.name;
        sources:
          orders: tables/orders
          nations: {{path: {nations}}}
          upstream: {{view: other_view}}
        target: views/revenue_by_nation
        schedule: "0 * * * *"
        as_of: 2026-01-01T00:00:00Z
        key: [nation]
        spark_conf: {{spark.driver.memory: 2g, spark.sql.shuffle.partitions: 4}}
        tags: [finance, hourly]
    """)
    v = parse_view(text, file=str(tmp_path / "views" / "revenue_by_nation.yaml"), data_root=root)
    assert v == ViewDefinition(
        name="revenue_by_nation",
        description="Revenue per nation, refreshed hourly.",
        query=(
            "SELECT n.name AS nation, sum(o.amount) AS revenue, max(u.x) AS x\n"
            "FROM orders o JOIN nations n ON o.nation_id = n.id\n"
            "LEFT JOIN upstream u ON u.id = n.id\n"
            "GROUP BY n.name"
        ),
        sources=(
            Source(name="orders", kind="path", path=str((root / "tables" / "orders").resolve())),
            Source(name="nations", kind="path", path=str(nations.resolve())),
            Source(name="upstream", kind="view", view="other_view"),
        ),
        target=str((root / "views" / "revenue_by_nation").resolve()),
        schedule=Schedule(kind="cron", cron="0 * * * *"),
        as_of=JAN1,
        key=("nation",),
        spark_conf={"spark.driver.memory": "2g", "spark.sql.shuffle.partitions": "4"},
        tags=("finance", "hourly"),
        file=str(tmp_path / "views" / "revenue_by_nation.yaml"),
    )
    assert v.app_id == "mvsink:upper:revenue_by_nation"
    assert v.since_app_id == "mvsink:since:revenue_by_nation"
    assert v.source("upstream").view == "other_view"
    with pytest.raises(KeyError):
        v.source("missing")


def test_minimal_view_defaults():
    v = parse(doc())
    assert v.description == ""
    assert v.schedule == Schedule(kind="manual")
    assert v.key == ()
    assert v.spark_conf == {}
    assert v.tags == ()
    assert v.as_of == 0
    assert v.file == FILE


@pytest.mark.parametrize(
    "schedule, expected",
    [
        ('"0 * * * *"', Schedule(kind="cron", cron="0 * * * *")),
        ('"  0 0 * * * *  "', Schedule(kind="cron", cron="0 0 * * * *")),
        ("'@daily'", Schedule(kind="cron", cron="@daily")),
        ("{every: 1h, aligned_to: 2026-01-01T00:30:00Z}",
         Schedule(kind="interval", every_ms=HOUR, aligned_to_ms=JAN1 + HOUR // 2)),
        ("{every: 15m}", Schedule(kind="interval", every_ms=15 * 60_000, aligned_to_ms=0)),
        ("{every: 90s, aligned_to: 1000}", Schedule(kind="interval", every_ms=90_000, aligned_to_ms=1000)),
        ("{at: [2026-01-02T00:00:00Z, 2026-01-01T00:00:00Z, 5]}",
         Schedule(kind="at", at_ms=(5, JAN1, JAN1 + 24 * HOUR))),
        ("{at: 2026-01-01T00:00:00Z}", Schedule(kind="at", at_ms=(JAN1,))),
        ("{on_commit: [orders_clean, nations_clean]}",
         Schedule(kind="on_commit", on_commit=("orders_clean", "nations_clean"))),
        ("{on_commit: orders_clean}", Schedule(kind="on_commit", on_commit=("orders_clean",))),
        ("manual", Schedule(kind="manual")),
        ("none", Schedule(kind="manual")),
        ("null", Schedule(kind="manual")),
        (None, Schedule(kind="manual")),
    ],
)
def test_schedule_kinds(schedule, expected):
    assert parse(doc(schedule=schedule)).schedule == expected


@pytest.mark.parametrize(
    "as_of, expected",
    [
        ("2026-01-01T00:00:00Z", JAN1),
        ("'2026-01-01T00:00:00Z'", JAN1),
        ("2026-01-01T00:00:00", JAN1),
        ("'2026-01-01T00:00:00'", JAN1),
        ("2026-01-01T02:00:00+02:00", JAN1),
        ("2026-01-01", JAN1),
        (str(JAN1), JAN1),
        (f"'{JAN1}'", JAN1),
        ("0", 0),
    ],
)
def test_as_of_forms(as_of, expected):
    assert parse(doc(as_of=as_of)).as_of == expected


@pytest.mark.parametrize(
    "key, expected",
    [("customer_id", ("customer_id",)), ("[a, B_2]", ("a", "B_2")), ("[]", ())],
)
def test_key_string_or_list(key, expected):
    assert parse(doc(key=key)).key == expected


def test_spark_conf_values_become_strings_and_tags_kept():
    v = parse(doc(spark_conf="{spark.driver.memory: 2g, spark.sql.shuffle.partitions: 4, spark.x: 1.5}",
                  tags="[a, b]"))
    assert v.spark_conf == {"spark.driver.memory": "2g", "spark.sql.shuffle.partitions": "4", "spark.x": "1.5"}
    assert v.tags == ("a", "b")


def test_query_trailing_semicolons_and_whitespace_stripped():
    assert parse(doc(query="\nSELECT a FROM orders ;;\n\n")).query == "SELECT a FROM orders"


def test_source_used_case_insensitively():
    assert parse(doc(query="SELECT a FROM ORDERS", sources="{Orders: orders}")).sources[0].name == "Orders"


# --------------------------------------------------------------------------- path resolution


def test_relative_paths_resolve_against_data_root_argument(tmp_path, monkeypatch):
    monkeypatch.setenv("MVSINK_DATA_ROOT", str(tmp_path / "env_root"))  # the argument wins
    root = tmp_path / "arg_root"
    v = parse_view(doc(sources="{orders: t/orders}", target="views/out"),
                   file=str(tmp_path / "views" / "v.yaml"), data_root=root)
    assert v.sources[0].path == str((root / "t" / "orders").resolve())
    assert v.target == str((root / "views" / "out").resolve())


def test_relative_paths_resolve_against_env_data_root(tmp_path, monkeypatch):
    monkeypatch.setenv("MVSINK_DATA_ROOT", str(tmp_path / "env_root"))
    v = parse_view(doc(sources="{orders: {path: t/orders}}", target="./views/../out/"),
                   file=str(tmp_path / "views" / "v.yaml"))
    assert v.sources[0].path == str((tmp_path / "env_root" / "t" / "orders").resolve())
    assert v.target == str((tmp_path / "env_root" / "out").resolve())


def test_relative_paths_resolve_against_view_folder_without_root(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "views").mkdir()
    f = tmp_path / "views" / "v.yaml"
    f.write_text(doc(sources="{orders: t/orders}", target="out"))
    v = load_view_file(f)
    assert v.sources[0].path == str((tmp_path / "views" / "t" / "orders").resolve())
    assert v.target == str((tmp_path / "views" / "out").resolve())
    assert v.file == str(f)


def test_absolute_and_env_var_paths(tmp_path, monkeypatch):
    monkeypatch.setenv("MVSINK_ALLOW_OUTSIDE_DATA_ROOT", "1")  # both paths lie outside the data root /data
    monkeypatch.setenv("MVSINK_TEST_BASE", str(tmp_path / "base"))
    v = parse(doc(sources=f"{{orders: {tmp_path / 'abs' / 'orders'}}}", target="$MVSINK_TEST_BASE/out"))
    assert v.sources[0].path == str((tmp_path / "abs" / "orders").resolve())
    assert v.target == str((tmp_path / "base" / "out").resolve())


def test_sql_file_beside_view_file(tmp_path, monkeypatch):
    views = tmp_path / "views"
    views.mkdir()
    (views / "v.sql").write_text("-- the query\nSELECT a FROM orders;\n")
    f = views / "v.yaml"
    f.write_text(doc(query=None, sql_file="v.sql"))
    monkeypatch.chdir(tmp_path)  # not the view's folder
    v = load_view_file(f, data_root=tmp_path)
    assert v.query == "-- the query\nSELECT a FROM orders"


# --------------------------------------------------------------------------- invalid views


def test_bad_yaml_names_line():
    msg = expect_error("name: v\nquery: [unclosed\nsources: x\n", None, "not valid YAML at line 3, column 8",
                       "Fix: correct the YAML syntax")
    assert "expected ','" in msg


@pytest.mark.parametrize("text, got", [("- a\n- b\n", "got list"), ("just text\n", "got str"), ("", "got NoneType")])
def test_non_mapping_document(text, got):
    expect_error(text, None, "expected a mapping of fields", got, "Fix: write one view per file as YAML fields")


def test_unknown_field():
    expect_error(doc() + "colour: red\nzzz: 1\n", "colour", "unknown field", "remove it or use one of", "'sql_file'")


@pytest.mark.parametrize("name", ["Revenue", "1abc", "_abc", "a" * 64, "a-b", "''", "null", "[a]", "7"])
def test_bad_name(name):
    expect_error(doc(name=name), "name", "is not a valid view name", "lower-case letters, digits and _")


def test_name_max_length_ok():
    assert parse(doc(name="a" * 63)).name == "a" * 63


def test_name_with_trailing_newline_rejected():
    expect_error(doc(name='"abc\\n"'), "name", "is not a valid view name")


def test_key_with_trailing_newline_rejected():
    expect_error(doc(key='["a\\n"]'), "key", "is not a list of column names")


def test_description_must_be_text():
    expect_error(doc(description="[a]"), "description", "must be text", "write the description as a string")


@pytest.mark.parametrize("query", [None, "''", "'   '", "[a]"])
def test_missing_query(query):
    expect_error(doc(query=query), "query", "missing or empty", "inline (query:) or in a file (sql_file:)")


def test_both_query_and_sql_file():
    expect_error(doc(sql_file="v.sql"), "query", "both query and sql_file given", "keep exactly one of them")


def test_sql_file_missing(tmp_path):
    f = str(tmp_path / "v.yaml")
    expect_error(doc(query=None, sql_file="nope.sql"), "sql_file", f"cannot read {tmp_path.resolve() / 'nope.sql'}",
                 "No such file", "put the SQL file beside the view file", file=f)


def test_sql_file_not_a_name():
    expect_error(doc(query=None, sql_file="[a.sql]"), "sql_file", "must be a file name", "sql_file: my_view.sql")


def test_two_statements():
    expect_error(doc(query="SELECT a FROM orders; SELECT 1"), "query", "holds more than one statement",
                 "give exactly one SELECT statement")


def test_semicolon_inside_literal_or_comment_is_fine():
    q = "SELECT a, ';' AS s FROM orders -- x; y\n/* ; */ WHERE b = 'it''s;'"
    assert parse(doc(query=q)).query == q


def test_trailing_semicolon_before_comment_is_one_statement():
    parse(doc(query="SELECT a FROM orders; -- done"))


@pytest.mark.parametrize(
    "expr, fn",
    [
        ("rand()", "rand"),
        ("RAND (7)", "rand"),
        ("uuid()", "uuid"),
        ("current_timestamp", "current_timestamp"),
        ("current_timestamp()", "current_timestamp"),
        ("CURRENT_DATE", "current_date"),
        ("NOW()", "now"),
        ("monotonically_increasing_id()", "monotonically_increasing_id"),
        ("shuffle(arr)", "shuffle"),
        ("unix_timestamp()", "unix_timestamp"),
    ],
)
def test_nondeterministic_functions_rejected(expr, fn):
    expect_error(doc(query=f"SELECT a, {expr} AS x FROM orders"), "query",
                 f"uses the non-deterministic function {fn}()", "a view must be a function of its sources")


@pytest.mark.parametrize(
    "query",
    [
        "SELECT a, 'rand()' AS s FROM orders",
        "SELECT a, \"current_timestamp\" AS s FROM orders",
        "SELECT a, 'now() and it''s uuid()' AS s FROM orders",
        "SELECT a FROM orders -- uses NOW() for nothing",
        "SELECT a /* rand() current_date */ FROM orders",
        "SELECT brand, random_id, current_date_col, known FROM orders",
    ],
)
def test_nondeterministic_words_in_literals_comments_or_names_allowed(query):
    assert parse(doc(query=query)).query == query.split(" -- ")[0]  # a trailing comment is dropped


def test_double_dash_inside_literal_keeps_rest_of_line():
    # the source is used and the query is valid
    assert parse(doc(query="SELECT concat(a, '--') AS s FROM orders")).sources[0].name == "orders"


def test_nondeterministic_after_double_dash_literal_rejected():
    expect_error(doc(query="SELECT 'a--b' AS s, rand() AS r\nFROM orders"), "query",
                 "uses the non-deterministic function rand()")


@pytest.mark.parametrize("sources", [None, "{}", "[orders]", "orders", "null"])
def test_missing_or_empty_sources(sources):
    expect_error(doc(sources=sources), "sources", "missing or empty", "name each table the query reads")


def test_source_not_used():
    expect_error(doc(sources="{orders: orders, nations: nations}"), "sources.nations", "not used by the query",
                 "refer to it in the query as `nations`, or remove it")


def test_source_only_mentioned_in_literal_or_comment_is_not_used():
    expect_error(doc(query="SELECT 'nations' AS s FROM orders -- nations",
                     sources="{orders: orders, nations: nations}"), "sources.nations", "not used by the query")


@pytest.mark.parametrize(
    "spec", ["{table: t}", "{path: a, view: b}", "42", "[a]", "null", "{}"],
)
def test_source_neither_path_nor_view(spec):
    expect_error(doc(sources=f"{{orders: {spec}}}"), "sources.orders", "is neither a path nor a view",
                 "{path: PATH} or {view: VIEW_NAME}")


@pytest.mark.parametrize("spec, field", [("''", "sources.orders.path"), ("{path: ' '}", "sources.orders.path"),
                                         ("{view: ''}", "sources.orders.view"), ("{path: 3}", "sources.orders.path")])
def test_source_empty_value(spec, field):
    expect_error(doc(sources=f"{{orders: {spec}}}"), field, "empty", "Fix: give the")


def test_source_bad_view_name():
    expect_error(doc(sources="{orders: {view: Other}}"), "sources.orders.view", "'Other' is not a view name",
                 "give the name of another view file's view")


def test_source_bad_identifier():
    expect_error(doc(query="SELECT a FROM `my-orders`", sources="{my-orders: orders}"), "sources.my-orders",
                 "not a valid SQL identifier", "use letters, digits and _")


def test_view_source_reading_itself():
    expect_error(doc(sources="{orders: {view: v}}"), "sources.orders.view", "a view cannot read itself",
                 "read another view or a table")


@pytest.mark.parametrize("target", ["orders", "./orders/", "/data/x/../orders"])
def test_target_equal_to_source_path(target):
    expect_error(doc(target=target), "target", "/data/orders is also source 'orders'",
                 "write the view to its own table path")


@pytest.mark.parametrize("target", [None, "''", "'  '", "[a]"])
def test_target_missing(target):
    expect_error(doc(target=target), "target", "missing or empty", "e.g. views/my_view")


def test_missing_as_of():
    expect_error(doc(as_of=None), "as_of", "missing", "e.g. 2026-01-01T00:00:00Z")


@pytest.mark.parametrize(
    "as_of, problem",
    [
        ("yesterday", "as_of: 'yesterday' is not a time"),
        ("'2026-13-01'", "is not a time"),
        ("true", "as_of: expected a time, got True"),
        ("1.5", "as_of: expected ISO-8601 or epoch milliseconds, got 1.5"),
        ("null", "expected ISO-8601 or epoch milliseconds, got None"),
        ("[1]", "expected ISO-8601 or epoch milliseconds"),
    ],
)
def test_bad_as_of(as_of, problem):
    expect_error(doc(as_of=as_of), "as_of", problem, "write ISO-8601 (UTC if no zone) or epoch milliseconds")


@pytest.mark.parametrize("as_of", ["-5", "1969-12-31T23:59:59Z"])
def test_negative_as_of(as_of):
    expect_error(doc(as_of=as_of), "as_of", "negative time", "use a time after 1970-01-01")


@pytest.mark.parametrize(
    "schedule, problem",
    [
        ("hourly", "'hourly' is not a cron expression"),
        ("'0 * * *'", "'0 * * *' is not a cron expression"),
        ("''", "'' is not a cron expression"),
        ("{every: 0}", "schedule.every: 0 is not a duration"),
        ("{every: 1x}", "schedule.every: '1x' is not a duration"),
        ("{every: true}", "is not a duration"),
        ("{every: 1h, aligned_to: soon}", "schedule.aligned_to: 'soon' is not a time"),
        ("{every: 1h, jitter: 5m}", "unknown key 'jitter'"),
        ("{at: []}", "empty list of times"),
        ("{at: [garbage]}", "schedule.at: 'garbage' is not a time"),
        ("{on_commit: []}", "on_commit [] is not a list of view names"),
        ("{on_commit: [Bad]}", "on_commit ['Bad'] is not a list of view names"),
        ("{cron: '0 * * * *'}", "{'cron': '0 * * * *'} is not a schedule"),
        ("{at: [1], on_commit: [a]}", "is not a schedule"),
        ("5", "5 is not a schedule"),
        ("[a]", "['a'] is not a schedule"),
    ],
)
def test_bad_schedule(schedule, problem):
    expect_error(doc(schedule=schedule), "schedule", problem, "Fix: ")


@pytest.mark.parametrize("key", ["_mv_time", "[a, _MV_diff]"])
def test_key_reserved_prefix(key):
    expect_error(doc(key=key), "key", "columns starting with _mv_ are reserved", "rename the column in the query")


@pytest.mark.parametrize("key", ["'bad col'", "{a: 1}", "[1]", "null"])
def test_key_not_column_names(key):
    expect_error(doc(key=key), "key", "is not a list of column names", "key: [customer_id]")


@pytest.mark.parametrize("conf", ["[a]", "spark.x=1", "{1: a}"])
def test_spark_conf_not_mapping(conf):
    expect_error(doc(spark_conf=conf), "spark_conf", "must be a mapping of Spark settings",
                 "spark_conf: {spark.driver.memory: 2g}")


@pytest.mark.parametrize("tags", ["finance", "[1]", "{a: b}"])
def test_tags_not_list_of_strings(tags):
    expect_error(doc(tags=tags), "tags", "must be a list of strings", "tags: [finance]")


def test_view_definition_error_is_value_error():
    assert issubclass(ViewDefinitionError, MvSinkError)
    assert issubclass(ViewDefinitionError, ValueError)


def test_load_view_file_unreadable(tmp_path):
    with pytest.raises(ViewDefinitionError) as ei:
        load_view_file(tmp_path / "nope.yaml")
    assert str(ei.value) == f"view file {tmp_path / 'nope.yaml'}: cannot be read: No such file or directory. Fix: check the path."


# --------------------------------------------------------------------------- load_views / Catalog


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setenv("MVSINK_DATA_ROOT", str(tmp_path / "data"))
    d = tmp_path / "views"
    d.mkdir()
    (d / "alpha.yaml").write_text(doc(name="alpha"))
    (d / "beta.yml").write_text(doc(name="beta", sources="{up: {view: alpha}}", query="SELECT a FROM up"))
    (d / "broken.yaml").write_text(doc(name="broken", query="SELECT rand() FROM orders"))
    (d / "notes.txt").write_text("not a view")
    return d


def test_load_views_isolates_broken_file(folder, tmp_path):
    views, errors = load_views(folder)
    assert sorted(views) == ["alpha", "beta"]
    assert views["alpha"].sources[0].path == str((tmp_path / "data" / "orders").resolve())
    assert list(errors) == [str(folder / "broken.yaml")]
    assert isinstance(errors[str(folder / "broken.yaml")], ViewDefinitionError)
    assert "non-deterministic function rand()" in str(errors[str(folder / "broken.yaml")])


def test_load_views_duplicate_name(folder):
    (folder / "zeta.yaml").write_text(doc(name="alpha"))
    views, errors = load_views(folder)
    assert views["alpha"].file == str(folder / "alpha.yaml")
    assert sorted(errors) == [str(folder / "broken.yaml"), str(folder / "zeta.yaml")]
    msg = str(errors[str(folder / "zeta.yaml")])
    assert msg == (f"view file {folder / 'zeta.yaml'}: field 'name': view 'alpha' is already defined in "
                   f"{folder / 'alpha.yaml'}. Fix: give each view a unique name.")


def test_catalog_get_and_upstream(folder):
    cat = Catalog(folder)
    beta = cat.get("beta")
    assert cat.upstream(beta, beta.source("up")) is cat.get("alpha")


def test_catalog_get_unknown_lists_known(folder):
    with pytest.raises(ViewDefinitionError) as ei:
        Catalog(folder).get("gamma")
    assert str(ei.value) == (f"view 'gamma' is not defined in {folder} (views found: alpha, beta). "
                             "Fix: check the name or pass --views-dir.")


def test_catalog_get_broken_stem_raises_file_error(folder):
    cat = Catalog(folder)
    with pytest.raises(ViewDefinitionError) as ei:
        cat.get("broken")
    assert ei.value is cat.errors[str(folder / "broken.yaml")]
    assert f"view file {folder / 'broken.yaml'}: field 'query'" in str(ei.value)


def test_catalog_upstream_broken(folder):
    (folder / "gamma.yaml").write_text(doc(name="gamma", sources="{up: {view: broken}}", query="SELECT a FROM up"))
    cat = Catalog(folder)
    g = cat.get("gamma")
    with pytest.raises(ViewDefinitionError) as ei:
        cat.upstream(g, g.source("up"))
    msg = str(ei.value)
    assert msg.startswith("view gamma: source 'up' names view 'broken', which cannot be loaded: view file ")
    assert "non-deterministic" in msg


def test_catalog_missing_folder(tmp_path):
    with pytest.raises(ViewDefinitionError) as ei:
        Catalog(tmp_path / "nope")
    assert str(ei.value) == (f"views folder {tmp_path / 'nope'} does not exist. "
                             "Fix: pass --views-dir or set MVSINK_VIEWS_DIR.")


def test_catalog_default_folder_from_env(folder, monkeypatch):
    monkeypatch.setenv("MVSINK_VIEWS_DIR", str(folder))
    assert Catalog().views_dir == folder


def test_catalog_empty_folder_lists_none(tmp_path):
    with pytest.raises(ViewDefinitionError, match=r"views found: none"):
        Catalog(tmp_path).get("x")


# --------------------------------------------------------------------------- definition_hash


def test_definition_hash():
    base = parse(doc(query="SELECT a FROM orders"))
    h = base.definition_hash()
    assert len(h) == 16 and all(c in "0123456789abcdef" for c in h)
    assert parse(doc(query="SELECT a FROM orders")).definition_hash() == h
    # what determines contents
    assert parse(doc(query="SELECT b FROM orders")).definition_hash() != h
    assert parse(doc(sources="{orders: other}")).definition_hash() != h
    assert parse(doc(sources="{orders: {view: w}}")).definition_hash() != h
    assert parse(doc(sources="{orders: orders}"), root=Path("/elsewhere")).definition_hash() != h
    # what does not
    assert parse(doc(description="changed", schedule="'0 * * * *'", tags="[x]", key="a",
                     spark_conf="{a: b}", name="w")).definition_hash() == h
    assert dataclasses.replace(base, schedule=Schedule(kind="at", at_ms=(1,))).definition_hash() == h


@pytest.mark.parametrize(("query", "stored"), [
    ("SELECT a FROM orders; -- done", "SELECT a FROM orders"),
    ("SELECT a FROM orders;;", "SELECT a FROM orders"),
    ("SELECT a FROM orders /* c */ ;", "SELECT a FROM orders"),
    ("SELECT a -- c\nFROM orders", "SELECT a -- c\nFROM orders"),
    ("SELECT '--x' AS s FROM orders", "SELECT '--x' AS s FROM orders"),
])
def test_trailing_semicolons_and_comments_are_dropped(query, stored):
    assert parse(doc(query=query)).query == stored
