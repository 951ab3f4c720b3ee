"""Tokenising from many threads at once gives exactly what one thread gives (search and the
window builder tokenise in worker threads concurrently)."""
from __future__ import annotations

import random
import threading

from memplane_server.core.retrieval.tokens import keyword_tokens, lookup_names

THREADS = 8
TEXTS = 10_000

_ENGLISH = ("camping painted running adopted researching counselling generously happiness nationalities "
            "Caroline's Melanie's workshops volunteering photographs transgender conferences").split()
_CHINESE = "上周去杭州 喜欢画画 付款系统 北京烤鸭".split()


def mixed_texts(n: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(_ENGLISH + _CHINESE) for _ in range(rng.randint(2, 6))) for _ in range(n)]


def tokenise(text: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    return tuple(keyword_tokens(text)), tuple(lookup_names(text))


def test_concurrent_tokenising_matches_one_thread():
    texts = mixed_texts(TEXTS)
    expected = [tokenise(t) for t in texts]
    results: dict[int, list] = {}
    errors: list[BaseException] = []
    start = threading.Barrier(THREADS)

    def work(n: int) -> None:
        # Each thread walks the texts from its own offset, so threads stem different words at once.
        order = list(range(n * TEXTS // THREADS, TEXTS)) + list(range(n * TEXTS // THREADS))
        start.wait()
        try:
            results[n] = [(i, tokenise(texts[i])) for i in order]
        except BaseException as exc:  # an IndexError inside the stemmer, say
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]
    for n, got in results.items():
        wrong = [i for i, tokens in got if tokens != expected[i]]
        assert not wrong, f"thread {n}: {len(wrong)} texts tokenised differently, e.g. {texts[wrong[0]]!r}"
