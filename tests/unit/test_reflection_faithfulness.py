"""A reflected memory is stored only when it cites the entries it comes from and is faithful to
them (core/reflection/faithfulness.py): not opposite in polarity, no number or name they lack, no
echo of the prompt, no narration of the steps, no raw tool call."""
from __future__ import annotations

import pytest

from memplane_server.core.model import Kind
from memplane_server.core.reflection.faithfulness import (
    CONTRADICTS,
    COPIES_FAILURE,
    NARRATION,
    NO_CITATION,
    PROMPT_ECHO,
    TOOL_CALL,
    UNGROUNDED,
    UNKNOWN_ENTRY,
    kept_context,
    why_dropped,
)
from memplane_server.core.reflection.reflection import Task, TaskStep
from memplane_server.core.reflection.transcript import task_entries, task_transcript
from memplane_server.core.reflection.triggers import task_focus
from memplane_server.llm.reflection import SYSTEM_PROMPT

TRIP = Task("trip-1", "Book me a flight to Paris on Friday. I never travel before 8am.",
            (TaskStep("search_flights Paris Friday", "3 flights: 06:45, 09:10, 11:30"), TaskStep("book 09:10", "booked")),
            "success")
DEPLOY = Task("deploy-1", "Deploy the API",
              (TaskStep("run deploy", "error: schema missing"), TaskStep("run migrations", "ok"),
               TaskStep("run deploy", "ok")),
              "success", feedback="Never deploy before running the migrations")
TRIP_ZH = Task("trip-2", "帮我订周五去上海的机票，我从不在早上8点前出发",
               (TaskStep("search_flights 上海", "找到3个航班"),), "success", feedback="别订红眼航班")


def dropped(task: Task, kind: Kind, content: str, cites: tuple[int, ...]) -> str | None:
    return why_dropped(kind, content, cites, task_entries(task), _instructions(task))


def context_kept(task: Task, kind: Kind, context: str) -> str:
    return kept_context(kind, context, task_entries(task), _instructions(task))


def _instructions(task: Task) -> str:
    return SYSTEM_PROMPT + "\nFocus:\n- " + "\n- ".join(task_focus(task))


def test_the_transcript_numbers_request_steps_and_feedback_as_they_are_cited():
    assert task_transcript(DEPLOY) == (
        "Task deploy-1\n[0] Request: Deploy the API\n"
        "[1] Step: run deploy\n    Observation: error: schema missing\n"
        "[2] Step: run migrations\n    Observation: ok\n"
        "[3] Step: run deploy\n    Observation: ok\n"
        "Outcome: success\n[4] Feedback: Never deploy before running the migrations")


def test_entries_are_labelled_as_kept_with_a_memory():
    assert [e.label for e in task_entries(DEPLOY)] == ["request", "step 1", "step 2", "step 3", "feedback"]


def test_a_memory_citing_no_entry_is_dropped():
    assert dropped(TRIP, Kind.PREFERENCE, "The user never travels before 8am.", ()) == NO_CITATION


def test_a_memory_citing_only_entries_that_do_not_exist_is_dropped():
    assert dropped(TRIP, Kind.PREFERENCE, "The user never travels before 8am.", (7, 9)) == UNKNOWN_ENTRY


def test_a_number_too_many_beside_an_entry_that_exists_does_not_drop_the_memory():
    assert dropped(TRIP, Kind.PREFERENCE, "The user never travels before 8am.", (0, 7)) is None


def test_never_before_8am_stored_as_always_before_8am_is_dropped():
    assert dropped(TRIP, Kind.PREFERENCE, "The user always travels before 8am.", (0,)) == CONTRADICTS


def test_a_contradiction_of_the_users_words_is_dropped_even_when_they_are_not_cited():
    assert dropped(TRIP, Kind.PREFERENCE, "The user always travels before 8am.", (1,)) == CONTRADICTS


def test_before_swapped_for_after_is_dropped():
    assert dropped(TRIP, Kind.PREFERENCE, "The user never travels after 8am.", (0,)) == CONTRADICTS


@pytest.mark.parametrize("content", [
    "The user never travels before 8am.",
    "The user does not travel before 8 am.",
    "The user only travels after 8am.",  # two flips: the negation dropped, before turned into after
    "The user travels after 8:00.",
])
def test_a_paraphrase_that_keeps_the_polarity_is_kept(content):
    assert dropped(TRIP, Kind.PREFERENCE, content, (0,)) is None


def test_a_lesson_contradicting_the_users_rule_is_dropped():
    assert dropped(DEPLOY, Kind.LESSON, "Deploy before running the migrations.", (4,)) == CONTRADICTS


