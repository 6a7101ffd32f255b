"""Dependencies: readiness, unknown ids, cycles of length 1, 2 and 5."""

from __future__ import annotations

import pytest

from tasks_app.models import Task, TaskDependency
from tests.tasks_app.helpers import (
    act,
    acted,
    create,
    created,
    error,
    show,
    unchanged,
    update,
    updated,
)

pytestmark = pytest.mark.django_db


def finish(client, task_id: str) -> None:
    updated(client, task_id, status="in_progress")
    updated(client, task_id, status="done")


def test_a_task_is_ready_when_every_dependency_is_done(alice, backend):
    created(alice, "A")
    created(alice, "B")
    body = created(alice, "C", depends_on=["A", "B"])
    assert (body["ready"], body["blocked_by"]) == (
        False,
        [{"id": "A", "status": "open"}, {"id": "B", "status": "open"}],
    )
    finish(alice, "A")
    updated(alice, "B", status="blocked")
    assert show(alice, "C")["blocked_by"] == [{"id": "B", "status": "blocked"}]
    updated(alice, "B", status="cancelled")
    assert show(alice, "C")["blocked_by"] == [{"id": "B", "status": "cancelled"}]
    assert show(alice, "C")["ready"] is False


@pytest.mark.parametrize("how", ["update", "claim"])
def test_entering_in_progress_needs_every_dependency_done(alice, backend, how):
    created(alice, "A")
    created(alice, "B")
    created(alice, "T", depends_on=["A", "B"])
    finish(alice, "A")
    with unchanged():
        if how == "claim":
            response = act(alice, "T", "claim")
        else:
            response = update(alice, "T", status="in_progress")
        err = error(response, 409, "TASK_DEPENDENCY_NOT_READY")
    assert err["message"] == "task T depends on unfinished tasks: B"
    assert err["detail"] == {"task_id": "T", "blocked_by": [{"id": "B", "status": "open"}]}
    finish(alice, "B")
    if how == "claim":
        assert acted(alice, "T", "claim")["status"] == "in_progress"
    else:
        assert updated(alice, "T", status="in_progress")["status"] == "in_progress"


def test_an_in_progress_task_cannot_gain_an_unfinished_dependency(alice, backend):
    created(alice, "A")
    created(alice, "T")
    updated(alice, "T", status="in_progress")
    with unchanged():
        error(update(alice, "T", depends_on=["A"]), 409, "TASK_DEPENDENCY_NOT_READY")


@pytest.mark.parametrize("how", ["update", "done"])
def test_entering_done_needs_every_dependency_done(alice, backend, how):
    created(alice, "A")
    created(alice, "T")
    updated(alice, "T", status="in_progress")
    # Only reachable with rows written behind the service's back (say, an import).
    task, dependency = Task.objects.get(task_id="T"), Task.objects.get(task_id="A")
    TaskDependency.objects.create(task=task, dependency=dependency, position=0)
    with unchanged():
        response = act(alice, "T", "done") if how == "done" else update(alice, "T", status="done")
        error(response, 409, "TASK_DEPENDENCY_NOT_READY")


def test_blocked_and_open_need_no_ready_dependencies(alice, backend):
    created(alice, "A")
    created(alice, "T", depends_on=["A"])
    assert updated(alice, "T", status="blocked")["status"] == "blocked"
    assert acted(alice, "T", "release")["status"] == "open"


def test_create_with_an_unknown_dependency_fails(alice, backend):
    created(alice, "A")
    with unchanged():
        err = error(create(alice, "T", depends_on=["A", "T-9999"]), 400, "TASK_UNKNOWN_DEPENDENCY")
    assert err["message"] == "task T references unknown dependency T-9999"
    assert err["detail"] == {"task_id": "T", "dependency": "T-9999"}


def test_update_with_an_unknown_dependency_fails(alice, backend):
    created(alice, "T")
    with unchanged():
        error(update(alice, "T", depends_on=["nope"]), 400, "TASK_UNKNOWN_DEPENDENCY")


def test_dependencies_are_per_channel_and_exact(alice, backend):
    assert alice.post("/api/v1/channels/", {"name": "design"}, format="json").status_code == 201
    created(alice, "A")
    assert create(alice, "X", channel="design", depends_on=["A"]).status_code == 400
    error(create(alice, "T", depends_on=["a"]), 400, "TASK_UNKNOWN_DEPENDENCY")


def test_cycle_of_length_1_at_create_and_at_update(alice, backend):
    with unchanged():
        err = error(create(alice, "S", depends_on=["S"]), 409, "TASK_DEPENDENCY_CYCLE")
    assert err["message"] == "dependency cycle includes task S"
    assert err["detail"] == {"task_id": "S", "cycle": ["S", "S"]}
    created(alice, "S")
    with unchanged():
        error(update(alice, "S", depends_on=["S"]), 409, "TASK_DEPENDENCY_CYCLE")


def test_cycle_of_length_2(alice, backend):
    created(alice, "A")
    created(alice, "B", depends_on=["A"])
    with unchanged():
        err = error(update(alice, "A", depends_on=["B"]), 409, "TASK_DEPENDENCY_CYCLE")
    assert err["detail"] == {"task_id": "A", "cycle": ["A", "B", "A"]}


def test_cycle_of_length_5(alice, backend):
    # T1 <- T2 <- T3 <- T4 <- T5 (T2 depends on T1, ...); then T1 -> T5 closes the loop.
    created(alice, "T1")
    for n in range(2, 6):
        created(alice, f"T{n}", depends_on=[f"T{n - 1}"])
    with unchanged():
        err = error(update(alice, "T1", depends_on=["T5"]), 409, "TASK_DEPENDENCY_CYCLE")
    assert err["detail"] == {"task_id": "T1", "cycle": ["T1", "T5", "T4", "T3", "T2", "T1"]}
    # A diamond is not a cycle.
    assert updated(alice, "T5", depends_on=["T4", "T1", "T2"])["depends_on"] == ["T4", "T1", "T2"]


def test_dependency_order_is_kept(alice, backend):
    for name in ("C", "A", "B"):
        created(alice, name)
    assert created(alice, "T", depends_on=["C", "A", "B"])["depends_on"] == ["C", "A", "B"]
