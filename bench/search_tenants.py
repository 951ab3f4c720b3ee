"""search_scale.py's many-tenant mode (--tenants): the tenants, their keys and clients, and the
checks that only matter when one HNSW graph serves them all.

pgvector's HNSW index on `memories` is shared by every tenant; row-level security and the
tenant predicate filter what it yields, so a tenant's top 10 is found only if the graph walk goes
on until enough of its rows come by (`hnsw.iterative_scan`, set by the server's pool) or the
planner picks an exact scan of the tenant's rows instead. Here every floor search's top 10 is
compared with an exact top 10 (as the owner, no vector index), and searches and floors that
return fewer than the tenant holds are counted.
"""
from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass

import asyncpg
import numpy as np

from memplane import AdminClient, MemoryClient, ResourceExhaustedError

ZIPF = 0.8  # tenant k holds a share ~ 1/(k+1)^ZIPF: at 1,000,000 over 1,000, from ~250 to ~60,000
MIN_TENANT = 10


def tenant_sizes(n: int, tenants: int) -> list[int]:
    """Memories per tenant, biggest first, summing to n: a few big tenants and many small ones."""
    weights = [1 / (k + 1) ** ZIPF for k in range(tenants)]
    total = sum(weights)
    sizes = [max(MIN_TENANT, int(n * w / total)) for w in weights]
    sizes[0] += n - sum(sizes)  # rounding goes to the biggest
    if sizes[0] < sizes[1]:
        raise ValueError(f"{n} memories are too few for {tenants} tenants of at least {MIN_TENANT}")
    return sizes


def tenant_name(k: int) -> str:
    return f"t{k:04d}"


@dataclass
class Target:
    tenant: str
    client: MemoryClient | None  # opened only for the tenants searched
    stored: int  # rows written into the tenant
    active: int = 0  # of them active (the rest superseded facts): what a search can return


def create_tenants(address: str, platform_key: str, names: Sequence[str]) -> tuple[dict[str, str], float]:
    """Each tenant with its own admin key, as a platform operator makes them; (keys, seconds)."""
    t0 = time.perf_counter()
    with AdminClient(address, platform_key) as admin:
        keys = {name: _created(admin, name) for name in names}
    return keys, time.perf_counter() - t0


def _created(admin: AdminClient, name: str) -> str:
    """The platform key is rate limited like any other (MEMPLANE_RATE_LIMIT_PER_SECOND): an operator
    creating a thousand tenants waits as the server asks."""
    while True:
        try:
            return admin.create_tenant(name, create_admin_key=True, timeout=60).admin_key.secret
        except ResourceExhaustedError as e:
            time.sleep(e.retry_after or 1.0)


def _owner_fetch(dsn: str, sql: str, *args) -> list:
    async def run() -> list:
        conn = await asyncpg.connect(dsn)
        try:
            return await conn.fetch(sql, *args)
        finally:
            await conn.close()
    return asyncio.run(run())


def active_counts(dsn: str, tenants: Sequence[str]) -> dict[str, int]:
    rows = _owner_fetch(dsn, "SELECT tenant_id, count(*) AS n FROM memories WHERE tenant_id = ANY($1::text[])"
                             " AND status = 'active' GROUP BY tenant_id", list(tenants))
    return {r["tenant_id"]: r["n"] for r in rows}


def owner_stats(dsn: str) -> dict:
    """Memories of every tenant by kind and by status, counted as the owner."""
    rows = _owner_fetch(dsn, "SELECT kind, status, count(*) AS n FROM memories GROUP BY kind, status")
    by_kind: dict[str, int] = {}
    by_status: dict[str, int] = {}
    for r in rows:
        by_kind[r["kind"]] = by_kind.get(r["kind"], 0) + r["n"]
        by_status[r["status"]] = by_status.get(r["status"], 0) + r["n"]
    return {"total": sum(by_kind.values()), "by_kind": by_kind, "by_status": by_status}


PICKS = ("uniform", "size")


def query_targets(targets: list[Target], n: int, seed: int, pick: str = "uniform") -> list[Target]:
    """The tenant each query goes to: uniformly random (mostly the many small tenants), or with
    pick "size" in proportion to the tenant's memories, as a platform's traffic follows its data
    (the biggest tenants then take most queries)."""
    rng = random.Random(seed)
    if pick == "size":
        return rng.choices(targets, weights=[t.stored for t in targets], k=n)
    return [rng.choice(targets) for _ in range(n)]


