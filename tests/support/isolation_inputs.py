"""What the isolation property test draws. Values that name something of the world are drawn
as the small types below and resolved against the world and the caller when a step runs, so a
drawn step means the same in every world: a `Who` becomes a Caller, a `Pick` a Target, an
`OperationPick` an OperationTarget, a `FilterSpec` a MemoryFilter and a `DraftSpec` a MemoryDraft.
"""
from __future__ import annotations

from typing import NamedTuple

from hypothesis import strategies as st

from memplane_server.core.model import Kind, Layer, Scope, Status

from .isolation_world import AGENTS, CALLER_LABELS, ENTITIES, SESSIONS, TAGS, TEXTS, USERS


class Who(NamedTuple):
    """A caller: a label of DIRECT, KEYED or the revoked key, of the tenant-th tenant. Either may
    be left open (None), to be taken from the Who drawn before it in the same step."""

    tenant: int | None
    label: str | None

    def after(self, previous: Who | None) -> Who:
        return Who(previous.tenant if self.tenant is None else self.tenant,
                   previous.label if self.label is None else self.label)


class Pick(NamedTuple):
    """A memory id from a pool of `Oracle.target`."""

    pool: str
    index: int


class OperationPick(NamedTuple):
    """An operation id from a pool of `Oracle.operation_target`."""

    pool: str
    index: int


class FilterSpec(dict):
    """The fields of a MemoryFilter, domains as indexes of the world's."""


class DraftSpec(dict):
    """The fields of a MemoryDraft, its domain as an index of the world's."""


callers = st.builds(Who, tenant=st.integers(0, 3), label=st.sampled_from(CALLER_LABELS))
# Who sends a request id again: the same caller, another caller of its tenant, or anyone (two
# independent draws would seldom be the same caller, or even of the same tenant).
resenders = st.one_of(
    st.just(Who(None, None)), st.builds(Who, tenant=st.none(), label=st.sampled_from(CALLER_LABELS)), callers
)
# Mostly ids the caller can see, often ones it cannot, sometimes unknown or malformed ones.
pools = st.sampled_from(["visible", "visible", "visible", "invisible", "invisible", "any", "unknown", "malformed"])
targets = st.builds(Pick, pool=pools, index=st.integers(0, 10_000))
operation_targets = st.builds(OperationPick, pool=pools, index=st.integers(0, 10_000))

FILTER_FIELDS = {
    "scopes": st.lists(st.sampled_from([s.value for s in Scope]), min_size=1, max_size=2, unique=True),
    "layers": st.lists(st.sampled_from([x.value for x in Layer]), min_size=1, max_size=2, unique=True),
    "kinds": st.lists(st.sampled_from([k.value for k in Kind]), min_size=1, max_size=3, unique=True),
    "domains": st.lists(st.integers(0, 2), min_size=1, max_size=2, unique=True),
    "agent_id": st.sampled_from(AGENTS),
    "user_id": st.sampled_from(USERS),
    "session_id": st.sampled_from(SESSIONS),
    "entity": st.sampled_from(ENTITIES),
    "tags": st.lists(st.sampled_from(TAGS), min_size=1, max_size=2, unique=True),
    "min_confidence": st.sampled_from([0.75, 0.95]),
    "include_pending": st.booleans(),
    "statuses": st.lists(st.sampled_from([s.value for s in Status]), min_size=1, max_size=2, unique=True),
}
# No filter, one condition, or any combination (which mostly selects nothing).
filter_fields = st.one_of(
    st.just({}),
    st.one_of([st.fixed_dictionaries({name: values}) for name, values in FILTER_FIELDS.items()]),
    st.fixed_dictionaries({}, optional=FILTER_FIELDS),
)
filters = filter_fields.map(FilterSpec)
# Search: any filter, often narrowed to a session.
search_filters = st.tuples(filter_fields, st.sampled_from([None, *SESSIONS])).map(
    lambda drawn: FilterSpec({**drawn[0], "session_id": drawn[1]} if drawn[1] else drawn[0])
)
# Mostly one shared condition (so forgets do reach rows), sometimes several, sometimes none.
forget_filters = st.one_of(
    st.just({}),
    st.fixed_dictionaries({"user_id": st.sampled_from(USERS)}),
    st.fixed_dictionaries({"session_id": st.sampled_from(SESSIONS)}),
    st.fixed_dictionaries({"entity": st.sampled_from(ENTITIES)}),
    st.fixed_dictionaries(
        {"kinds": st.lists(st.sampled_from([k.value for k in Kind]), min_size=1, max_size=3, unique=True)}
    ),
    st.fixed_dictionaries(
        {},
        optional={
            "user_id": st.sampled_from(USERS),
            "session_id": st.sampled_from(SESSIONS),
            "entity": st.sampled_from(ENTITIES),
            "scopes": st.lists(st.sampled_from([s.value for s in Scope]), min_size=1, max_size=1),
            "statuses": st.lists(st.sampled_from([s.value for s in Status]), min_size=1, max_size=2, unique=True),
        },
    ),
).map(FilterSpec)

DRAFT_FIELDS = {
    # None: the caller's default scope; "working": the working layer, in the caller's default scope.
    "scope": st.sampled_from([None, "global", "domain", "private", "working"]),
    "domain": st.integers(0, 2),
    "kind": st.sampled_from([k.value for k in Kind]),
    "text": st.integers(0, len(TEXTS) - 1),
    "session": st.sampled_from([None, *SESSIONS]),
    "user": st.sampled_from([None, *USERS]),
    "entity": st.sampled_from([None, *ENTITIES]),
    "confidence": st.sampled_from([1.0, 0.9, 0.5]),
    "tags": st.lists(st.sampled_from(TAGS), max_size=2, unique=True),
}
draft_fields = st.fixed_dictionaries(DRAFT_FIELDS)
drafts = draft_fields.map(DraftSpec)
# A write's request id is recorded with its persistent memories only (a retry writes its working
# items again, and a replay answers without them), so replays draw none.
persistent_drafts = st.fixed_dictionaries(
    {**DRAFT_FIELDS, "scope": st.sampled_from([None, "global", "domain", "private"])}
).map(DraftSpec)
# Seeds (tenant index, author label, draft fields) lean to domain scope, so members of a domain
# see memories of other tenants; `World.batches` gives each an author allowed to write it.
seeds = st.tuples(
    st.integers(0, 3),
    st.sampled_from(["writer", "agent-a1", "agent-a2"]),
    draft_fields | st.builds(lambda d: {**d, "scope": "domain"}, draft_fields),
)
# Changes as UpdateMemory takes them: none or a superseded status or a confidence of 1.5 are invalid.
changes = st.fixed_dictionaries(
    {},
    optional={
        "content": st.sampled_from(TEXTS),
        "tags": st.lists(st.sampled_from(TAGS), max_size=2, unique=True),
        "confidence": st.sampled_from([0.2, 0.8, 1.0, 1.5]),
        "status": st.sampled_from(["active", "pending", "deleted", "superseded"]).map(Status),
    },
)
grants = st.sampled_from(["none", "read", "rw"])
