"""The embedder's thread runs calls in order, skips work whose caller gave up, and drops queued
work when closed instead of finishing it."""
from __future__ import annotations

import threading

from memplane_server.llm.embedders import EmbeddingThread


def test_calls_run_in_order_and_return_their_results():
    thread = EmbeddingThread()
    futures = [thread.submit(lambda n=n: n * n) for n in range(5)]
    assert [f.result(5) for f in futures] == [0, 1, 4, 9, 16]
    thread.shutdown(cancel_futures=True)


def test_closing_cancels_queued_work_and_leaves_the_running_call():
    thread = EmbeddingThread()
    started, release = threading.Event(), threading.Event()
    ran = []
    running = thread.submit(lambda: started.set() or release.wait(5) and ran.append("first"))
    queued = [thread.submit(lambda n=n: ran.append(n)) for n in range(3)]
    assert started.wait(5)
    thread.shutdown(wait=False, cancel_futures=True)
    release.set()
    running.result(5)
    assert all(f.cancelled() for f in queued) and ran == ["first"]


def test_a_cancelled_call_never_runs():
    thread = EmbeddingThread()
    release = threading.Event()
    ran = []
    first = thread.submit(release.wait, 5)
    second = thread.submit(lambda: ran.append("second"))
    assert second.cancel()
    release.set()
    first.result(5)
    thread.submit(lambda: None).result(5)
    assert ran == []
    thread.shutdown(cancel_futures=True)
