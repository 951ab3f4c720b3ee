"""A search that found nothing is a signal for reflection (listed with its decisions): the memory
lacks what agents ask for. What it keeps of the query is held as a memory's text is: screened by
the tenant's content policy first (a query the policy would refuse is not kept at all; the search
has answered already), then sealed, under the key of the user the search was filtered to when it
names one, so that the user's erasure removes it and shreds every copy in backups."""
from __future__ import annotations

from ...core.access.caller import Caller
from .deps import SearchDeps

# The part of a query a signal keeps: enough to see what was asked, cut after screening so that a
# secret is never cut to a prefix the detectors no longer recognise.
KEPT_QUERY_CHARS = 200


async def keep_nothing_found(deps: SearchDeps, caller: Caller, text: str, user_id: str | None) -> None:
    kept = await deps.content.kept_texts(caller, {"query": text})
    if kept is None:
        return
    await deps.decisions.record(
        caller, subject_type="search", subject_id="", decision="signal",
        reason=f"nothing found for: {kept['query'][:KEPT_QUERY_CHARS]}",
        sealing=await deps.keys.sealing(caller.require_tenant()), user_id=user_id)
