"""Issue 39, the view tab's controls (pure part): each names Airflow's own API, and is disabled for a user the auth
manager says may not make its call (Airflow still checks the call: tests/airflow/test_ui_states.py)."""

from __future__ import annotations

import re

import pytest

from mvsink.airflow.plugin import render

pytestmark = pytest.mark.unit


def _buttons(html: str) -> dict[str, bool]:
    """control -> disabled."""
    return {m[0]: "disabled" in m[1] for m in re.findall(r'data-control="(\w+)"([^>]*)>', html)}


def test_the_controls_point_at_airflows_api_and_follow_the_permissions():
    links = render.Links(airflow_root="/airflow/", app_root="/airflow/mvsink/")
    html = render.controls_html("sales", links, paused=False, can_trigger=True, can_pause=True)
    assert 'data-dag="mv_sales" data-api="/airflow/api/v2/"' in html and 'data-paused="false"' in html
    assert _buttons(html) == {"pause": False, "refresh_at": False, "backfill": False}
    assert ">Pause</button>" in html and '<div class="confirm" hidden>' in html
    paused = render.controls_html("sales", links, paused=True, can_trigger=False, can_pause=False)
    assert ">Resume</button>" in paused and 'data-paused="true"' in paused
    assert _buttons(paused) == {"pause": True, "refresh_at": True, "backfill": True}
    only_runs = render.controls_html("sales", links, paused=False, can_trigger=True, can_pause=False)
    assert _buttons(only_runs) == {"pause": True, "refresh_at": False, "backfill": False}