class ExactTop:
    """The exact top 10 of a tenant's active memories by their own vector, as the owner with index
    scans off (so no HNSW): what the floor's first 10 should be. With ties at the 10th distance
    (the bulk loader reuses vectors past its embed cap, so many rows share one) every tied row
    counts as a right answer: an id-for-id comparison would call the floor wrong for picking
    another of equal rows (at 100,000 in one tenant it reported recall 0.27 for that reason)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, dsn: str):
        self.loop = loop
        self.conn = loop.run_until_complete(asyncpg.connect(dsn))
        loop.run_until_complete(self.conn.set_type_codec(
            "vector", schema="public", format="binary", decoder=bytes,
            encoder=lambda v: np.array([len(v), 0], ">i2").tobytes() + np.asarray(v, ">f4").tobytes()))

    def ids(self, tenant: str, vector: np.ndarray, k: int = 10) -> set:
        """The ids of the k nearest and of every row as near as the k-th."""
        async def run() -> set:
            async with self.conn.transaction():
                await self.conn.execute("SET LOCAL enable_indexscan = off")
                rows = await self.conn.fetch(
                    "WITH top AS (SELECT embedding <=> $2 AS d FROM memories WHERE tenant_id = $1"
                    "  AND status = 'active' AND embedding IS NOT NULL ORDER BY d LIMIT $3)"
                    " SELECT id FROM memories WHERE tenant_id = $1 AND status = 'active' AND embedding IS NOT NULL"
                    " AND embedding <=> $2 <= (SELECT max(d) FROM top) + 1e-6", tenant, vector, k)
            return {r["id"] for r in rows}
        return self.loop.run_until_complete(run())

    def close(self) -> None:
        self.loop.run_until_complete(self.conn.close())


def recall_at_10(found: list, exact: set) -> float:
    """Of the floor's first 10, the share that are among the exact nearest (ties included)."""
    return len(set(found[:10]) & exact) / min(10, len(exact)) if exact else 1.0


def completeness(rows: list[dict]) -> dict:
    """Short results (fewer than the tenant can give) and the floor's recall@10 against exact."""
    recalls = [r["floor_recall"] for r in rows]
    return {
        "search_short": sum(r["hits"] < min(10, r["active"]) for r in rows),
        "floor_short": sum(r["floor_rows"] < min(50, r["active"]) for r in rows),
        "floor_recall_mean": float(np.mean(recalls)), "floor_recall_min": float(min(recalls)),
        "floor_recall_below_1": sum(x < 1 for x in recalls),
    }


SIZE_BANDS = ((0, 1_000), (1_000, 10_000), (10_000, None))


def by_size(rows: list[dict]) -> list[dict]:
    """Search, floor and vector SQL p50 and p95 by the queried tenant's active memories: a uniform
    pick of tenants is mostly small ones, whose vector channel is an exact scan; the big ones differ."""
    out = []
    for lo, hi in SIZE_BANDS:
        band = [r for r in rows if r["active"] >= lo and (hi is None or r["active"] < hi)]
        if band:
            out.append({"from": lo, "below": hi, "n": len(band),
                        **{k: float(np.percentile([r[k] for r in band], 50)) for k in ("search", "floor", "vector_sql")},
                        **{f"{k}_p95": float(np.percentile([r[k] for r in band], 95))
                           for k in ("search", "floor", "vector_sql")}})
    return out


def print_tenancy(t: dict) -> None:
    sizes = t["sizes"]
    print(f"tenants: {len(sizes)}, each with its own admin key (created through AdminService in "
          f"{t['create_s']:.1f} s); memories per tenant: biggest {sizes[0]}, median {sizes[len(sizes) // 2]}, "
          f"smallest {sizes[-1]}; queries went to {t['queried_tenants']} distinct tenants, picked "
          + ("in proportion to their size" if t.get("pick") == "size" else "uniformly"))


def print_by_size(bands: list[dict]) -> None:
    print("  p50 / p95 ms by the queried tenant's active memories:")
    for b in bands:
        label = f"{b['from']:,}+" if b["below"] is None else f"{b['from']:,}-{b['below'] - 1:,}"
        print(f"    {label:>14s}: {b['n']:4d} queries, search {b['search']:7.1f} / {b['search_p95']:7.1f},"
              f" floor {b['floor']:7.1f} / {b['floor_p95']:7.1f},"
              f" vector SQL {b['vector_sql']:7.1f} / {b['vector_sql_p95']:7.1f}")


def print_completeness(c: dict, n: int) -> None:
    print(f"  complete results: Search short of min(10, tenant's active) in {c['search_short']} of {n}; floor short "
          f"of min(50, active) in {c['floor_short']}; floor recall@10 against exact mean {c['floor_recall_mean']:.3f},"
          f" min {c['floor_recall_min']:.2f}, below 1.0 in {c['floor_recall_below_1']}")
