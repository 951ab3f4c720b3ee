"""Which change-log entries a watcher might see: never "no" for one it would stream."""
from __future__ import annotations

import pytest

from memplane_server.core.access.caller import Caller, Role
from memplane_server.core.changes import ChangeFilter, ChangeKind, LogEntry, might_see
from memplane_server.core.model import Kind, Scope

A1 = Caller("k", Role.AGENT, "t1", "a1", {"d1": False})


def entry(**kw) -> LogEntry:
    base = dict(position=1, tenant_id="t1", change=ChangeKind.CREATED, scope=Scope.GLOBAL, domain=None,
                agent_id=None, kind=Kind.FACT, session_id="s1", entity="e1")
    return LogEntry(**{**base, **kw})


@pytest.mark.parametrize("e, seen", [
    (entry(), True),
    (entry(tenant_id="t2"), False),
    (entry(scope=Scope.DOMAIN, domain="d1", tenant_id="t2"), True),
    (entry(scope=Scope.DOMAIN, domain="d2"), False),
    (entry(scope=Scope.PRIVATE, agent_id="a1"), True),
    (entry(scope=Scope.PRIVATE, agent_id="a2"), False),
    (entry(scope=Scope.PRIVATE, agent_id="a1", tenant_id="t2"), False),
])
def test_visibility_is_that_of_reads(e, seen):
    assert might_see(A1, ChangeFilter(), e) is seen


@pytest.mark.parametrize("f, seen", [
    (ChangeFilter(scopes=(Scope.GLOBAL,)), True),
    (ChangeFilter(scopes=(Scope.PRIVATE,)), False),
    (ChangeFilter(kinds=(Kind.LESSON,)), False),
    (ChangeFilter(change_kinds=(ChangeKind.ERASED,)), False),
    (ChangeFilter(session_id="s1"), True),
    (ChangeFilter(session_id="s2"), False),
    (ChangeFilter(entity="e2"), False),
])
def test_filters_narrow_it(f, seen):
    assert might_see(A1, f, entry()) is seen


def test_a_session_or_entity_the_entry_lacks_is_a_maybe():
    lacking = entry(session_id=None, entity=None)
    assert might_see(A1, ChangeFilter(session_id="s9", entity="e9"), lacking)
