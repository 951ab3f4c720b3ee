"""CPU cost of building session digests: every LoCoMo dev session_N, as the
window worker builds it (keyword tokens, entities, the mean of the turns' vectors), timed in
process. Vectors are random: averaging them costs the same, and embedding is not part of a build.

Run:  PYTHONPATH=$PWD/server:$PWD/clients/python .venv/bin/python bench/digest_cost.py
"""
from __future__ import annotations

import json
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from quality import SHARED, locomo_turn_items  # noqa: E402

from memplane_server.core.write.digests import build_digests  # noqa: E402
from memplane_server.core.write.windows import SessionTurn  # noqa: E402


def main() -> None:
    items, _, _ = locomo_turn_items(json.loads((SHARED / "locomo-dev.json").read_text()))
    rng = np.random.default_rng(0)
    sessions: dict[str, list[SessionTurn]] = defaultdict(list)
    for i, item in enumerate(items):  # "D3:12" is turn 12 of session_3
        session = f"{item['session_id']}/{item['metadata']['dia_id'].split(':')[0]}"
        sessions[session].append(SessionTurn(i, ("global", None, None), item["content"], None,
                                             rng.standard_normal(384).astype(np.float32), item["occurred_at"]))
    build_digests("warm-up", next(iter(sessions.values())), {})  # jieba's dictionary and the patterns load once
    started = time.process_time()
    for session, turns in sessions.items():
        build_digests(session, turns, {})
    cpu = time.process_time() - started
    print(f"{len(sessions)} sessions, {len(items)} turns: {cpu:.2f} s CPU, {cpu / len(items) * 1000:.2f} ms per turn")


if __name__ == "__main__":
    main()
