"""Search variants compared on one ingest: LoCoMo dev (and with --madial MADial zh dev) is written
through a real server exactly as quality.py writes it (same items, same wait for turn windows),
then every question is searched in process by each variant, a settings override (lowercase keys,
e.g. {"graph_weight": 0.5}) or a constant of services/search/graph.py or services/search/session.py
(UPPERCASE keys, e.g. {"SEEDS": 5}). Each question is searched by every variant in turn, in rotating order, so a busy
moment of a shared machine falls on all of them and their latencies compare within the run;
recall is as quality.py counts it, per LoCoMo category (5 apart) and for MADial.
With --sessions each LoCoMo session_N is a session of its own (its conversation the user_id, which
the questions are filtered to instead of the session), so a stage choosing sessions has some to
choose, and the server builds session digests.

Run:  .venv/bin/python bench/search_variants.py '{"off": {"graph_weight": 0}, "on": {"graph_weight": 1}}' [--madial] [--sessions]
"""
from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import time
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from foundation import TENANT, running_server  # noqa: E402
from quality import SHARED, locomo_turn_items, madial_memory_items, madial_query, normalise_evidence, write_all  # noqa: E402

from memplane import MemoryClient  # noqa: E402
from memplane_server.core.access.caller import Caller, Role  # noqa: E402
from memplane_server.core.model import MemoryFilter  # noqa: E402
from memplane_server.runtime import Runtime  # noqa: E402
from memplane_server.services.search import graph as graph_channel  # noqa: E402
from memplane_server.services.search import session as session_channel
from memplane_server.services.search.service import SearchQuery, SearchService  # noqa: E402
from memplane_server.settings import Settings  # noqa: E402

DEFAULT_VARIANTS = {"off": {"graph_weight": 0.0}, "on": {"graph_weight": 1.0}}


def _module(constant: str):
    return graph_channel if hasattr(graph_channel, constant) else session_channel


def locomo_items(sessions: bool = False):
    """LoCoMo dev as quality.py writes it (with `sessions`, each session_N a session of its own under
    the conversation as user_id) and its questions (conversation, category, text, gold ids, id key)."""
    samples = json.loads((SHARED / "locomo-dev.json").read_text())
    items, _, turns_of = locomo_turn_items(samples)
    if sessions:
        for item in items:  # "D3:12" is turn 12 of session_3
            cid = item["session_id"]
            item.update(user_id=cid, session_id=f"{cid}/session_{item['metadata']['dia_id'][1:].split(':')[0]}")
    questions = []
    for s in samples:
        for qa in s["qa"]:
            gold, _ = normalise_evidence(qa.get("evidence", []), turns_of[s["sample_id"]])
            if gold:
                questions.append((s["sample_id"], qa["category"], qa["question"], gold, "dia_id"))
    return items, questions


def madial_items():
    items = madial_memory_items(SHARED)
    questions = []
    for ln in (SHARED / "madial-zh-dialogue-dev.jsonl").read_text().splitlines():
        if ln.strip():
            d = json.loads(ln)
            questions.append((f"madial-{d['user-id']}", "madial", madial_query(d["dialogue"][:d["test-turn"][0]]),
                              [str(g) for g in d["relevant-id"]], "madial_id"))
    return items, questions


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))]


async def search_all(settings: Settings, dsn: str, redis_url: str, variants: dict, questions: list,
                     by_user: bool, observe=None, until: float | None = None) -> dict[str, list[dict]]:
    """Every question searched by every variant in turn (rotating order), in process over one Runtime
    opened with `settings`; per variant one row a question: category, recall at 1/5/10, ms, hit ids.
    With `by_user`, LoCoMo questions are filtered by user_id (their conversation) instead of session.
    `observe(name)`, when given, is a context manager around each search (e.g. counting warnings); past
    `until` (time.time()) no further question is begun, and the questions searched so far are the answer."""
    rt = Runtime(settings, dsn, redis_url)
    await rt.open()
    caller = Caller(key_id="bench", role=Role.WRITER, tenant_id=TENANT, agent_id=None, domains={})
    services = {}
    for name, change in variants.items():
        consts = {k: v for k, v in change.items() if k.isupper()}
        services[name] = (SearchService(replace(rt.deps, settings=settings.model_copy(
            update={k: v for k, v in change.items() if not k.isupper()}))), consts)
    rows: dict[str, list[dict]] = {name: [] for name in variants}
    names = list(variants)
    try:
        for qi, (session, cat, text, gold, key) in enumerate(questions):
            if until is not None and time.time() > until:
                print(f"stopped at the time limit after {qi} of {len(questions)} questions", flush=True)
                break
            order = names[qi % len(names):] + names[:qi % len(names)]
            for name in order:
                service, consts = services[name]
                saved = {k: getattr(_module(k), k) for k in consts}
                for k, v in consts.items():
                    setattr(_module(k), k, v)
                f = MemoryFilter(user_id=session) if by_user and key == "dia_id" else MemoryFilter(session_id=session)
                with observe(name) if observe else nullcontext():
                    t0 = time.perf_counter()
                    hits = await service.search(caller, SearchQuery(text, filter=f, top_k=10))
                    ms = (time.perf_counter() - t0) * 1000
                for k, v in saved.items():
                    setattr(_module(k), k, v)
                ids = [str(h.memory.metadata.get(key)) for h in hits]
                rows[name].append({"question": text, "category": cat, "gold": gold, "ids": ids, "ms": round(ms, 1),
                                   "recall": {k: len(set(gold) & set(ids[:k])) / len(gold) for k in (1, 5, 10)}})
    finally:
        await rt.close()
    return rows


def print_rows(variants: dict, rows: dict[str, list[dict]]) -> None:
    for name, change in variants.items():
        times = [r["ms"] for r in rows[name]]
        print(f"== {name} {change}: search p50 {statistics.median(times):.0f} ms, p95 {pct(times, 95):.0f} ms")
        cats = sorted({r["category"] for r in rows[name]}, key=str)
        for cat in cats + ["overall 1-4"]:
            sel = [r["recall"] for r in rows[name]
                   if r["category"] == cat or (cat == "overall 1-4" and r["category"] in (1, 2, 3, 4))]
            if sel:
                print(f"   {str(cat):12s} n={len(sel):3d} " + " ".join(f"R@{k} {statistics.fmean(r[k] for r in sel):.3f}" for k in (1, 5, 10)))
    sys.stdout.flush()


def main():
    variants = json.loads(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_VARIANTS
    sessions = "--sessions" in sys.argv
    if sessions:  # the server builds the digests the session channel reads (off by default)
        os.environ.setdefault("MEMPLANE_SESSION_DIGESTS", "true")
    started = time.perf_counter()
    with running_server("memplane-graphvar-") as server, MemoryClient(server.address, server.key) as client:
        items, questions = locomo_items(sessions)
        w, win = write_all(client, items, server.dsn)
        print(f"locomo written {w:.0f} s, windows and terms {win:.0f} s", flush=True)
        if "--madial" in sys.argv:
            mitems, mq = madial_items()
            w, win = write_all(client, mitems, server.dsn)
            print(f"madial written {w:.0f} s, windows and terms {win:.0f} s", flush=True)
            questions += mq
        settings = Settings(database_url=server.dsn, redis_url=server.redis_url, bootstrap_tenant="", workers=0)
        rows = asyncio.run(search_all(settings, server.dsn, server.redis_url, variants, questions, sessions))
        print_rows(variants, rows)
    print(f"total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
