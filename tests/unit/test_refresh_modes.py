"""The registry of refresh modes (spark/modes): their order, the first mode that applies and succeeds wins,
a refusal of the change ends the search, and the full diff's reason reads as each refusal says. No Spark:
fake strategies, and the real ones on plans they decide without reading one."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from mvsink import settings
from mvsink.incremental.modes.base import Change, Corrections, NotApplicable, combined_reason
from mvsink.incremental.modes.full import FullDiff
from mvsink.incremental.modes.registry import REFRESH_MODES, choose, decide

pytestmark = pytest.mark.unit

CHANGE = Change(("orders", "customers"))


@dataclasses.dataclass
class Fake:
    """A mode that answers ``decision`` to ``applies`` and ``result`` to ``run``, and records its calls."""

    name: Any
    decision: NotApplicable | None = None
    result: Corrections | NotApplicable | None = None
    title: str = "fake"
    phrase: str | None = "by a fake"
    setting: Any = None
    calls: list[str] = dataclasses.field(default_factory=list)

    def applies(self, plan: Any, change: Change) -> NotApplicable | None:
        self.calls.append("applies")
        return self.decision

    def fits(self, plan: Any, change: Change) -> NotApplicable | None:
        return self.decision

    def reads(self, inputs: Any, change: Change) -> None:
        return None

    def run(self, plan: Any, inputs: Any, change: Change) -> Corrections | NotApplicable:
        self.calls.append("run")
        assert self.result is not None
        return self.result


@dataclasses.dataclass
class Plan:
    """What the real modes read of PlanFacts before they need a plan tree."""

    state: Any = None
    with_error: bool = False
    no_state: str | None = None


def test_the_modes_are_tried_in_the_documented_order_under_their_commit_names():
    assert [m.name for m in REFRESH_MODES] == [
        "incremental",
        "incremental:aggregate",
        "incremental:groups",
        "incremental:topk",
        "incremental:partitioned",
        "full",
    ]


def test_the_first_mode_that_applies_and_succeeds_wins():
    a = Fake("a", NotApplicable("a: no", "shape"), phrase=None)
    b = Fake("b", None, Corrections("rows-b", "from b"))
    c = Fake("c", None, Corrections("rows-c", "from c"))
    got = choose([a, b, c], Plan(), CHANGE, inputs=None)
    assert (got.corrections, got.mode, got.reason) == ("rows-b", "b", "from b")
    assert a.calls == ["applies"] and b.calls == ["applies", "run"] and c.calls == []


def test_a_mode_that_applies_but_declines_passes_on_to_the_next():
    a = Fake("a", None, NotApplicable("too many groups", "refused"), phrase=None)
    b = Fake("b", None, Corrections("rows", "from b"))
    assert choose([a, b], Plan(), CHANGE, inputs=None).mode == "b"


def test_a_refused_change_ends_the_search_with_its_reason():
    a = Fake("a", None, NotApplicable("source 'orders': its log was vacuumed", "change"), phrase=None)
    b = Fake("b", None, Corrections("rows", "from b"))
    got = choose([a, b], Plan(), CHANGE, inputs=None)
    assert (got.corrections, got.mode, got.reason) == (None, "full", "source 'orders': its log was vacuumed")
    assert b.calls == []


def test_the_full_diff_reason_joins_the_refusals_and_leaves_unrelated_modes_out():
    modes = [
        Fake(
            "a", NotApplicable("not linear in 'orders': an Aggregate is computed over 'orders'", "shape"), phrase=None
        ),
        Fake("b", NotApplicable("the view keeps no aggregate state", "unrelated"), phrase="from the state"),
        Fake("c", None, NotApplicable("15 affected group(s) against 20 row(s)", "refused"), phrase="by groups"),
        Fake("d", NotApplicable("the query's top is not ORDER BY ... LIMIT (Aggregate)", "unrelated")),
    ]
    got = choose(modes, Plan(), CHANGE, inputs=None)
    assert got.mode == "full" and got.corrections is None
    assert got.reason == (
        "not linear in 'orders': an Aggregate is computed over 'orders'; "
        "and not by groups: 15 affected group(s) against 20 row(s)"
    )


def test_disabled_modes_name_their_setting_and_one_setting_is_said_once(monkeypatch):
    monkeypatch.setenv(settings.INCREMENTAL_AGGREGATE.name, "false")
    monkeypatch.setenv(settings.INCREMENTAL_GROUPS.name, "false")
    monkeypatch.setenv(settings.INCREMENTAL_TOPK.name, "false")
    monkeypatch.setenv(settings.INCREMENTAL_PARTITIONED.name, "false")
    plan = Plan(state=object())  # an aggregate with state: no plan tree is needed to refuse
    refusals = [(m, m.applies(plan, CHANGE)) for m in REFRESH_MODES]  # type: ignore[arg-type]
    assert [d.kind for _, d in refusals if d] == ["shape", "disabled", "disabled", "disabled", "disabled"]
    assert [d.setting for _, d in refusals[1:] if d] == [
        "MVSINK_INCREMENTAL_AGGREGATE",
        "MVSINK_INCREMENTAL_GROUPS",
        "MVSINK_INCREMENTAL_TOPK",
        "MVSINK_INCREMENTAL_PARTITIONED",
    ]
    assert combined_reason([(m, d) for m, d in refusals if d]) == (
        "not linear in 'orders': the view's Aggregate is above it"
        " (the aggregate-state refresh is off; MVSINK_INCREMENTAL_AGGREGATE=true enables it)"
        " (the affected-groups refresh is off; MVSINK_INCREMENTAL_GROUPS=true enables it)"
        " (the top-k refresh is off; MVSINK_INCREMENTAL_TOPK=true enables it)"
        " (the partitioned refresh is off; MVSINK_INCREMENTAL_PARTITIONED=true enables it)"
    )


def test_decide_names_the_mode_a_change_would_take_without_running_it():
    a = Fake("a", NotApplicable("not linear", "shape"), phrase=None)
    b = Fake("b", None, Corrections("rows", "from b"))
    mode, why = decide([a, b], Plan(), CHANGE)  # type: ignore[arg-type]
    assert mode is b and why == "" and b.calls == ["applies"]
    mode, why = decide([a], Plan(), CHANGE)  # type: ignore[arg-type]
    assert mode is None and why == "not linear"


class FakeFull(FullDiff):
    """The full diff, run without Spark: as if done in the driver."""

    def run(self, plan: Any, inputs: Any, change: Change) -> Corrections:
        return Corrections("all-rows", "a full diff in the driver: 3 correction(s)")


def test_the_full_diff_runs_last_its_reason_the_refusals_and_how_it_ran():
    a = Fake("a", NotApplicable("not linear in 'orders'", "shape"), phrase=None)
    got = choose([a, FakeFull()], Plan(), CHANGE, inputs=None)
    assert (got.corrections, got.mode) == ("all-rows", "full") and got.full
    assert got.reason == "not linear in 'orders' (a full diff in the driver: 3 correction(s))"
    assert [(m.name, r.kind) for m, r in got.refusals] == [("a", "shape")]


def test_a_change_no_mode_may_use_goes_to_the_full_diff_without_asking_the_modes():
    a = Fake("a", None, Corrections("rows", "from a"), phrase=None)
    change = Change(("orders",), NotApplicable("the table moved from version 3 to 4 after mint", "change"))
    got = choose([a, FakeFull()], Plan(), change, inputs=None)
    assert a.calls == [] and got.mode == "full"
    assert got.reason == "the table moved from version 3 to 4 after mint (a full diff in the driver: 3 correction(s))"


def test_choosing_without_running_names_the_mode_and_runs_none():
    a = Fake("a", NotApplicable("not linear", "shape"), phrase=None)
    b = Fake("b", None, Corrections("rows", "from b"))
    got = choose([a, b, FakeFull()], Plan(), CHANGE, None, run=False)
    assert got.chosen is b and got.corrections is None and not got.full and b.calls == ["applies"]
    got = choose([a, FakeFull()], Plan(), CHANGE, None, run=False)
    assert got.full and got.mode == "full" and got.reason == "not linear"


def test_a_view_without_state_or_with_checks_is_unrelated_to_the_aggregate_mode():
    agg = REFRESH_MODES[1]
    got = agg.applies(Plan(state=None, no_state="MIN is not accumulable"), CHANGE)  # type: ignore[arg-type]
    assert got is not None and got.kind == "unrelated" and "MIN is not accumulable" in got.reason
    got = agg.applies(Plan(state=object(), with_error=True), CHANGE)  # type: ignore[arg-type]
    assert got is not None and got.kind == "unrelated"
