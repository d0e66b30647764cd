"""A source's change set between two versions, from Change Data Feed files or added and removed files."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from deltalake import DeltaTable, write_deltalake

from mvsink.core.deltalog import change_set
from tests.support.data import (
    inc_orders,
)

pytestmark = pytest.mark.spark


CDF = {"delta.enableChangeDataFeed": "true"}


def test_change_set_uses_cdf_files_or_added_and_removed_files(tmp_path):
    rng = random.Random(1)
    cdf, plain = tmp_path / "cdf", tmp_path / "plain"
    write_deltalake(str(cdf), inc_orders(rng, 0, 50), configuration=CDF)
    write_deltalake(str(plain), inc_orders(rng, 0, 50))
    for p in (cdf, plain):
        DeltaTable(str(p)).update(updates={"qty": "7"}, predicate="id < 3")
        write_deltalake(str(p), inc_orders(rng, 100, 2), mode="append")
    cs = change_set(str(cdf), 0, 2)
    assert not isinstance(cs, str)
    assert len(cs.cdc) == 1 and len(cs.inserted) == 1 and not cs.deleted  # update via CDF, insert via add
    cs = change_set(str(plain), 0, 2)
    assert not isinstance(cs, str)
    assert not cs.cdc and len(cs.inserted) == 2 and len(cs.deleted) == 1  # the rewritten file both ways
    assert "no longer in the log" in str(change_set(str(plain), 0, 5))
    for f in cs.deleted:
        Path(f.path).unlink()
    assert "gone" in str(change_set(str(plain), 0, 2))
