"""The planted corpus (tests/data/content_corpus.jsonl: secrets and personal data in English and
Chinese, and look-alikes) written through every write path against real PostgreSQL and Redis:
redacted, nothing planted is found in any table, any Redis key or the server's log; refused, each
positive fails naming its detector and nothing is stored; tagged, a memory of each detector
and language carries its detector's tag; the look-alikes pass untouched (at most 2% flagged)."""
from __future__ import annotations

import json
import logging
import uuid
from pathlib import Path

import pytest

from memplane_server.core.access.caller import Caller, Role
from memplane_server.core.content.detectors import DETECTORS
from memplane_server.core.errors import MemplaneError
from memplane_server.core.model import Kind, Layer, MemoryDraft, Scope
from memplane_server.services.content.admin import ContentPolicyService
from memplane_server.services.memories import MemoriesService
from memplane_server.services.write.service import WriteService
from tests.support.clear_text import database_text, redis_text

pytestmark = pytest.mark.asyncio(loop_scope="session")

CORPUS = [json.loads(line) for line in
          (Path(__file__).parents[1] / "data" / "content_corpus.jsonl").read_text(encoding="utf-8").splitlines()]
POSITIVES = [r for r in CORPUS if r["detector"]]
NEGATIVES = [r for r in CORPUS if not r["detector"]]
BATCH = 50


def admin_of(tenant: str) -> Caller:
    return Caller(key_id=f"{tenant}-admin", role=Role.TENANT_ADMIN, tenant_id=tenant, agent_id=None)


def draft(text: str, **fields) -> MemoryDraft:
    return MemoryDraft(scope=fields.pop("scope", Scope.GLOBAL), domain=None, agent_id=None,
                       layer=fields.pop("layer", None), kind=fields.pop("kind", Kind.FACT), content=text, **fields)


def one_per_detector_and_language() -> list[dict]:
    chosen: dict[tuple[str, str], dict] = {}
    for row in POSITIVES:
        chosen.setdefault((row["detector"], row["lang"]), row)
    return list(chosen.values())


async def write_all(deps, caller: Caller, drafts: list[MemoryDraft]) -> list:
    written = []
    for i in range(0, len(drafts), BATCH):
        written += await WriteService(deps).write(caller, drafts[i:i + BATCH])
    return written


async def test_redacted_through_every_path_nothing_planted_is_stored_or_logged(deps, make_tenant, caplog):
    caplog.set_level(logging.DEBUG)
    world = await make_tenant()
    await ContentPolicyService(deps).set(admin_of(world.tenant_id), "", "", {"secret": "redact", "personal": "redact"})
    session = f"s-{uuid.uuid4().hex[:8]}"

    # Write: content and metadata together; working memory: content; UpdateMemory: context and value.
    await write_all(deps, world.writer, [draft(r["text"], metadata={"pasted": r["text"]}) for r in POSITIVES])
    await write_all(deps, world.agent1, [draft(r["text"], scope=Scope.PRIVATE, layer=Layer.WORKING, kind=Kind.TURN,
                                               session_id=session) for r in POSITIVES])
    [target] = await WriteService(deps).write(world.writer, [draft("a memory to change")])
    for row in one_per_detector_and_language():
        await MemoriesService(deps).update(world.writer, str(target.id), {"context": row["text"], "value": row["text"]})

    stored = await database_text(deps.memories.pool) + await redis_text(deps.working.client) + caplog.text
    leaked = [r["detector"] for r in POSITIVES if r["secret"] in stored]
    assert leaked == []


async def test_refused_each_positive_fails_naming_its_detector_and_nothing_is_stored(deps, make_tenant):
    world = await make_tenant()
    await ContentPolicyService(deps).set(admin_of(world.tenant_id), "", "", {"secret": "refuse", "personal": "refuse"})

    named = []
    for row in POSITIVES:
        with pytest.raises(MemplaneError) as caught:
            await WriteService(deps).write(world.writer, [draft(row["text"])])
        assert caught.value.reason == "CONTENT_POLICY" and row["secret"] not in caught.value.message
        named.append(caught.value.metadata["detector"])

    assert all(DETECTORS[got] == DETECTORS[row["detector"]] for got, row in zip(named, POSITIVES))
    assert await deps.memories.pool.fetchval("SELECT count(*) FROM memories WHERE tenant_id = $1", world.tenant_id) == 0


async def test_tagged_each_positive_is_stored_with_its_detectors_tag(deps, make_tenant):
    world = await make_tenant()
    await ContentPolicyService(deps).set(admin_of(world.tenant_id), "", "", {"secret": "tag", "personal": "tag"})

    # Which texts are found is the refusal test's; this one shows what tagging stores.
    rows = one_per_detector_and_language()
    written = await write_all(deps, world.writer, [draft(r["text"]) for r in rows])

    untagged = [r["detector"] for r, m in zip(rows, written)
                if not any(t.startswith("content:") and DETECTORS[t[len("content:"):]] == DETECTORS[r["detector"]]
                           for t in m.tags)]
    assert untagged == [] and [m.content for m in written] == [r["text"] for r in rows]


async def test_look_alikes_pass_a_refusing_policy(deps, make_tenant):
    world = await make_tenant()
    await ContentPolicyService(deps).set(admin_of(world.tenant_id), "", "", {"secret": "refuse", "personal": "refuse"})

    writes, refused = WriteService(deps), 0
    for row in NEGATIVES:  # screened as Write screens them; storing them would only add the embedding
        try:
            await deps.content.screen(world.writer, writes.prepare_all(world.writer, [draft(row["text"])]))
        except MemplaneError:
            refused += 1

    assert refused <= 0.02 * len(NEGATIVES)
