"""Batch ids: folder-safe, of an exact form, distinct when sanitised run ids collide, parsed back (foreign names are not)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mvsink.core.batch import make_batch_id, parse_batch_id
from mvsink.definitions.viewfile import parse_view

pytestmark = pytest.mark.unit


SAFE = re.compile(r"^[A-Za-z0-9_-]+$")


@pytest.mark.parametrize(
    "run_id",
    [
        "scheduled__2026-01-01T00:00:00+00:00",
        "manual__2026-01-01T00:00:00.123456+00:00",
        "a/../../b c\\d;e",
        "::",
        "",
        "ünïcödé-run",
        "x" * 300,
    ],
)
def test_make_batch_id_folder_safe(run_id):
    bid = make_batch_id("revenue_by_nation", 10, 20, run_id)
    assert SAFE.match(bid), bid
    assert bid.startswith("revenue_by_nation__10_20__")
    assert parse_batch_id(bid) == ("revenue_by_nation", 10, 20)


def test_make_batch_id_exact_form():
    bid = make_batch_id("v", 0, 3_600_000, "scheduled__2026-01-01T00:00:00+00:00")
    assert re.fullmatch(r"v__0_3600000__scheduled-2026-01-01T00-00-00-00-00-[0-9a-f]{8}", bid), bid


@pytest.mark.parametrize(
    "a, b",
    [("a:b", "a+b"), ("a:b", "a::b"), ("run", "run "), ("x" * 40 + "1", "x" * 40 + "2")],
)
def test_make_batch_id_distinct_when_sanitised_forms_collide(a, b):
    assert make_batch_id("v", 0, 1, a) != make_batch_id("v", 0, 1, b)


def test_make_batch_id_deterministic():
    assert make_batch_id("v", 0, 1, "r") == make_batch_id("v", 0, 1, "r")
    assert make_batch_id("v", 0, 1, "r") != make_batch_id("v", 0, 2, "r")


@pytest.mark.parametrize(
    "view, lower, upper",
    [("v", 0, 1), ("revenue_by_nation", 1_767_225_600_000, 1_767_229_200_000), ("a1_b2", 5, 5)],
)
def test_parse_batch_id_round_trip(view, lower, upper):
    assert parse_batch_id(make_batch_id(view, lower, upper, "run-1")) == (view, lower, upper)


@pytest.mark.parametrize(
    "name",
    [
        "",
        "readme",
        "part-00000.parquet",
        "v__0_1",
        "v__0_1__r__x",
        "v__a_1__r",
        "v__1_b__r",
        "v__-1_2__r",
        "v__1-2__r",
        "v____r",
    ],
)
def test_parse_batch_id_foreign_names(name):
    assert parse_batch_id(name) is None


@pytest.mark.parametrize("view", ["a__b", "orders_", "x___y"])
def test_parse_batch_id_round_trip_names_with_underscores(view):
    assert (
        parse_view(
            f"name: {view}\nquery: SELECT 1 FROM t\nsources: {{t: t}}\ntarget: o\nas_of: 0\n", data_root=Path("/d")
        ).name
        == view
    )  # a valid view name
    assert parse_batch_id(make_batch_id(view, 0, 10, "r")) == (view, 0, 10)


def test_parse_batch_id_superscript_digit_is_foreign():
    assert parse_batch_id("v__²_3__r") is None
