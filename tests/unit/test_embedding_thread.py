"""The embedder's thread runs requests before background work and each in order (a search's query
before passages queued ahead of it, a bounded number in a row), and background work only once
requests have paused; it skips work whose caller gave up, and drops queued work when
closed instead of finishing it."""
from __future__ import annotations

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


def test_a_query_runs_before_passages_queued_earlier():
    thread = EmbeddingThread()
    release = threading.Event()
    ran = []
    busy = thread.submit(release.wait, 5)
    passages = [thread.submit(lambda n=n: ran.append(f"passages {n}")) for n in range(2)]
    query = thread.submit_at(Priority.QUERY, lambda: ran.append("query"))
    release.set()
    for f in [busy, query, *passages]:
        f.result(5)
    assert ran == ["query", "passages 0", "passages 1"]
    thread.shutdown(cancel_futures=True)


def test_queries_go_ahead_of_waiting_passages_only_so_many_in_a_row():
    thread = EmbeddingThread()
    started, release = threading.Event(), threading.Event()
    ran = []
    busy = thread.submit(lambda: started.set() or release.wait(5))
    assert started.wait(5)
    passages = thread.submit(lambda: ran.append("passages"))
    ahead = thread.queries_ahead
    queries = [thread.submit_at(Priority.QUERY, lambda n=n: ran.append(n)) for n in range(ahead + 2)]
    release.set()
    for f in [busy, passages, *queries]:
        f.result(5)
    assert ran == [*range(ahead), "passages", ahead, ahead + 1]
    thread.shutdown(cancel_futures=True)


def test_with_no_queries_ahead_a_query_waits_its_turn():
    thread = EmbeddingThread(queries_ahead=0)
    release = threading.Event()
    ran = []
    busy = thread.submit(release.wait, 5)
    passages = thread.submit(lambda: ran.append("passages"))
    query = thread.submit_at(Priority.QUERY, lambda: ran.append("query"))
    release.set()
    for f in [busy, passages, query]:
        f.result(5)
    assert ran == ["passages", "query"]
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
