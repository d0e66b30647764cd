"""Invalid view files are refused with a message naming the file, the field and a fix."""

from __future__ import annotations

import pytest

from mvsink.definitions.viewfile import load_view_file
from mvsink.exceptions import MvSinkError, ViewDefinitionError
from tests.support.viewfiles import doc, expect_error, parse

pytestmark = [pytest.mark.unit, pytest.mark.usefixtures("no_mvsink_env")]


def test_bad_yaml_names_line():
    msg = expect_error(
        "name: v\nquery: [unclosed\nsources: x\n",
        None,
        "not valid YAML at line 3, column 8",
        "Fix: correct the YAML syntax",
    )
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
    expect_error(
        doc(query=None, sql_file="nope.sql"),
        "sql_file",
        f"cannot read {tmp_path.resolve() / 'nope.sql'}",
        "No such file",
        "put the SQL file beside the view file",
        file=f,
    )


def test_sql_file_not_a_name():
    expect_error(doc(query=None, sql_file="[a.sql]"), "sql_file", "must be a file name", "sql_file: my_view.sql")


def test_two_statements():
    expect_error(
        doc(query="SELECT a FROM orders; SELECT 1"),
        "query",
        "holds more than one statement",
        "give exactly one SELECT statement",
    )


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
    expect_error(
        doc(query=f"SELECT a, {expr} AS x FROM orders"),
        "query",
        f"uses the non-deterministic function {fn}()",
        "a view must be a function of its sources",
    )


@pytest.mark.parametrize(
    "query",
    [
        "SELECT a, 'rand()' AS s FROM orders",
        'SELECT a, "current_timestamp" AS s FROM orders',
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
    expect_error(
        doc(query="SELECT 'a--b' AS s, rand() AS r\nFROM orders"), "query", "uses the non-deterministic function rand()"
    )


@pytest.mark.parametrize("sources", [None, "{}", "[orders]", "orders", "null"])
def test_missing_or_empty_sources(sources):
    expect_error(doc(sources=sources), "sources", "missing or empty", "name each table the query reads")


def test_source_not_used():
    expect_error(
        doc(sources="{orders: orders, nations: nations}"),
        "sources.nations",
        "not used by the query",
        "refer to it in the query as `nations`, or remove it",
    )


def test_source_only_mentioned_in_literal_or_comment_is_not_used():
    expect_error(
        doc(query="SELECT 'nations' AS s FROM orders -- nations", sources="{orders: orders, nations: nations}"),
        "sources.nations",
        "not used by the query",
    )


@pytest.mark.parametrize(
    "spec",
    ["{table: t}", "{path: a, view: b}", "42", "[a]", "null", "{}"],
)
def test_source_neither_path_nor_view(spec):
    expect_error(
        doc(sources=f"{{orders: {spec}}}"),
        "sources.orders",
        "is neither a path nor a view",
        "{path: PATH} or {view: VIEW_NAME}",
    )


@pytest.mark.parametrize(
    "spec, field",
    [
        ("''", "sources.orders.path"),
        ("{path: ' '}", "sources.orders.path"),
        ("{view: ''}", "sources.orders.view"),
        ("{path: 3}", "sources.orders.path"),
    ],
)
def test_source_empty_value(spec, field):
    expect_error(doc(sources=f"{{orders: {spec}}}"), field, "empty", "Fix: give the")


def test_source_bad_view_name():
    expect_error(
        doc(sources="{orders: {view: Other}}"),
        "sources.orders.view",
        "'Other' is not a view name",
        "give the name of another view file's view",
    )


def test_source_bad_identifier():
    expect_error(
        doc(query="SELECT a FROM `my-orders`", sources="{my-orders: orders}"),
        "sources.my-orders",
        "not a valid SQL identifier",
        "use letters, digits and _",
    )


def test_view_source_reading_itself():
    expect_error(
        doc(sources="{orders: {view: v}}"),
        "sources.orders.view",
        "a view cannot read itself",
        "read another view or a table",
    )


@pytest.mark.parametrize("target", ["orders", "./orders/", "/data/x/../orders"])
def test_target_equal_to_source_path(target):
    expect_error(
        doc(target=target), "target", "/data/orders is also source 'orders'", "write the view to its own table path"
    )


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
        ("{every: 1h, catchup: yes please}", "catchup 'yes please' is not true or false"),
        ("{at: [1], catchup: 1}", "catchup 1 is not true or false"),
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
    expect_error(
        doc(spark_conf=conf),
        "spark_conf",
        "must be a mapping of Spark settings",
        "spark_conf: {spark.driver.memory: 2g}",
    )


@pytest.mark.parametrize("tags", ["finance", "[1]", "{a: b}"])
def test_tags_not_list_of_strings(tags):
    expect_error(doc(tags=tags), "tags", "must be a list of strings", "tags: [finance]")


def test_view_definition_error_is_value_error():
    assert issubclass(ViewDefinitionError, MvSinkError)
    assert issubclass(ViewDefinitionError, ValueError)


def test_load_view_file_unreadable(tmp_path):
    with pytest.raises(ViewDefinitionError) as ei:
        load_view_file(tmp_path / "nope.yaml")
    assert (
        str(ei.value)
        == f"view file {tmp_path / 'nope.yaml'}: cannot be read: No such file or directory. Fix: check the path."
    )