def test_a_negation_added_to_the_users_rule_is_dropped():
    assert dropped(DEPLOY, Kind.LESSON, "Don't run migrations before deploying.", (4,)) == CONTRADICTS


@pytest.mark.parametrize("content", [
    "Always run the migrations before deploying.",  # "never X before Y" is "Y before X"
    "Next time, run the migrations before you deploy the API.",
])
def test_a_lesson_restating_the_users_rule_in_other_order_is_kept(content):
    assert dropped(DEPLOY, Kind.LESSON, content, (1, 2, 4)) is None


def test_a_lesson_is_not_held_to_the_polarity_of_an_observation():
    # "schema missing" becomes "do not deploy without the schema": advice, not a contradiction.
    assert dropped(DEPLOY, Kind.LESSON, "Do not deploy while the schema is missing.", (1,)) is None


def test_a_fact_opposite_to_an_observation_is_dropped():
    task = Task("p", "Check the passport", (TaskStep("check_passport", "the passport is not valid"),), "failure")
    assert dropped(task, Kind.FACT, "The passport is valid.", (1,)) == CONTRADICTS


def test_chinese_never_stored_as_always_is_dropped():
    assert dropped(TRIP_ZH, Kind.PREFERENCE, "用户总是在早上8点前出发", (0,)) == CONTRADICTS


def test_chinese_dont_stored_as_do_is_dropped():
    assert dropped(TRIP_ZH, Kind.PREFERENCE, "用户要订红眼航班", (2,)) == CONTRADICTS


@pytest.mark.parametrize("content", ["用户从不在早上8点前出发", "用户不在早上8点前出发", "用户只在早上8点后出发"])
def test_a_chinese_paraphrase_that_keeps_the_polarity_is_kept(content):
    assert dropped(TRIP_ZH, Kind.PREFERENCE, content, (0,)) is None


def test_a_number_the_model_read_in_an_entry_it_did_not_cite_stands():
    task = Task("i", "Send the invoices", (TaskStep("send all", "error 45009: over 100 per minute"),
                                            TaskStep("send 100 a minute", "ok")), "success")
    assert dropped(task, Kind.LESSON, "Next time, send at most 100 a minute.", (1,)) is None


def test_a_number_the_model_read_nowhere_is_dropped():
    assert dropped(TRIP, Kind.PREFERENCE, "The user never travels before 9am.", (0,)) == UNGROUNDED


def test_a_name_the_model_read_nowhere_is_dropped():
    assert dropped(TRIP, Kind.PREFERENCE, "The user never flies to London before 8am.", (0,)) == UNGROUNDED


def test_an_identifier_the_model_read_nowhere_is_dropped():
    assert dropped(DEPLOY, Kind.PROCEDURE, "Run db_migrate, then deploy.", (2, 3)) == UNGROUNDED


def test_a_name_of_the_request_counts_as_shown_to_every_memory():
    assert dropped(DEPLOY, Kind.LESSON, "Run the migrations before deploying the API.", (2,)) is None


def test_a_context_with_a_name_nothing_read_holds_is_left_out_and_the_memory_kept():
    assert dropped(DEPLOY, Kind.FACT, "The migrations ran first.", (2,)) is None
    assert context_kept(DEPLOY, Kind.FACT, "deploying to Kubernetes") == ""


def test_a_context_echoing_the_task_focus_is_left_out():
    retried = Task("r", "Deploy the API", DEPLOY.steps, "success", attempts=2)
    focus = task_focus(retried)[0]
    assert context_kept(retried, Kind.LESSON, focus) == ""


def test_a_context_saying_when_the_advice_applies_is_kept():
    assert context_kept(DEPLOY, Kind.LESSON, "when deploying the API") == "when deploying the API"


def test_entry_numbers_the_model_writes_into_the_context_are_no_numbers_it_claims():
    assert context_kept(DEPLOY, Kind.LESSON, "[1], [2]") == "[1], [2]"


def test_a_command_composed_of_the_trajectorys_parts_stands():
    task = Task("i", "Upgrade the chart", (TaskStep("helm upgrade app ./chart -f prod.yaml", "db.host empty"),
                                           TaskStep("helm upgrade app ./chart -f prod.yaml --dry-run", "db.host shown")),
                "success")
    assert dropped(task, Kind.LESSON, "Next time, run `helm upgrade --dry-run` first.", (2,)) is None
    assert dropped(task, Kind.LESSON, "Next time, run `helm upgrade --atomic` first.", (2,)) == UNGROUNDED


def test_an_identifier_in_a_lessons_context_is_checked_too():
    assert context_kept(DEPLOY, Kind.LESSON, "in k8s/prod.yaml") == ""


