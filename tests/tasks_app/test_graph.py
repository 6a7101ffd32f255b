"""The status machine and the dependency graph as pure functions: no database (the test has
no ``django_db`` mark, so a query would fail it)."""

from __future__ import annotations

import itertools

import pytest

from agentchat.core.rules.errors import AppError
from tasks_app.services import graph

STATUSES = ["open", "in_progress", "blocked", "done", "cancelled"]
# The CLI document's list, written out independently of graph.TRANSITIONS.
MOVES = {
    ("open", "in_progress"),
    ("open", "blocked"),
    ("open", "cancelled"),
    ("in_progress", "open"),
    ("in_progress", "blocked"),
    ("in_progress", "done"),
    ("in_progress", "cancelled"),
    ("blocked", "open"),
    ("blocked", "in_progress"),
    ("blocked", "cancelled"),
}


@pytest.mark.parametrize(("old", "new"), list(itertools.product(STATUSES, STATUSES)))
def test_transition_check_allows_exactly_the_documented_moves_and_same_state(old, new):
    if (old, new) in MOVES or old == new:
        graph.transition_check(task_id="T", old_status=old, new_status=new)
        return
    with pytest.raises(AppError) as caught:
        graph.transition_check(task_id="T", old_status=old, new_status=new)
    assert caught.value.code == "TASK_INVALID_TRANSITION"
    assert caught.value.message == f"transition {old!r} -> {new!r} is not allowed"
    assert caught.value.detail == {"task_id": "T", "old_status": old, "new_status": new}


@pytest.mark.parametrize("new", STATUSES)
def test_ready_check_needs_done_dependencies_only_for_in_progress_and_done(new):
    dependencies = [("A", "done"), ("B", "blocked"), ("C", "open"), ("D", "cancelled")]
    if new not in ("in_progress", "done"):
        graph.ready_check(task_id="T", new_status=new, dependencies=dependencies)
        return
    with pytest.raises(AppError) as caught:
        graph.ready_check(task_id="T", new_status=new, dependencies=dependencies)
    assert caught.value.code == "TASK_DEPENDENCY_NOT_READY"
    assert caught.value.message == "task T depends on unfinished tasks: B, C, D"
    assert caught.value.detail["blocked_by"] == [
        {"id": "B", "status": "blocked"},
        {"id": "C", "status": "open"},
        {"id": "D", "status": "cancelled"},
    ]


def test_ready_check_passes_when_every_dependency_is_done_or_there_is_none():
    graph.ready_check(task_id="T", new_status="done", dependencies=[("A", "done")])
    graph.ready_check(task_id="T", new_status="in_progress", dependencies=[])


def _check(task_id, depends_on, edges, known=None):
    graph.dependencies_check(
        task_id=task_id,
        depends_on=depends_on,
        known=set(edges) if known is None else known,
        edges=edges,
    )


def _code(call) -> AppError:
    with pytest.raises(AppError) as caught:
        call()
    return caught.value


def test_dependencies_check_refuses_an_unknown_dependency_first():
    err = _code(lambda: _check("T", ["A", "nope"], {"A": [], "T": []}))
    assert (err.code, err.detail) == (
        "TASK_UNKNOWN_DEPENDENCY",
        {"task_id": "T", "dependency": "nope"},
    )


def test_dependencies_check_finds_cycles_of_length_1_2_and_5():
    # A task depending on itself is a cycle, also when it does not exist yet (create).
    err = _code(lambda: _check("S", ["S"], {}, known=set()))
    assert (err.code, err.detail["cycle"]) == ("TASK_DEPENDENCY_CYCLE", ["S", "S"])
    err = _code(lambda: _check("A", ["B"], {"A": [], "B": ["A"]}))
    assert err.detail["cycle"] == ["A", "B", "A"]
    chain = {"T1": [], "T2": ["T1"], "T3": ["T2"], "T4": ["T3"], "T5": ["T4"]}
    err = _code(lambda: _check("T1", ["T5"], chain))
    assert err.detail == {"task_id": "T1", "cycle": ["T1", "T5", "T4", "T3", "T2", "T1"]}


def test_dependencies_check_accepts_a_diamond():
    diamond = {"A": [], "B": ["A"], "C": ["A"], "D": []}
    _check("D", ["B", "C", "A"], diamond)


def test_dependencies_check_on_a_long_chain_is_not_recursive():
    # 5,000 links would overflow a recursive walk's stack.
    chain = {f"T{i}": [f"T{i - 1}"] if i else [] for i in range(5000)}
    _check("T4999", ["T4998"], chain)
    err = _code(lambda: _check("T0", ["T4999"], chain))
    assert err.code == "TASK_DEPENDENCY_CYCLE"
    assert len(err.detail["cycle"]) == 5001


def test_dependencies_check_reports_the_whole_cycle_of_a_long_chain():
    # Each step carried its whole path along (2.5 s of CPU for 50,000 links, now 25 ms; a
    # speed is a bench figure, not a test's): the walk enters each node once.
    n = 50_000
    chain = {f"T{i}": [f"T{i - 1}"] if i else [] for i in range(n)}
    err = _code(lambda: _check("T0", [f"T{n - 1}"], chain))
    assert err.detail["cycle"] == ["T0", *(f"T{i}" for i in range(n - 1, 0, -1)), "T0"]
