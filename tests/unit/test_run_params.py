"""A DAG run's params (refresh_time, dry_run, attempt) become typed values; junk is refused before anything is minted."""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace

import pytest

from mvsink.airflow import tasks
from mvsink.airflow.params import run_params
from mvsink.exceptions import MvSinkError
from tests.support.delta import BASE, HOUR
from tests.support.viewfiles import view_text


def _ctx(params: dict, conf: dict | None = None) -> dict:
    run = SimpleNamespace(
        logical_date=dt.datetime(2026, 1, 1, 2, tzinfo=dt.UTC), run_after=None, conf=conf or {}, run_id="manual__x"
    )
    return {"params": params, "dag_run": run}


@pytest.mark.unit
@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({}, (BASE + 2 * HOUR, False)),
        ({"refresh_time": "", "dry_run": False}, (BASE + 2 * HOUR, False)),
        ({"refresh_time": "2026-01-01T01:00:00Z", "dry_run": True}, (BASE + HOUR, True)),
        ({"refresh_time": " 1767229200000 ", "dry_run": "true"}, (BASE + HOUR, True)),
        ({"refresh_time": BASE + HOUR, "dry_run": "false"}, (BASE + HOUR, False)),
        ({"refresh_time": "2026-01-01T03:00:00+02:00", "dry_run": 0}, (BASE + HOUR, False)),
        ({"refresh_time": None, "dry_run": "No"}, (BASE + 2 * HOUR, False)),
    ],
)
def test_run_params_are_parsed_into_typed_values(params, expected):
    p = run_params(_ctx(params), view="v")
    assert (p.refresh_time, p.dry_run) == expected
    assert type(p.refresh_time) is int and type(p.dry_run) is bool


HOSTILE = [
    "1; rm -rf /",
    "' OR 1=1 --",
    "$(touch /tmp/mvsink_pwned)",
    "2026-01-01T00:00:00Z; DROP TABLE t",
    "`id`",
    "1767229200000 OR 1=1",
    "0x10",
    "1e3",
]


@pytest.mark.unit
@pytest.mark.parametrize("value", [*HOSTILE, -5, "99999999999999999999", True, ["2026-01-01"], {"a": 1}, 1.5])
def test_junk_refresh_time_is_refused_clearly(value):
    with pytest.raises(MvSinkError) as ei:
        run_params(_ctx({"refresh_time": value}), view="v")
    msg = str(ei.value)
    assert msg.startswith("view v: run param refresh_time=") and "Fix: trigger the run with refresh_time as" in msg


@pytest.mark.unit
@pytest.mark.parametrize("value", ["yes please", "' OR 1=1", "truee", 2, -1, [], {"x": 1}, 0.5])
def test_junk_dry_run_is_refused_clearly(value):
    with pytest.raises(MvSinkError, match=r"view v: run param dry_run=.* is not true or false\. Fix:"):
        run_params(_ctx({"dry_run": value}), view="v")


@pytest.mark.unit
@pytest.mark.parametrize("value", ["1; rm -rf /", "-1", 10_000, "x"])
def test_junk_attempt_is_refused_clearly(value):
    with pytest.raises(MvSinkError, match="run param attempt="):
        run_params(_ctx({}, {"attempt": value}), view="v")


class _RecordingTI:
    def __init__(self) -> None:
        self.pushed: dict[str, object] = {}

    def xcom_push(self, key: str, value: object) -> None:
        self.pushed[key] = value


@pytest.mark.unit
@pytest.mark.parametrize("value", HOSTILE)
def test_mint_step_refuses_hostile_params_before_minting(tmp_path, monkeypatch, value):
    monkeypatch.setenv("MVSINK_DATA_ROOT", str(tmp_path))
    (tmp_path / "v.yaml").write_text(view_text())
    ti = _RecordingTI()
    with pytest.raises(MvSinkError, match="refresh_time"):
        tasks.mint_step("v", str(tmp_path), {**_ctx({"refresh_time": value}), "ti": ti})
    assert ti.pushed == {}  # no batch description: nothing reaches the write step's command line
    assert not (tmp_path / "views").exists()  # no table created
