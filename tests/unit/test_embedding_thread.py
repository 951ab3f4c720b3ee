"""The embedder's threads run each kind of call in order: searches' queries beside requests' passages
(not after the call running), the passages at a lower CPU priority, and background work only once
requests have paused; they skip work whose caller gave up, and drop queued work when closed instead
of finishing it."""
from __future__ import annotations

import os
import threading
import time

from memplane_server.llm.embedders import EmbeddingThread, Priority


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


def test_a_request_runs_before_background_work_queued_earlier():
    thread = EmbeddingThread()
    release = threading.Event()
    ran = []
    busy = thread.submit_at(Priority.BACKGROUND, release.wait, 5)
    background = [thread.submit_at(Priority.BACKGROUND, lambda n=n: ran.append(f"window {n}")) for n in range(2)]
    request = thread.submit(lambda: ran.append("request"))
    release.set()
    for f in [busy, request, *background]:
        f.result(5)
    assert ran == ["request", "window 0", "window 1"]
    thread.shutdown(cancel_futures=True)


def test_a_query_runs_while_passages_are_being_embedded():
    thread = EmbeddingThread()
    started, release = threading.Event(), threading.Event()
    busy = thread.submit(lambda: started.set() or release.wait(5))
    assert started.wait(5)
    query = thread.submit_at(Priority.QUERY, lambda: "query")
    assert query.result(5) == "query" and not busy.done()
    release.set()
    busy.result(5)
    thread.shutdown(cancel_futures=True)


def test_passages_are_embedded_at_the_lower_cpu_priority():
    thread = EmbeddingThread(passage_nice=7)
    here = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    passages = thread.submit(lambda: os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
    query = thread.submit_at(Priority.QUERY, lambda: os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
    assert (passages.result(5), query.result(5)) == (min(here + 7, 19), here)
    thread.shutdown(cancel_futures=True)


def test_background_work_waits_for_queued_queries_too():
    thread = EmbeddingThread()
    release = threading.Event()
    ran = []
    busy = thread.submit_at(Priority.QUERY, release.wait, 5)
    background = thread.submit_at(Priority.BACKGROUND, lambda: ran.append("window"))
    query = thread.submit_at(Priority.QUERY, lambda: ran.append("query"))
    release.set()
    for f in [busy, query, background]:
        f.result(5)
    assert ran == ["query", "window"]
    thread.shutdown(cancel_futures=True)


def test_closing_without_cancelling_finishes_queued_background_work():
    thread = EmbeddingThread()
    queued = thread.submit_at(Priority.BACKGROUND, lambda: "done")
    thread.shutdown(wait=False)
    assert queued.result(5) == "done"


def test_background_work_waits_for_a_pause_in_the_requests():
    thread = EmbeddingThread()
    ran = []
    thread.submit(lambda: ran.append("request")).result(5)
    background = thread.submit_at(Priority.BACKGROUND, lambda: ran.append("window"))
    # Requests keep coming within the pause background work waits for: they all go first.
    for _ in range(5):
        time.sleep(EmbeddingThread.BACKGROUND_AFTER_SECONDS / 4)
        thread.submit(lambda: ran.append("request")).result(5)
    background.result(5)
    assert ran == ["request"] * 6 + ["window"]
    thread.shutdown(cancel_futures=True)