def test_a_latin_abbreviation_is_no_identifier():
    vm = Task("vm", "Create a VM", (TaskStep("request 4 cores 8G", "created"),), "success")
    assert dropped(vm, Kind.LESSON, "Next time, size the VM first (e.g. 8G, i.e. enough memory).", (1,)) is None


def test_a_timestamp_the_trajectory_holds_is_grounded_whole():
    api = Task("api", "Create a pickup", (TaskStep("read the docs", "use 2026-12-08T10:00:00+08:00"),), "success")
    assert dropped(api, Kind.LESSON, "Next time, send times like 2026-12-08T10:00:00+08:00.", (1,)) is None


@pytest.mark.parametrize("content", ["Next time, check the API quota before sending.",
                                     "Next time, ask Finance before sending."])
def test_a_lesson_may_name_general_things_the_trajectory_does_not(content):
    assert dropped(DEPLOY, Kind.LESSON, content, (2,)) is None


@pytest.mark.parametrize("content", [
    "First I called search_flights, then I booked the 09:10 flight.",
    "Called search_flights, then called book.",
    "In step 2 the flight was booked.",
    "我先调用了search_flights，然后订了票",
])
def test_a_lesson_that_narrates_the_steps_is_dropped(content):
    assert dropped(TRIP, Kind.LESSON, content, (1, 2)) == NARRATION


def test_a_procedure_written_as_instructions_is_kept():
    assert dropped(TRIP, Kind.PROCEDURE, "Search flights, then book the first one after 8am.", (0, 1, 2)) is None


@pytest.mark.parametrize("content", ['search_flights({"to": "Paris"})', 'search_flights(to="Paris")',
                                     '{"tool": "search_flights", "args": {}}'])
def test_a_raw_tool_call_is_dropped(content):
    assert dropped(TRIP, Kind.PROCEDURE, content, (1,)) == TOOL_CALL


def test_the_focus_line_of_the_prompt_stored_as_a_memory_is_dropped():
    retried = Task("d2", "Deploy the API", (TaskStep("run deploy", "timeout"), TaskStep("run deploy", "ok")), "success")
    memory = "Store the procedure that finally worked, as concrete steps."
    assert dropped(retried, Kind.PROCEDURE, memory, (1, 2)) == PROMPT_ECHO


def test_the_prompts_example_lesson_copied_is_dropped():
    memory = "Next time, renew the ledger-sync token before running the nightly import."
    assert dropped(DEPLOY, Kind.LESSON, memory, (1,)) == PROMPT_ECHO


def test_words_of_the_prompt_that_the_task_also_holds_are_not_an_echo():
    task = Task("i", "Run the nightly import", (TaskStep("run import", "error: ledger-sync token expired"),
                                                 TaskStep("renew the ledger-sync token", "ok")), "failure")
    memory = "Next time, renew the ledger-sync token before running the nightly import."
    assert dropped(task, Kind.LESSON, memory, (1, 2)) is None


@pytest.mark.parametrize("content", ["1. Run the migrations. 2. Run deploy.", "Step 1: run the migrations; Step 2: run deploy.",
                                     "1. 先运行迁移。2. 再部署。"])
def test_a_procedure_numbering_its_own_steps_is_kept(content):
    assert dropped(DEPLOY, Kind.PROCEDURE, content, (2, 3)) is None


def test_a_statement_that_orders_nothing_in_time_is_not_held_to_a_before_rule():
    assert dropped(TRIP, Kind.PREFERENCE, "The user travels at 8am.", (0,)) is None


RATE_LIMITED = Task("i", "Collect the open issues of our 40 repositories",
                    (TaskStep("GET /repos/{repo}/issues for all 40 repos in parallel", "403: secondary rate limit exceeded"),
                     TaskStep("fetch one repository at a time with 1 s between requests", "all 40 fetched")), "success")


def test_a_procedure_that_does_again_what_failed_is_dropped():
    memory = "GET /repos/{repo}/issues for all 40 repos in parallel; then fetch one repository at a time."
    assert dropped(RATE_LIMITED, Kind.PROCEDURE, memory, (1, 2)) == COPIES_FAILURE


def test_a_procedure_that_does_what_worked_stands():
    memory = "Fetch one repository at a time with 1 s between requests."
    assert dropped(RATE_LIMITED, Kind.PROCEDURE, memory, (2,)) is None


def test_a_step_that_failed_and_then_succeeded_as_it_was_is_no_failed_action():
    memory = "1. Run the migrations. 2. Run deploy."
    assert dropped(DEPLOY, Kind.PROCEDURE, memory, (2, 3)) is None
