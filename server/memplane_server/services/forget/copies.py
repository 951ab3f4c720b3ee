"""The copies of forgotten memories outside PostgreSQL: working memory and cached responses (Redis).

PostgreSQL forgets what was derived and empties turn windows in the forget's own transaction
(stores/postgres/memories.py, migration 0010); right after it commits, the forget drops these.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ...core.access.caller import Caller
from ...core.model import Trace
from ...stores.redis.working import WorkingSession
from .deps import ForgetDeps

# A working item holding a longer text that contains a forgotten memory's text goes too; below this
# many characters only the same text counts (a short word is in too many unrelated items).
CONTAINED_MIN_CHARS = 20


@dataclass
class CopiesDropped:
    working_items: int = 0
    working_state_keys: int = 0
    working_sessions: int = 0
    idempotency_entries: int = 0
    working_item_ids: set[str] = field(default_factory=set)


def _same_text(a: str, b: str) -> bool:
    return " ".join(a.split()).casefold() == " ".join(b.split()).casefold()


def _holds(item: dict[str, Any], traces: list[Trace]) -> bool:
    content = item.get("content") or ""
    for t in traces:
        if item.get("source_id") == str(t.id) or _same_text(content, t.content):
            return True
        if len(t.content) >= CONTAINED_MIN_CHARS and t.content in content:
            return True
    return False


async def drop_working(
    deps: ForgetDeps, tenant_id: str, session_ids: set[str] | None, doomed: Callable[[dict[str, Any]], bool],
    done: CopiesDropped, *, agent_ids: Iterable[str | None] | None = None, dry_run: bool = False,
) -> None:
    """Drops matching items from the tenant's working sessions (these session ids, these agents' only
    when given), counting into done."""
    allowed = set(agent_ids) if agent_ids is not None else None
    if session_ids is not None and allowed is not None:
        # Known sessions of known agents: their keys, no scan.
        sessions = [WorkingSession(tenant_id, agent, s) for agent in allowed for s in sorted(session_ids)]
    else:
        sessions = [s for s in await deps.working.sessions_of(tenant_id, session_ids)
                    if allowed is None or s.agent_id in allowed]
    for dropped in await deps.working.drop(sessions, doomed, dry_run=dry_run):
        done.working_items += dropped.items
        done.working_state_keys += dropped.state_keys
        done.working_sessions += int(dropped.session_deleted)
        done.working_item_ids.update(dropped.ids)


async def drop_copies(deps: ForgetDeps, caller: Caller, traces: list[Trace]) -> CopiesDropped:
    """Working items of the caller's own sessions named by the forgotten memories holding their text
    (or naming them as their source), and the cached responses naming them in every tenant.

    Working memory is per agent and no other caller may change it: another agent's items that
    happen to hold the same text are its own copies, not derived from the memory, and stay."""
    done = CopiesDropped()
    mine = [t for t in traces if t.tenant_id == caller.tenant_id]
    sessions = {t.session_id for t in mine if t.session_id}
    if sessions:
        await drop_working(deps, caller.tenant_id or "", sessions, lambda item: _holds(item, mine), done,
                           agent_ids=[caller.agent_id])
    if deps.idempotency is not None:
        done.idempotency_entries += await deps.idempotency.purge({str(t.id) for t in traces} | done.working_item_ids)
    return done
