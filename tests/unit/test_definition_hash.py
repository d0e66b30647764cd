"""The definition hash: what determines a view's contents changes it, nothing else does."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from mvsink.definitions.view import Schedule
from tests.support.viewfiles import doc, parse

pytestmark = [pytest.mark.unit, pytest.mark.usefixtures("no_mvsink_env")]


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
    assert (
        parse(
            doc(description="changed", schedule="'0 * * * *'", tags="[x]", key="a", spark_conf="{a: b}", name="w")
        ).definition_hash()
        == h
    )
    assert dataclasses.replace(base, schedule=Schedule(kind="at", at_ms=(1,))).definition_hash() == h
