"""The write step's schema check (spark/validation.py ``compare_schema``): the query's columns against the table's."""

from __future__ import annotations

import pytest
from pyspark.sql import types as T

from mvsink.exceptions import SchemaChangedError
from mvsink.spark.validation import compare_schema
from tests.support.viewfiles import doc, parse

pytestmark = pytest.mark.unit

VIEW = parse(doc())


def _table(*fields: T.StructField) -> T.StructType:
    return T.StructType([*fields, T.StructField("_mv_time", T.LongType()), T.StructField("_mv_diff", T.LongType())])


def test_same_columns_pass_and_bookkeeping_columns_are_not_compared():
    query = T.StructType([T.StructField("A", T.IntegerType()), T.StructField("s", T.StringType())])
    table = _table(
        T.StructField("a", T.IntegerType()),
        T.StructField("s", T.StringType()),
        T.StructField("_mv_error", T.StringType()),
    )
    compare_schema(VIEW, query, table)  # names compare case-insensitively, _mv_* columns are the table's own


def test_a_collation_is_not_compared_the_table_stores_plain_strings():
    collated = T.StructType(
        [
            T.StructField("s", T.StringType("UTF8_LCASE")),
            T.StructField("n", T.StructType([T.StructField("t", T.StringType("UNICODE_CI"))])),
            T.StructField("l", T.ArrayType(T.StringType("UTF8_LCASE"))),
        ]
    )
    plain = _table(
        T.StructField("s", T.StringType()),
        T.StructField("n", T.StructType([T.StructField("t", T.StringType())])),
        T.StructField("l", T.ArrayType(T.StringType())),
    )
    compare_schema(VIEW, collated, plain)


@pytest.mark.parametrize(
    "field",
    [T.StructField("a", T.LongType()), T.StructField("b", T.IntegerType())],
    ids=["type", "name"],
)
def test_a_changed_column_is_refused_with_the_fix(field):
    with pytest.raises(SchemaChangedError) as ei:
        compare_schema(VIEW, T.StructType([field]), _table(T.StructField("a", T.IntegerType())))
    msg = str(ei.value)
    assert msg.startswith("view v: the query now returns columns") and "Fix: " in msg, msg
