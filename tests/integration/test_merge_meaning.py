"""The merge rule through the real write path (embedding, nearest neighbours, the transaction):
hundreds of generated pairs that differ in one meaning-bearing word are both kept, though most
embed above the near-duplicate threshold, and true repeats are merged into the memory they repeat."""
from __future__ import annotations

import numpy as np
import pytest
import pytest_asyncio

from memplane_server.core.model import Kind, MemoryDraft
from memplane_server.core.write.observations import statement_key
from memplane_server.core.write.outcomes import Outcome
from memplane_server.services.write.service import WriteService
from tests.support.meaning_pairs import changed_pairs, repeats

pytestmark = pytest.mark.asyncio(loop_scope="session")

BATCH = 128


def fact(content: str) -> MemoryDraft:
    return MemoryDraft(scope=None, domain=None, agent_id=None, layer=None, kind=Kind.FACT, content=content)


def unique(texts: list[str], seen: set[str]) -> list[str]:
    out = []
    for t in texts:
        if statement_key(t) not in seen:
            seen.add(statement_key(t))
            out.append(t)
    return out


async def write_all(write: WriteService, caller, texts: list[str]) -> list:
    written = []
    for i in range(0, len(texts), BATCH):
        written += await write.write_items(caller, [fact(t) for t in texts[i:i + BATCH]])
    return written


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def stored(deps, make_tenant):
    """Every pair's first side written, then its second: (world, first texts' records, second's)."""
    world = await make_tenant()
    write = WriteService(deps)
    pairs = changed_pairs()
    seen: set[str] = set()
    first = unique([a for a, _ in pairs], seen)
    second = unique([b for _, b in pairs], seen)
    return world, pairs, await write_all(write, world.writer, first), await write_all(write, world.writer, second)


async def test_no_write_that_changes_one_word_is_merged(stored):
    _, pairs, first, second = stored
    assert len(pairs) >= 500
    merged = [(r.content, o.reason) for r, o in first + second if o.outcome is not Outcome.CREATED]
    assert merged == []


async def test_most_changed_pairs_embed_as_near_duplicates(deps, stored):
    """Else the test above would show nothing: the merge candidates must include the pair's twin."""
    world, pairs, first, second = stored
    ids = {statement_key(r.content): r.id for r, _ in first + second}
    rows = await deps.tenancy.pool.fetch("SELECT id, embedding::real[] AS embedding FROM memories WHERE tenant_id = $1", world.tenant_id)
    vectors = {row["id"]: np.asarray(row["embedding"]) for row in rows}
    close = sum(float(vectors[ids[statement_key(a)]] @ vectors[ids[statement_key(b)]]) >= deps.settings.dedup_threshold
                for a, b in pairs)
    assert close >= len(pairs) // 2


async def test_true_repeats_merge_into_the_memory_they_repeat(deps, make_tenant):
    """Each original stored beside its changed twin, as a memory would be; then its repeat is written."""
    world = await make_tenant()
    write = WriteService(deps)
    pairs = changed_pairs()[::10]
    originals = [r for r, _ in await write_all(write, world.writer, [a for a, _ in pairs] + [b for _, b in pairs])]
    ids = {r.content: r.id for r in originals}
    sample = repeats([a for a, _ in pairs])
    written = await write_all(write, world.writer, [again for _, again, _ in sample])
    missed = [(t, again, how, o.outcome) for (t, again, how), (_, o) in zip(sample, written)
              if o.outcome is not Outcome.MERGED or o.related_id != str(ids[t])]
    assert missed == [], "\n".join(map(str, missed))
