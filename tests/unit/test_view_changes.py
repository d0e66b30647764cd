"""A view source's change since the last read, from the upstream's Delta log (core/viewchanges.py), and what
mint makes of it: the no-change shortcut, the read time it hands to write, and why a full diff is needed.

Real view tables written by mint and append, without Spark (their batches stage no files).
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from mvsink.core.batch import BatchDescription
from mvsink.core.mint import mint
from mvsink.core.viewchanges import ViewChanges, view_changes
from mvsink.definitions.catalog import Catalog
from tests.support.refreshlog import BASE, HOUR, appends, refresh, source, view_file

pytestmark = pytest.mark.unit


@pytest.fixture
def chain(env):
    """A view ``up`` over a table and ``down`` over ``up``, both refreshed once at BASE."""
    data, views = env
    source(data)
    view_file(views, "up")
    view_file(views, "down", sources="{u: {view: up}}", query="SELECT id, qty FROM u")
    catalog = Catalog(views)
    refresh(catalog, "up", BASE, added=2)
    refresh(catalog, "down", BASE, added=2)
    return data, catalog


def _mint(catalog: Catalog, at: int) -> BatchDescription:
    desc = mint(catalog.get("down"), at, catalog=catalog, run_id=f"m{at}")
    assert isinstance(desc, BatchDescription), desc
    return desc


def _changes(desc: BatchDescription) -> ViewChanges | str:
    (s,) = desc.sources
    assert desc.base_versions is not None and desc.base_time is not None
    return view_changes(s, base_version=desc.base_versions["u"], base_time=desc.base_time, time=desc.time)


def _hand_edit(target: str, at: int) -> None:
    """A row written into the view's table by hand (a commit mvsink did not make), stamped at ``at``."""
    row = pa.table(
        {"id": [9], "qty": [9], "_mv_time": [at], "_mv_diff": [-1]},
        schema=pa.schema([("id", pa.int64()), ("qty", pa.int64()), ("_mv_time", pa.int64()), ("_mv_diff", pa.int64())]),
    )
    write_deltalake(str(target), row, mode="append")


def test_the_last_refresh_records_the_upstream_table_id_and_its_read_time(chain):
    data, catalog = chain
    up, down = catalog.get("up"), catalog.get("down")
    last = appends(down.target)[-1]
    assert last["source_ids"] == {"u": str(DeltaTable(up.target).metadata().id)}
    refresh(catalog, "up", BASE + HOUR)
    desc = _mint(catalog, BASE + HOUR)
    (s,) = desc.sources
    assert s.kind == "view" and s.table_id == last["source_ids"]["u"]
    # the upstream appended, but nothing in the range: the no-change shortcut
    assert desc.empty and desc.base_versions is None


def test_an_upstream_newer_version_with_nothing_since_the_read_is_no_change(chain):
    data, catalog = chain
    for k in (1, 2):  # two upstream appends that wrote no rows
        refresh(catalog, "up", BASE + k * HOUR)
    desc = _mint(catalog, BASE + 2 * HOUR)
    assert desc.empty


def test_a_hand_edit_of_the_upstream_is_never_trusted(chain):
    data, catalog = chain
    up = catalog.get("up")
    _hand_edit(up.target, BASE - 1)  # below the read time: it changes the contents the last read saw
    refresh(catalog, "up", BASE + HOUR)
    desc = _mint(catalog, BASE + HOUR)
    assert not desc.empty
    assert desc.base_versions == {"u": appends(catalog.get("down").target)[-1]["sources"]["u"]}
    assert desc.base_time == BASE  # the last append's upper - 1: the time it read its sources at
    why = _changes(desc)
    assert isinstance(why, str) and "view up's table has a commit mvsink did not make" in why and "WRITE" in why, why
    # once the downstream has read past the edit (and the upstream's append after it), it is trusted again
    refresh(catalog, "down", BASE + HOUR, added=1)
    refresh(catalog, "up", BASE + 2 * HOUR)
    assert _mint(catalog, BASE + 2 * HOUR).empty


def test_a_hand_edit_the_last_read_saw_before_the_upstream_repaired_it(chain):
    """The edit lands between the upstream's append and the downstream's read: the read saw it (a negative
    multiplicity reads as absent); after the upstream's next append the change since is not the whole story."""
    data, catalog = chain
    up = catalog.get("up")
    refresh(catalog, "up", BASE + HOUR)
    _hand_edit(up.target, BASE + HOUR - 10)
    desc = _mint(catalog, BASE + HOUR)  # the first read after the edit: the edit is after the base
    assert isinstance(_changes(desc), str)
    refresh(catalog, "down", BASE + HOUR, added=1)
    refresh(catalog, "up", BASE + 2 * HOUR)
    desc = _mint(catalog, BASE + 2 * HOUR)
    assert desc.base_time == BASE + HOUR
    why = _changes(desc)
    assert isinstance(why, str) and "did not make" in why, why
    refresh(catalog, "down", BASE + 2 * HOUR, added=1)
    refresh(catalog, "up", BASE + 3 * HOUR)
    assert _mint(catalog, BASE + 3 * HOUR).empty  # read past the repair: trusted again


def test_mint_says_why_the_contents_are_unknown(chain):
    data, catalog = chain
    down = catalog.get("down")
    refresh(catalog, "up", BASE + HOUR)
    _hand_edit(down.target, BASE - 5)
    desc = _mint(catalog, BASE + HOUR)
    assert desc.base_versions is None and not desc.empty
    assert desc.full_reason is not None and desc.full_reason.startswith("a commit mvsink did not make (version ")
    assert "WRITE" in desc.full_reason
    # a changed definition
    refresh(catalog, "down", BASE + HOUR, added=1)
    view_file(catalog.views_dir, "down", sources="{u: {view: up}}", query="SELECT id, qty FROM u WHERE qty > 0")
    catalog = Catalog(catalog.views_dir)
    refresh(catalog, "up", BASE + 2 * HOUR)
    desc = _mint(catalog, BASE + 2 * HOUR)
    assert desc.full_reason is not None and "definition changed" in desc.full_reason, desc.full_reason
