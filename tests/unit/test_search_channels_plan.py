"""Which channels a search plans, told from the query's parts (no store is called)."""
from __future__ import annotations

from datetime import datetime, timezone

import numpy as np

from memplane_server.core.access.caller import Caller, Role
from memplane_server.core.model import Kind, Layer, MemoryFilter
from memplane_server.core.retrieval.intent import Intent
from memplane_server.core.retrieval.time_expressions import TimeRange
from memplane_server.services.search.channels import QueryParts, plan_channels, within
from memplane_server.settings import Settings

CALLER = Caller(key_id="k", role=Role.WRITER, tenant_id="t", agent_id=None, domains={})
MAY = TimeRange(datetime(2023, 5, 1, tzinfo=timezone.utc), datetime(2023, 6, 1, tzinfo=timezone.utc), "in May 2023")


def parts(terms=("deploy",), names=("deploy",), span=None) -> QueryParts:
    return QueryParts(np.zeros(384, dtype=np.float32), list(terms), list(names), Intent.NONE, span)


def plan(p: QueryParts, f: MemoryFilter = MemoryFilter(), **settings) -> set[str]:
    return set(plan_channels(None, Settings(**settings), CALLER, f, p, limit=10, as_of=None))


def test_a_plain_query_runs_vector_keyword_their_window_twins_and_exact():
    assert plan(parts()) == {"vector", "keyword", "vector_context", "keyword_context", "exact", "preferences"}


def test_window_channels_are_off_with_a_zero_window():
    assert plan(parts(), context_window=0) == {"vector", "keyword", "exact", "preferences"}


def test_a_query_of_stopwords_only_runs_no_keyword_or_exact_channel():
    assert plan(parts(terms=(), names=())) == {"vector", "vector_context", "preferences"}


def test_a_named_time_adds_the_time_channel():
    assert "time" in plan(parts(span=MAY))


def test_a_working_only_filter_plans_no_persistent_channel():
    assert plan(parts(), MemoryFilter(layers=(Layer.WORKING,))) == set()


def test_within_narrows_the_filter_to_the_span():
    narrowed = within(MemoryFilter(occurred_after=datetime(2023, 5, 10, tzinfo=timezone.utc)), MAY)
    assert (narrowed.occurred_after, narrowed.occurred_before) == (datetime(2023, 5, 10, tzinfo=timezone.utc), MAY.end)


def test_within_gives_nothing_when_filter_and_span_do_not_meet():
    assert within(MemoryFilter(occurred_before=datetime(2023, 1, 1, tzinfo=timezone.utc)), MAY) is None


def test_a_filter_on_other_kinds_fetches_no_preferences():
    assert "preferences" not in plan(parts(), MemoryFilter(kinds=(Kind.FACT,)))


def test_a_filter_without_turns_runs_no_window_channel():
    """Only turns have windows: a search of facts, or of the semantic layer, would find none there."""
    assert not {"vector_context", "keyword_context"} & plan(parts(), MemoryFilter(kinds=(Kind.FACT, Kind.EVENT)))
    assert not {"vector_context", "keyword_context"} & plan(parts(), MemoryFilter(layers=(Layer.SEMANTIC,)))
    assert {"vector_context", "keyword_context"} <= plan(parts(), MemoryFilter(kinds=(Kind.TURN,)))

