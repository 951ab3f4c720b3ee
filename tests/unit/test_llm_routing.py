"""Which models an LLM stage asks and in what order (MEMPLANE_LLM_STAGE_MODELS, _FALLBACK_MODELS),
what is refused at start, and the daily token budget's arithmetic."""
from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from memplane_server.core.errors import MemplaneError
from memplane_server.core.usage import exhausted, parse_day, remaining, report_days
from memplane_server.llm.chat import DEGRADING_REASONS
from memplane_server.llm.routing import Endpoint, Routing
from memplane_server.llm.structured import STAGE_OF_SCHEMA, Expected, stage_of
from memplane_server.runtime import chat_model
from memplane_server.settings import LLM_STAGES, Settings

SMALL, BIG, SPARE = Endpoint("openai/small"), Endpoint("openai/big"), Endpoint("openai/spare")


def test_a_stage_without_its_own_model_asks_the_default_one():
    assert Routing(SMALL, {"reflection": BIG}).chain("extraction") == [SMALL]


def test_a_stage_with_its_own_model_asks_it_and_not_the_default():
    assert Routing(SMALL, {"reflection": BIG}).chain("reflection") == [BIG]


def test_the_fallbacks_follow_the_stages_model_in_their_order():
    assert Routing(SMALL, fallbacks=(SPARE, BIG)).chain("rerank") == [SMALL, SPARE, BIG]


def test_a_fallback_that_is_the_stages_own_model_is_not_asked_twice():
    assert Routing(SMALL, {"digest": BIG}, (BIG, SMALL)).chain("digest") == [BIG, SMALL]


def test_stages_are_named_for_what_they_do_not_for_their_schema():
    assert stage_of(Expected("operations", {}, 1)) == "extraction"
    assert stage_of(Expected("queries", {}, 1)) == "query_rewrite"
    assert stage_of(Expected("ranking", {}, 1)) == "rerank"
    assert LLM_STAGES == {"extraction", "reflection", "summary", "consolidation", "digest", "query_rewrite", "rerank"}


def test_stage_models_are_read_as_stage_equals_model():
    s = Settings(llm_model="openai/small", llm_stage_models=" extraction=openai/tiny , reflection = openai/big ")
    assert s.stage_models == {"extraction": "openai/tiny", "reflection": "openai/big"}


def test_an_unknown_stage_is_refused_at_start_naming_the_stages():
    with pytest.raises(ValueError, match="unknown stage 'extract'.*extraction"):
        Settings(llm_model="openai/small", llm_stage_models="extract=openai/big")


def test_an_entry_without_a_model_is_refused_at_start():
    with pytest.raises(ValueError, match="is not stage=model"):
        Settings(llm_model="openai/small", llm_stage_models="reflection")


def test_stage_models_without_a_default_model_are_refused_at_start():
    with pytest.raises(ValueError, match="MEMPLANE_LLM_MODEL or MEMPLANE_LOCAL_MODEL"):
        Settings(llm_stage_models="reflection=openai/big")


def test_fallbacks_are_kept_in_the_order_given():
    assert Settings(llm_model="a", llm_fallback_models="b, c,,d").fallback_models == ("b", "c", "d")


def test_the_runtime_routes_stages_and_fallbacks_through_the_shared_provider():
    s = Settings(llm_model="openai/small", llm_api_base="http://llm", llm_api_key="k",
                 llm_stage_models="reflection=openai/big", llm_fallback_models="openai/spare")
    model = chat_model(s, None, None)
    assert [e.model for e in model.routing.chain("reflection")] == ["openai/big", "openai/spare"]
    assert {e.api_base for e in model.routing.chain("reflection")} == {"http://llm"}


def test_with_the_local_model_it_is_the_default_and_named_stages_go_to_the_provider():
    local = Endpoint("openai/local", "http://127.0.0.1:9", "local-key", "json_object_schema")
    s = Settings(local_model=Path("model.gguf"), llm_api_base="http://llm", llm_stage_models="reflection=openai/big")
    model = chat_model(s, local, None)
    assert model.routing.chain("extraction") == [local]
    assert model.routing.chain("reflection")[0].api_base == "http://llm"


def test_no_model_set_means_no_chat_model():
    assert chat_model(Settings(), None, None) is None


def test_a_spent_budget_and_a_malformed_answer_both_let_a_stage_go_on_without_the_model():
    assert DEGRADING_REASONS == {"LLM_MALFORMED_OUTPUT", "LLM_BUDGET_EXHAUSTED"}


@pytest.mark.parametrize(("budget", "spent", "spent_out"), [
    (0, 10**9, False), (100, 99, False), (100, 100, True), (100, 150, True)])
def test_a_budget_is_spent_once_the_days_tokens_reach_it_and_zero_never_is(budget, spent, spent_out):
    assert exhausted(budget, spent) is spent_out


def test_what_remains_of_a_budget_is_never_negative_and_none_when_unlimited():
    assert (remaining(100, 30), remaining(100, 130), remaining(0, 5)) == (70, 0, None)


def test_a_report_covers_the_last_thirty_days_by_default():
    assert report_days(None, None, date(2026, 3, 31)) == (date(2026, 3, 2), date(2026, 3, 31))


def test_a_report_longer_than_a_year_or_backwards_is_refused():
    with pytest.raises(MemplaneError, match="at most 366"):
        report_days(date(2025, 1, 1), date(2026, 3, 1), date(2026, 3, 1))
    with pytest.raises(MemplaneError, match="after end_day"):
        report_days(date(2026, 3, 2), date(2026, 3, 1), date(2026, 3, 1))


def test_a_day_that_is_not_iso_is_refused_naming_the_field():
    with pytest.raises(MemplaneError, match="end_day must be a day"):
        parse_day("03/01/2026", "end_day")


def test_a_report_ending_in_year_one_starts_there_rather_than_before_the_calendar():
    assert report_days(None, date(1, 1, 5), date(2026, 3, 1)) == (date.min, date(1, 1, 5))


def test_the_stages_settings_route_by_are_the_stages_the_schemas_belong_to():
    assert set(STAGE_OF_SCHEMA.values()) == LLM_STAGES
