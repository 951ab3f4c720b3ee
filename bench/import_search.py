"""Search while history comes in: `memplane import-chats` brings the LoCoMo development slice (788
turns in 2 conversations' sessions, as a JSONL export) into a real server while one client searches
every 0.25 s; p50 of those searches during the import, right after it (until the server's turn
windows are built and upgraded), and once it is idle again, against the idle p50 (target: during
and right after within 1.5x of idle).

Run:  .venv/bin/python bench/import_search.py [--batch 64] [--idle-searches 60] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from foundation import LOCOMO, environment, load_locomo, pct, running_server  # sets OMP too

from memplane import MemoryClient


def locomo_export(path: Path) -> int:
    """The LoCoMo dev conversations as the JSONL form of import-chats: a conversation per session."""
    lines = []
    for sample in json.loads(LOCOMO.read_text()):
        conv = sample["conversation"]
        for key in sorted((k for k in conv if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k.split("_")[1])):
            for n, turn in enumerate(t for t in conv[key] if t.get("text")):
                lines.append(json.dumps({"conversation_id": f"{sample['sample_id']}-{key}", "message_id": str(n),
                                         "speaker": turn["speaker"], "text": turn["text"]}))
    path.write_text("\n".join(lines) + "\n")
    return len(lines)


class Searcher:
    """Searches every `every` seconds, each latency tagged with the phase it ran in."""

    def __init__(self, address: str, key: str, questions: list[str], every: float = 0.25) -> None:
        self.address, self.key, self.questions, self.every = address, key, questions, every
        self.phase, self.times = "before", []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with MemoryClient(self.address, self.key) as client:
            for n in range(10_000_000):
                if self._stop.is_set():
                    return
                start = time.perf_counter()
                client.search(self.questions[n % len(self.questions)], top_k=10, timeout=60)
                self.times.append((self.phase, (time.perf_counter() - start) * 1000))
                time.sleep(self.every)

    def __enter__(self) -> "Searcher":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(120)

    def of(self, phase: str) -> list[float]:
        return [ms for p, ms in self.times if p == phase]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--idle-searches", type=int, default=60)
    ap.add_argument("--batch", type=int, default=64, help="import-chats --batch: turns per Write")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    _, questions = load_locomo()
    export = Path(tempfile.mkdtemp()) / "locomo.jsonl"
    messages = locomo_export(export)
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("MEMPLANE_")}}
    with running_server("memplane-import-search-") as server, MemoryClient(server.address, server.key) as client:
        client.write([{"content": "warm-up", "kind": "event"}])
        with Searcher(server.address, server.key, questions) as searcher:
            time.sleep(3)
            searcher.phase = "during"
            started = time.monotonic()
            done = subprocess.run([sys.executable, "-m", "memplane_server.cli", "import-chats", str(export), "--format",
                                   "jsonl", "--batch", str(args.batch), "--target", server.address,
                                   "--api-key", server.key],
                                  env=env, capture_output=True, text=True, timeout=3600)
            imported_s = time.monotonic() - started
            assert done.returncode == 0, done.stderr
            searcher.phase = "after"
            while True:
                stats = client.get_stats(timeout=60)
                if not stats.sessions_awaiting_context and not stats.sessions_awaiting_upgrade:
                    break
                time.sleep(1)
            settled_s = time.monotonic() - started - imported_s
            searcher.phase = "idle"
            while len(searcher.of("idle")) < args.idle_searches:
                time.sleep(1)
    p50 = {phase: pct(searcher.of(phase), 50) for phase in ("during", "after", "idle") if searcher.of(phase)}
    out = {"environment": environment(), "messages": messages, "batch": args.batch, "import_s": round(imported_s, 1),
           "windows_done_after_import_s": round(settled_s, 1),
           "searches": {phase: len(searcher.of(phase)) for phase in p50},
           "p50_ms": {k: round(v, 1) for k, v in p50.items()},
           "ratio_to_idle": {k: round(v / p50["idle"], 2) for k, v in p50.items() if k != "idle"}}
    print(f"import of {messages} messages: {imported_s:.0f} s; windows done {settled_s:.0f} s after it")
    for phase in ("during", "after", "idle"):
        if phase in p50:
            print(f"  search p50 {phase:7} {p50[phase]:7.1f} ms  ({len(searcher.of(phase))} searches)"
                  + (f"  {p50[phase] / p50['idle']:.2f}x idle (target <= 1.5)" if phase != "idle" else ""))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
