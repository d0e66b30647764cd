"""Declared checks in the view file: list and mapping forms, the definition hash, refused checks with a fix."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from mvsink.definitions.view import Check
from mvsink.definitions.viewfile import parse_view
from mvsink.exceptions import ViewDefinitionError

VIEW = textwrap.dedent("""
    name: v
    query: SELECT id, qty FROM orders
    sources: {orders: orders}
    target: out
    as_of: 0
""")


def _parse(checks_yaml: str) -> Any:
    return parse_view(VIEW + checks_yaml, file="views/v.yaml", data_root=Path("/data"))


def _error(checks_yaml: str) -> str:
    with pytest.raises(ViewDefinitionError) as ei:
        _parse(checks_yaml)
    msg = str(ei.value)
    assert msg.startswith("view file views/v.yaml: field 'checks") and "Fix: " in msg, msg
    return msg


@pytest.mark.unit
def test_checks_list_and_mapping_forms():
    listed = _parse(
        "checks:\n  - {name: positive_qty, expr: 'qty > 0', action: error}\n"
        "  - {name: no_test, expr: 'id <> 0', action: drop}\n  - {name: big, expr: 'qty < 9'}\n"
    )
    assert listed.checks == (
        Check("positive_qty", "qty > 0", "error"),
        Check("no_test", "id <> 0", "drop"),
        Check("big", "qty < 9", "error"),
    )
    mapped = _parse(
        "checks:\n  positive_qty: {expr: 'qty > 0'}\n  no_test: {expr: 'id <> 0', action: drop}\n  big: qty < 9\n"
    )
    assert mapped.checks == listed.checks
    assert _parse("checks: []\n").checks == ()


@pytest.mark.unit
def test_checks_change_the_definition_hash_and_no_checks_keep_it():
    plain = _parse("")
    assert _parse("checks: []\n").definition_hash() == plain.definition_hash()
    a = _parse("checks: [{name: c, expr: 'qty > 0'}]\n")
    assert a.definition_hash() != plain.definition_hash()
    assert _parse("checks: [{name: c, expr: 'qty > 1'}]\n").definition_hash() != a.definition_hash()
    assert _parse("checks: [{name: c, expr: 'qty > 0', action: warn}]\n").definition_hash() != a.definition_hash()


@pytest.mark.unit
@pytest.mark.parametrize(
    "checks_yaml,field,fragments",
    [
        ("checks: qty > 0\n", "checks", ["is not a list of checks"]),
        ("checks: [qty > 0]\n", "checks[0]", ["not a mapping"]),
        ("checks: [{expr: 'qty > 0'}]\n", "checks[0]", ["has no name"]),
        ("checks: [{name: 'bad name', expr: 'qty > 0'}]\n", "checks.bad name", ["not a valid check name"]),
        ("checks: [{name: _mv_x, expr: 'qty > 0'}]\n", "checks._mv_x", ["reserved"]),
        ("checks: [{name: c, expr: 'qty > 0'}, {name: C, expr: 'id > 0'}]\n", "checks.C", ["used twice"]),
        ("checks: [{name: c, expr: ''}]\n", "checks.c.expr", ["missing or empty"]),
        ("checks: [{name: c}]\n", "checks.c.expr", ["missing or empty"]),
        (
            "checks: [{name: c, expr: 'qty > 0', action: fail}]\n",
            "checks.c.action",
            ["'fail' is not one of", "error", "drop", "warn"],
        ),
        ("checks: [{name: c, expr: 'qty > 0', severity: high}]\n", "checks.c.severity", ["unknown key"]),
        ("checks: [{name: c, expr: 'qty > rand()'}]\n", "checks.c.expr", ["non-deterministic function rand()"]),
        ("checks: [{name: c, expr: 'ts < current_timestamp'}]\n", "checks.c.expr", ["current_timestamp"]),
        ("checks: [{name: c, expr: 'qty IN (SELECT 1)'}]\n", "checks.c.expr", ["subquery"]),
        ("checks: [{name: c, expr: 'qty > avg(qty)'}]\n", "checks.c.expr", ["aggregate or window"]),
        ("checks: [{name: c, expr: 'qty > 0; DROP TABLE x'}]\n", "checks.c.expr", ["';'"]),
    ],
)
def test_bad_checks_are_refused_with_a_fix(checks_yaml, field, fragments):
    msg = _error(checks_yaml)
    assert f"field '{field}'" in msg, msg
    for f in fragments:
        assert f in msg, msg


@pytest.mark.unit
def test_check_text_in_literals_is_not_refused():
    v = _parse("checks: [{name: c, expr: \"status <> 'select rand()'\"}]\n")
    assert v.checks[0].expr == "status <> 'select rand()'"
