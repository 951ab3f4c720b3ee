"""Query rewriting and reranking for Search, through litellm against a local OpenAI-compatible server."""
from __future__ import annotations

import json

import pytest

from memplane_server.core.errors import MemplaneError
from memplane_server.llm.chat import ChatModel
from memplane_server.llm.litellm_import import load_litellm
from memplane_server.llm.query_rewrite import QueryRewriter
from memplane_server.llm.rerank import Reranker
from tests.support.fake_llm import FakeLLM, Reply

pytestmark = pytest.mark.asyncio(loop_scope="session")

CANDIDATES = [
    ("m-a", "The user lives in Lyon"), ("m-b", "The user likes tea"), ("m-c", "The user moved to Lyon in 2021"),
]


@pytest.fixture
def chat(fake_llm):
    return ChatModel("openai/test-model", api_base=fake_llm.api_base, api_key="k", timeout=2)


def prompt(fake_llm: FakeLLM) -> str:
    return fake_llm.requests[0]["body"]["messages"][1]["content"]


async def test_rewrite_returns_the_scripted_alternatives(chat, fake_llm):
    fake_llm.script(Reply(json.dumps({"queries": ["user home city", "where does the user live"]})))
    assert await QueryRewriter(chat).rewrite("user address") == ["user home city", "where does the user live"]


async def test_rewrite_prompt_carries_the_query(chat, fake_llm):
    fake_llm.script(Reply(json.dumps({"queries": []})))
    await QueryRewriter(chat).rewrite("flights to Osaka on 2024-05-03")
    assert "flights to Osaka on 2024-05-03" in prompt(fake_llm)


async def test_rerank_orders_ids_per_the_scripted_ranking(chat, fake_llm):
    fake_llm.script(Reply(json.dumps({"ranking": [3, 1]})))
    assert await Reranker(chat).rerank("where does the user live", CANDIDATES, keep=2) == ["m-c", "m-a"]


async def test_rerank_fills_a_short_ranking_with_the_remaining_candidates(chat, fake_llm):
    fake_llm.script(Reply(json.dumps({"ranking": [2]})))
    assert await Reranker(chat).rerank("tea", CANDIDATES, keep=3) == ["m-b", "m-a", "m-c"]


async def test_rerank_prompt_carries_the_query_and_texts_but_no_ids(chat, fake_llm):
    fake_llm.script(Reply(json.dumps({"ranking": [1]})))
    await Reranker(chat).rerank("where does the user live", CANDIDATES, keep=1)
    sent = prompt(fake_llm)
    assert "where does the user live" in sent and all(text in sent for _, text in CANDIDATES)
    assert not any(memory_id in sent for memory_id, _ in CANDIDATES)


async def test_rerank_shows_only_the_first_thirty_and_the_rest_follow_in_order(chat, fake_llm):
    many = [(f"m-{i}", f"memory number {i}") for i in range(1, 33)]
    fake_llm.script(Reply(json.dumps({"ranking": [30, 31]})))
    ranked = await Reranker(chat).rerank("q", many, keep=32)
    assert ranked == ["m-30", *(f"m-{i}" for i in range(1, 30)), "m-31", "m-32"]
    assert "memory number 30" in prompt(fake_llm) and "memory number 31" not in prompt(fake_llm)


async def test_rerank_asks_nothing_when_there_is_nothing_to_keep(chat, fake_llm):
    assert await Reranker(chat).rerank("q", CANDIDATES, keep=0) == []
    assert await Reranker(chat).rerank("q", [], keep=3) == []
    assert fake_llm.requests == []


async def test_a_malformed_first_answer_is_retried_once(chat, fake_llm):
    fake_llm.script(Reply('{"ranking": "3, 1"}'), Reply(json.dumps({"ranking": [3, 1]})))
    assert await Reranker(chat).rerank("Lyon", CANDIDATES, keep=2) == ["m-c", "m-a"]
    assert len(fake_llm.requests) == 2


async def test_a_provider_error_is_unavailable_without_a_retry(chat, fake_llm):
    fake_llm.script(Reply("provider error", status=500))
    with pytest.raises(MemplaneError) as down:
        await QueryRewriter(chat).rewrite("user address")
    assert down.value.reason == "LLM_UNAVAILABLE" and isinstance(down.value.__cause__, load_litellm().InternalServerError)
    assert len(fake_llm.requests) == 1
