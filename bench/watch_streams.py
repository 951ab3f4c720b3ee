"""Watch streams benchmark: does one key's pile of open Watch streams slow another
tenant's writes, and does the cap hold?

One run starts embedded PostgreSQL and Redis and a real `memplane serve` (foundation.py) with the
default stream caps (MEMPLANE_WATCH_MAX_STREAMS_PER_KEY 100, ..._PER_TENANT 500), then:

1. another tenant's key writes one memory at a time: Write p50/p95 with no stream open;
2. the bench tenant's admin key asks for --streams Watch streams on one channel: how many opened
   and how many were refused (RESOURCE_EXHAUSTED and its reason);
3. with the allowed streams open (each reading what it is sent), the same writes again: p50/p95,
   and the ratio of the p50s (target: within 1.2x), and what the watchers received (nothing: the
   writes are another tenant's).
Both write rounds run in one process against the same server, alternating blocks of writes, so
the machine's noise falls on both alike.

Run:  .venv/bin/python bench/watch_streams.py [--streams 1000] [--writes 200] [--json out.json]
"""
from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "passive")

import argparse
import asyncio
import json
import sys
import threading
import time
from pathlib import Path

import grpc
from foundation import environment, pct, running_server

from memplane import AdminClient, MemoryClient
from memplane.errors import from_rpc_error
from memplane.v1 import memory_service_pb2 as svc_pb
from memplane.v1 import memory_service_pb2_grpc as svc_grpc


class Streams:
    """Opens Watch streams in a thread's own event loop and keeps them reading until closed."""

    def __init__(self, address: str, key: str, wanted: int) -> None:
        self.address, self.key, self.wanted = address, key, wanted
        self.opened = 0
        self.refused: dict[str, int] = {}
        self.events = 0
        self.ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)

    def start(self) -> "Streams":
        self.thread.start()
        self.ready.wait(300)
        return self

    def close(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self.thread.join(60)

    async def _main(self) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        metadata = (("authorization", f"Bearer {self.key}"),)
        async with grpc.aio.insecure_channel(self.address) as channel:
            stub = svc_grpc.MemoryServiceStub(channel)
            calls = []
            for _ in range(self.wanted):
                call = stub.Watch(svc_pb.WatchRequest(), metadata=metadata)
                try:
                    await call.read()  # the first response: the stream is open
                except grpc.aio.AioRpcError as err:
                    reason = f"{err.code().name} {from_rpc_error(err).reason}"
                    self.refused[reason] = self.refused.get(reason, 0) + 1
                    continue
                self.opened += 1
                calls.append(call)
            readers = [asyncio.ensure_future(self._read(c)) for c in calls]
            self.ready.set()
            await self._stop.wait()
            for call in calls:
                call.cancel()
            await asyncio.gather(*readers, return_exceptions=True)

    async def _read(self, call) -> None:
        async for response in call:
            self.events += len(response.events)


def timed_writes(client: MemoryClient, n: int, label: str) -> list[float]:
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        client.write_one(f"{label} note {i}: the invoice batch {i % 17} closed", kind="event")
        out.append((time.perf_counter() - t0) * 1000)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--streams", type=int, default=1000, help="Watch streams one key asks for")
    ap.add_argument("--writes", type=int, default=200, help="writes timed with and without the streams open")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    env, started = environment(), time.perf_counter()
    os.environ.update({"MEMPLANE_RATE_LIMIT_PER_SECOND": "1000000", "MEMPLANE_RATE_LIMIT_BURST": "1000000"})
    print(f"environment: {env['cpu_count']} cores, load at start "
          f"{', '.join(f'{x:.2f}' for x in env['loadavg_at_start'])}", flush=True)
    with running_server("memplane-bench-watch-") as server:
        with AdminClient(server.address, server.platform_key) as admin:
            other_key = admin.create_tenant("other", create_admin_key=True).admin_key.secret
        with MemoryClient(server.address, other_key) as writer:
            timed_writes(writer, 10, "warm-up")
            blocks = max(1, args.writes // 50)
            per_block = args.writes // blocks
            none_open, with_open = [], []
            streams = None
            opened = refused = events = 0
            for block in range(blocks):
                none_open += timed_writes(writer, per_block, f"none-{block}")
                streams = Streams(server.address, server.key, args.streams).start()
                opened, refused = streams.opened, dict(streams.refused)
                time.sleep(1.0)  # every stream settled (its first re-check passed)
                with_open += timed_writes(writer, per_block, f"open-{block}")
                time.sleep(1.0)
                events = streams.events
                streams.close()
    p50_none, p50_open = pct(none_open, 50), pct(with_open, 50)
    result = {
        "environment": env, "streams_asked": args.streams, "streams_opened": opened, "refused": refused,
        "events_received_by_watchers": events, "writes_per_round": len(none_open),
        "write_ms_none_open": {"p50": p50_none, "p95": pct(none_open, 95)},
        "write_ms_streams_open": {"p50": p50_open, "p95": pct(with_open, 95)},
        "p50_ratio": p50_open / p50_none, "total_s": time.perf_counter() - started,
    }
    print(f"Watch streams asked by one key: {args.streams}; opened {opened}; refused "
          + (", ".join(f"{n} {reason}" for reason, n in refused.items()) or "none"))
    print(f"another tenant's Write, {len(none_open)} with no stream open: p50 {p50_none:.1f} ms,"
          f" p95 {pct(none_open, 95):.1f} ms")
    print(f"the same with {opened} streams open: p50 {p50_open:.1f} ms, p95 {pct(with_open, 95):.1f} ms;"
          f" p50 ratio {p50_open / p50_none:.2f} (target <= 1.2)")
    print(f"events the watchers received (another tenant's writes): {events}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
