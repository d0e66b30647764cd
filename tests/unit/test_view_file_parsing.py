"""What a valid view file becomes: its fields and defaults, schedules, as_of forms, resolved paths, the stored query."""

from __future__ import annotations

import pytest

from mvsink.definitions.view import Schedule, Source, ViewDefinition
from mvsink.definitions.viewfile import load_view_file, parse_view
from tests.support.viewfiles import FILE, doc, parse, yml

pytestmark = [pytest.mark.unit, pytest.mark.usefixtures("no_mvsink_env")]


JAN1 = 1_767_225_600_000  # 2026-01-01T00:00:00Z


HOUR = 3_600_000


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
        (
            "{every: 1h, aligned_to: 2026-01-01T00:30:00Z}",
            Schedule(kind="interval", every_ms=HOUR, aligned_to_ms=JAN1 + HOUR // 2),
        ),
        ("{every: 15m}", Schedule(kind="interval", every_ms=15 * 60_000, aligned_to_ms=0)),
        ("{every: 90s, aligned_to: 1000}", Schedule(kind="interval", every_ms=90_000, aligned_to_ms=1000)),
        (
            "{at: [2026-01-02T00:00:00Z, 2026-01-01T00:00:00Z, 5]}",
            Schedule(kind="at", at_ms=(5, JAN1, JAN1 + 24 * HOUR)),
        ),
        ("{at: 2026-01-01T00:00:00Z}", Schedule(kind="at", at_ms=(JAN1,))),
        ("{every: 2m, catchup: true}", Schedule(kind="interval", every_ms=120_000, aligned_to_ms=0, catchup=True)),
        ("{at: [5], catchup: false}", Schedule(kind="at", at_ms=(5,))),
        (
            "{on_commit: [orders_clean, nations_clean]}",
            Schedule(kind="on_commit", on_commit=("orders_clean", "nations_clean")),
        ),
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
    v = parse(doc(spark_conf="{spark.driver.memory: 2g, spark.sql.shuffle.partitions: 4, spark.x: 1.5}", tags="[a, b]"))
    assert v.spark_conf == {"spark.driver.memory": "2g", "spark.sql.shuffle.partitions": "4", "spark.x": "1.5"}
    assert v.tags == ("a", "b")


def test_query_trailing_semicolons_and_whitespace_stripped():
    assert parse(doc(query="\nSELECT a FROM orders ;;\n\n")).query == "SELECT a FROM orders"


def test_source_used_case_insensitively():
    assert parse(doc(query="SELECT a FROM ORDERS", sources="{Orders: orders}")).sources[0].name == "Orders"


def test_relative_paths_resolve_against_data_root_argument(tmp_path, monkeypatch):
    monkeypatch.setenv("MVSINK_DATA_ROOT", str(tmp_path / "env_root"))  # the argument wins
    root = tmp_path / "arg_root"
    v = parse_view(
        doc(sources="{orders: t/orders}", target="views/out"), file=str(tmp_path / "views" / "v.yaml"), data_root=root
    )
    assert v.sources[0].path.uri == str((root / "t" / "orders").resolve())
    assert v.target.uri == str((root / "views" / "out").resolve())


def test_relative_paths_resolve_against_env_data_root(tmp_path, monkeypatch):
    monkeypatch.setenv("MVSINK_DATA_ROOT", str(tmp_path / "env_root"))
    v = parse_view(
        doc(sources="{orders: {path: t/orders}}", target="./views/../out/"), file=str(tmp_path / "views" / "v.yaml")
    )
    assert v.sources[0].path.uri == str((tmp_path / "env_root" / "t" / "orders").resolve())
    assert v.target.uri == str((tmp_path / "env_root" / "out").resolve())


def test_relative_paths_resolve_against_view_folder_without_root(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "views").mkdir()
    f = tmp_path / "views" / "v.yaml"
    f.write_text(doc(sources="{orders: t/orders}", target="out"))
    v = load_view_file(f)
    assert v.sources[0].path.uri == str((tmp_path / "views" / "t" / "orders").resolve())
    assert v.target.uri == str((tmp_path / "views" / "out").resolve())
    assert v.file == str(f)


def test_absolute_and_env_var_paths(tmp_path, monkeypatch):
    monkeypatch.setenv("MVSINK_ALLOW_OUTSIDE_DATA_ROOT", "1")  # both paths lie outside the data root /data
    monkeypatch.setenv("MVSINK_TEST_BASE", str(tmp_path / "base"))
    v = parse(doc(sources=f"{{orders: {tmp_path / 'abs' / 'orders'}}}", target="$MVSINK_TEST_BASE/out"))
    assert v.sources[0].path.uri == str((tmp_path / "abs" / "orders").resolve())
    assert v.target.uri == str((tmp_path / "base" / "out").resolve())


def test_sql_file_beside_view_file(tmp_path, monkeypatch):
    views = tmp_path / "views"
    views.mkdir()
    (views / "v.sql").write_text("-- the query\nSELECT a FROM orders;\n")
    f = views / "v.yaml"
    f.write_text(doc(query=None, sql_file="v.sql"))
    monkeypatch.chdir(tmp_path)  # not the view's folder
    v = load_view_file(f, data_root=tmp_path)
    assert v.query == "-- the query\nSELECT a FROM orders"


@pytest.mark.parametrize(
    ("query", "stored"),
    [
        ("SELECT a FROM orders; -- done", "SELECT a FROM orders"),
        ("SELECT a FROM orders;;", "SELECT a FROM orders"),
        ("SELECT a FROM orders /* c */ ;", "SELECT a FROM orders"),
        ("SELECT a -- c\nFROM orders", "SELECT a -- c\nFROM orders"),
        ("SELECT '--x' AS s FROM orders", "SELECT '--x' AS s FROM orders"),
    ],
)
def test_trailing_semicolons_and_comments_are_dropped(query, stored):
    assert parse(doc(query=query)).query == stored
