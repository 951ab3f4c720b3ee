"""Foresee: before a task, the lessons, procedures and preferences that apply (core/reflection/foresight.py),
found by Search restricted to those kinds."""
from __future__ import annotations

from dataclasses import replace

from ...core.access.caller import Caller
from ...core.errors import invalid
from ...core.model import MemoryFilter
from ...core.reflection.foresight import ADVICE_KINDS, Advice, advice_for, plan_text
from ...core.validation import MAX_FILTER_VALUES, check_free_id
from ..search.service import SearchQuery, SearchService

DEFAULT_TOP_K, MAX_TOP_K = 10, 100


class ForesightService:
    def __init__(self, searches: SearchService) -> None:
        self.searches = searches

    async def foresee(
        self, caller: Caller, task: str, *, entities: list[str], tools: list[str], top_k: int, f: MemoryFilter,
    ) -> list[Advice]:
        if not task or not task.strip():
            raise invalid("TASK_REQUIRED", "task must describe what the agent is about to do")
        if top_k < 0:
            raise invalid("INVALID_LIMIT", "top_k must not be negative")
        if len(entities) > MAX_FILTER_VALUES or len(tools) > MAX_FILTER_VALUES:
            raise invalid("TOO_MANY_VALUES", f"at most {MAX_FILTER_VALUES} entities and tools each")
        for name in (*entities, *tools):
            check_free_id(name, "entity_or_tool")
        want = min(top_k or DEFAULT_TOP_K, MAX_TOP_K)
        kinds = tuple(k for k in ADVICE_KINDS if not f.kinds or k in f.kinds)
        if not kinds:
            return []
        # Twice as many candidates as asked for: the ones without evidence are left out.
        hits = await self.searches.search(caller, SearchQuery(
            plan_text(task, entities, tools), filter=replace(f, kinds=kinds), top_k=2 * want, explain=True))
        return advice_for(hits, entities, tools)[:want]
