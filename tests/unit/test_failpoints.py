"""Fail points (MVSINK_FAIL_POINTS): unarmed, raising, exiting the process, once, scoped to a view."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from mvsink.core.failpoints import ENV, failpoint
from mvsink.exceptions import InjectedFault

pytestmark = pytest.mark.unit


def test_failpoint_unarmed_is_noop(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    assert failpoint("append:before_commit") is None
    monkeypatch.setenv(ENV, "")
    assert failpoint("append:before_commit") is None


def test_failpoint_armed_raises(monkeypatch):
    monkeypatch.setenv(ENV, "write:after_staging, append:before_commit")
    with pytest.raises(InjectedFault) as ei:
        failpoint("append:before_commit")
    assert str(ei.value) == (
        "injected fault at append:before_commit (MVSINK_FAIL_POINTS=write:after_staging, append:before_commit)"
    )
    with pytest.raises(InjectedFault):
        failpoint("write:after_staging")


def test_failpoint_other_names_do_not_fire(monkeypatch):
    monkeypatch.setenv(ENV, "append:after_commit,append:before_commit:exit")
    assert failpoint("write:after_staging") is None
    assert failpoint("append:before") is None
    assert failpoint("append") is None


def _run_failpoint(env_value: str, name: str) -> subprocess.CompletedProcess[str]:
    code = f"from mvsink.core.failpoints import failpoint\nfailpoint({name!r})\nprint('survived')\n"
    return subprocess.run(
        [sys.executable, "-c", code], env={**os.environ, ENV: env_value}, capture_output=True, text=True, timeout=60
    )


def test_failpoint_exit_variant_kills_process():
    proc = _run_failpoint("write:after_staging, append:after_commit:exit", "append:after_commit")
    assert proc.returncode == 97, proc.stderr
    assert proc.stdout == ""


def test_failpoint_exit_variant_other_name_survives():
    proc = _run_failpoint("append:after_commit:exit", "append:before_commit")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "survived\n"


def test_failpoint_once_fires_only_the_first_time_and_view_scoped(monkeypatch, tmp_path):
    monkeypatch.setenv("MVSINK_SYNC_DIR", str(tmp_path))
    monkeypatch.setenv(ENV, "append:after_commit@v1:once,write:after_staging:raise:once")
    assert failpoint("append:after_commit", view="v2") is None  # another view: not armed, nothing recorded
    assert failpoint("append:after_commit") is None  # no view given: a view-scoped point does not fire
    with pytest.raises(InjectedFault):
        failpoint("append:after_commit", view="v1")
    assert failpoint("append:after_commit", view="v1") is None  # the retry passes
    assert (tmp_path / "append-after_commit@v1.fired").read_text() == str(os.getpid())
    with pytest.raises(InjectedFault):
        failpoint("write:after_staging", view="any")
    assert failpoint("write:after_staging", view="other") is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["append-after_commit@v1.fired", "write-after_staging.fired"]
