"""A view file's ``notify:``: notifiers by import path, their arguments and events; bad ones refused naming the fix."""

from __future__ import annotations

import pytest

from mvsink.definitions.view import Notify
from tests.support.viewfiles import doc, expect_error, parse

pytestmark = pytest.mark.unit

FILE_NOTIFIER = "mvsink.airflow.notifications.FileNotifier"


def test_no_notify_means_no_notifiers() -> None:
    assert parse(doc()).notify == ()


def test_an_import_path_or_a_mapping() -> None:
    v = parse(
        doc(
            notify=f"[{FILE_NOTIFIER}, {{notifier: a.b.Ops, args: {{to: ops@example.com, n: 2}}, events: [stale]}}, "
            "{notifier: a.b.Ops, events: failure}]"
        )
    )
    assert v.notify == (
        Notify(FILE_NOTIFIER, {}, ("failure", "stale")),
        Notify("a.b.Ops", {"to": "ops@example.com", "n": 2}, ("stale",)),
        Notify("a.b.Ops", {}, ("failure",)),
    )


def test_the_notifiers_do_not_change_the_definition_hash() -> None:
    assert parse(doc(notify=f"[{FILE_NOTIFIER}]")).definition_hash() == parse(doc()).definition_hash()


@pytest.mark.parametrize(
    ("value", "field", "fragment"),
    [
        ("ops", "notify", "must be a list of notifiers"),
        ("[3]", "notify[0]", "must be an import path or a mapping"),
        ("[NoModule]", "notify[0].notifier", "is not an import path"),
        ("[{notifier: a.B, to: x}]", "notify[0]", "unknown key 'to'"),
        ("[{notifier: a.B, args: [x]}]", "notify[0].args", "must be a mapping"),
        ("[{notifier: a.B, events: [late]}]", "notify[0].events", "is not a list of events"),
        ("[{notifier: a.B, events: []}]", "notify[0].events", "is not a list of events"),
    ],
)
def test_bad_notifiers_are_refused(value: str, field: str, fragment: str) -> None:
    expect_error(doc(notify=value), field, fragment)
