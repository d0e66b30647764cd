"""Issue 6: the short concurrency soak: 2 Airflow installations + a CLI refresh race for 2 rounds."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.airflow, pytest.mark.slow]


def test_short_soak_two_installations_and_cli(tmp_path, monkeypatch):
    from bench import soak

    monkeypatch.setenv("MVSINK_DATA_ROOT", str(tmp_path / "work" / "data"))
    monkeypatch.delenv("MVSINK_FAIL_POINTS", raising=False)
    args = soak.parser().parse_args(
        [
            "--rounds",
            "2",
            "--homes",
            "2",
            "--seed",
            "3",
            "--work",
            str(tmp_path / "work"),
            "--report",
            str(tmp_path / "SOAK.md"),
        ]
    )
    tot = soak.run(args)
    assert tot["problems"] == [], tot
    assert tot["rounds"] == 2 and tot["oracle_ok_rounds"] == 2  # contents == oracle after every round
    assert tot["appends"] == 2  # exactly one append per refresh time: nothing appended twice
    assert tot["failed_runs"] == 0 and tot["orphans"] == 0
    # 3 racers per round (2 installations + CLI): each round's 2 losers lost a race or found it done
    assert tot["reschedules"] + tot["no_ops"] >= 2 * 2
    report = (tmp_path / "SOAK.md").read_text()
    assert "| 2 | 2/2 | 2 (" in report and "Concurrency soak" in report
