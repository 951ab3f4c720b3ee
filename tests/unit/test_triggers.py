"""When a task is worth reflecting on, and when a session is due."""
from __future__ import annotations

import pytest

from memplane_server.core.reflection.reflection import Task, TaskStep
from memplane_server.core.reflection.triggers import retries, task_decision, turns_decision


@pytest.mark.parametrize("task, like_earlier, reason", [
    (Task("t", "deploy", outcome="failure"), True, "the task failed"),
    (Task("t", "deploy", outcome="success", feedback="too slow"), True, "the task has user feedback"),
    (Task("t", "deploy", outcome="success", attempts=3), True, "the task succeeded after 2 retries"),
    (Task("t", "deploy", outcome="success"), False, "a new kind of task"),
])
def test_a_task_that_can_teach_something_is_reflected_on(task, like_earlier, reason):
    decision = task_decision(task, like_earlier=like_earlier)
    assert decision.run and decision.reason == reason


def test_a_routine_success_like_an_earlier_task_is_skipped():
    decision = task_decision(Task("t", "deploy", outcome="success"), like_earlier=True)
    assert not decision.run and decision.reason == "a routine success like an earlier task"


def test_a_repeated_step_counts_as_a_retry():
    steps = (TaskStep("Run the migration"), TaskStep("check logs"), TaskStep("run the migration."))
    assert retries(Task("t", "x", steps)) == 1


def test_a_session_is_due_after_every_n_turns_since_its_last_reflection():
    assert turns_decision(19, 0, 20) is None
    assert turns_decision(40, 20, 20).reason == "20 turns since the last reflection of the session"
    assert turns_decision(500, 0, 0) is None  # off
