"""A view's ``notify:`` through Airflow's own callbacks: a failed run and a run that leaves the view past its
``max_lag``, each told to the view's notifiers (any Airflow ``BaseNotifier``).

A failed run: the DAG's ``on_failure_callback`` (once per run, whichever task failed). A stale view: the DAG's
``on_success_callback`` reads the view's freshness (:func:`mvsink.readers.status.view_status`) when the run has
finished, and tells the notifiers only when the view is past its ``max_lag`` (a refresh that waited for inputs, ran
at an old refresh time, or found nothing to do before ``as_of``). Airflow runs both callbacks in the DAG processor.
Each notifier gets the run's context plus ``mvsink``: ``event`` (``failure`` or ``stale``), ``view``, ``message``
and, for ``stale``, ``lag_ms``, ``max_lag_ms`` and ``final_through``; a notifier's templated fields can use them
(``{{ mvsink.message }}``).
"""

from __future__ import annotations

import dataclasses
import importlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from airflow.sdk import BaseNotifier

from mvsink.definitions.view import Notify, ViewDefinition
from mvsink.exceptions import ViewDefinitionError
from mvsink.times import format_duration, format_time


def notifier_for(view: ViewDefinition, spec: Notify) -> BaseNotifier:
    """The notifier ``spec`` names, made with its ``args`` (a bad path or arguments: the view file's error)."""
    module, _, name = spec.notifier.rpartition(".")
    where = f"view file {view.file}: field 'notify': {spec.notifier}"
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise ViewDefinitionError(
            f"{where} cannot be imported ({type(exc).__name__}: {exc}). Fix: name an installed notifier class "
            "(module.Class), e.g. airflow.providers.smtp.notifications.smtp.SmtpNotifier."
        ) from None
    if not (isinstance(cls, type) and issubclass(cls, BaseNotifier)):
        raise ViewDefinitionError(
            f"{where} is not an Airflow notifier. Fix: name a subclass of airflow.sdk.BaseNotifier."
        )
    try:
        return cls(**spec.args)
    except TypeError as exc:
        raise ViewDefinitionError(f"{where}: its args do not fit ({exc}). Fix: correct `args`.") from None


@dataclasses.dataclass
class ViewCallback:
    """A DAG callback that tells ``notifiers`` of ``event`` (``failure``: always; ``stale``: only when the view is
    past its ``max_lag`` once the run has finished)."""

    event: str
    view: ViewDefinition
    notifiers: list[BaseNotifier]

    def __call__(self, context: Mapping[str, Any]) -> None:
        notice = self._notice(context)
        if notice is None:
            return
        for notifier in self.notifiers:
            notifier({**context, "mvsink": notice})

    def _notice(self, context: Mapping[str, Any]) -> dict[str, Any] | None:
        run = context.get("dag_run")
        run_id = getattr(run, "run_id", None) or "?"
        if self.event == "failure":
            reason = context.get("reason") or "a task failed"
            return {
                "event": "failure",
                "view": self.view.name,
                "run_id": run_id,
                "message": f"view {self.view.name}: run {run_id} failed ({reason}); see its failed task's log",
            }
        if self.view.max_lag_ms is None:  # no freshness target: never stale
            return None
        from mvsink.readers.status import view_status

        st = view_status(self.view, last=1)
        if not st["stale"]:
            return None
        through = st["final_through"]
        lag = "nothing final yet" if st["lag_ms"] is None else f"lag {format_duration(st['lag_ms'])}"
        return {
            "event": "stale",
            "view": self.view.name,
            "run_id": run_id,
            "lag_ms": st["lag_ms"],
            "max_lag_ms": st["max_lag_ms"],
            "final_through": through,
            "message": f"view {self.view.name} is stale after run {run_id}: {lag}, past its max_lag "
            f"{format_duration(st['max_lag_ms'])}"
            + (f" (final through {format_time(through)})" if through is not None else ""),
        }


def dag_callbacks(view: ViewDefinition) -> dict[str, Any]:
    """``on_failure_callback`` / ``on_success_callback`` of the view's DAG for its ``notify:`` (none: ``{}``)."""
    out: dict[str, Any] = {}
    for event, key in (("failure", "on_failure_callback"), ("stale", "on_success_callback")):
        notifiers = [notifier_for(view, n) for n in view.notify if event in n.events]
        if notifiers:
            out[key] = ViewCallback(event, view, notifiers)
    return out


class FileNotifier(BaseNotifier):
    """Appends one JSON line per notification to ``path``: ``event``, ``view``, ``dag_id``, ``run_id`` and
    ``message`` (templated). For a log shipper to pick up, and for tests."""

    template_fields = ("path", "message")

    def __init__(self, *, path: str, message: str = "{{ mvsink.message }}"):
        super().__init__()
        self.path = path
        self.message = message

    def notify(self, context: Any) -> None:
        notice = context.get("mvsink") or {}
        run = context.get("dag_run")
        dag = context.get("dag")
        line = {
            "event": notice.get("event"),
            "view": notice.get("view"),
            "dag_id": getattr(dag, "dag_id", None),
            "run_id": getattr(run, "run_id", None),
            "message": self.message,
        }
        with Path(self.path).open("a") as f:
            f.write(json.dumps(line) + "\n")
