"""Does a tenant learn anything by probing another tenant's memory ids? Status, reason and
message are checked by the e2e tests; this prints the timing side, measured over the wire.

Tenant A stores memories; tenant B asks for A's ids, for ids that exist nowhere, and for its
own ids, interleaved so that machine noise falls on all three alike. Foreign and unknown ids
should take the same time (one indexed lookup that finds no visible row).

    .venv/bin/python bench/probe_timing.py [--probes 300]
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
import uuid

from foundation import pct, running_server

from memplane import AdminClient, MemoryClient
from memplane.errors import NotFoundError


def timed_get(client: MemoryClient, memory_id: str) -> float:
    start = time.perf_counter()
    try:
        client.get_memory(memory_id)
    except NotFoundError:
        pass
    return (time.perf_counter() - start) * 1000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--probes", type=int, default=300)
    args = ap.parse_args()
    with running_server("memplane-probe-") as server:
        with AdminClient(server.address, server.platform_key) as admin:
            key_b = admin.create_tenant("prober", create_admin_key=True).admin_key.secret
        with MemoryClient(server.address, server.key) as a, MemoryClient(server.address, key_b) as b:
            foreign = [m.id for m in a.write([{"content": f"A's memory {i}", "kind": "fact"}
                                              for i in range(64)]).memories]
            own = [m.id for m in b.write([{"content": f"B's memory {i}", "kind": "fact"}
                                          for i in range(64)]).memories]
            for memory_id in foreign[:5] + own[:5]:
                timed_get(b, memory_id)  # warm-up
            kinds = {"foreign id": [], "unknown id": [], "own id": []}
            rng = random.Random(7)
            for _ in range(args.probes):
                probes = [("foreign id", rng.choice(foreign)), ("unknown id", str(uuid.uuid4())),
                          ("own id", rng.choice(own))]
                rng.shuffle(probes)
                for kind, memory_id in probes:
                    kinds[kind].append(timed_get(b, memory_id))
    print(f"GetMemory by tenant B, {args.probes} probes each, ms")
    print(f"  {'':12} {'p50':>7} {'p95':>7} {'mean':>7}")
    for kind, values in kinds.items():
        print(f"  {kind:12} {pct(values, 50):7.2f} {pct(values, 95):7.2f} {statistics.mean(values):7.2f}")
    ratio = pct(kinds["foreign id"], 50) / pct(kinds["unknown id"], 50)
    print(f"  p50 foreign/unknown: {ratio:.2f} (same timing class when close to 1)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
