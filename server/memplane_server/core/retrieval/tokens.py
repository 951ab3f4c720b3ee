"""App-side keyword tokens: lowercased words, Chinese segmented by jieba, stopwords dropped.

Postgres full-text search is run over these tokens with the 'simple' configuration, so the
same tokenizer serves English and Chinese and the index never depends on server locale.
"""
from __future__ import annotations

import logging
import re
import threading
from functools import lru_cache

import jieba
import snowballstemmer

jieba.setLogLevel(logging.WARNING)
# A snowball stemmer keeps the word being stemmed in the object, so threads sharing one corrupt
# each other's words (seen as IndexError inside stemWord): each thread gets its own.
_per_thread = threading.local()

_WORD = re.compile(r"[0-9a-z\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u024f]+(?:'[a-z]+)?|[\u4e00-\u9fff\u3400-\u4dbf]+")
_CJK = re.compile(r"[\u4e00-\u9fff\u3400-\u4dbf]")

ENGLISH_STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further had
    has have having he her here hers herself him himself his how i if in into is it its itself just
    me more most my myself no nor not now of off on once only or other our ours ourselves out over own
    same she should so some such than that the their theirs them themselves then there these they
    this those through to too under until up very was we were what when where which while who whom
    why will with would you your yours yourself yourselves i'm it's don't""".split()
)
CHINESE_STOPWORDS = frozenset(
    "什么 哪些 哪里 谁 的 了 和 是 在 我 有 就 不 人 都 一 一个 也 很 到 说 要 去 你 会 着 没有 看 好 自己 这 那 吗 呢 吧 啊 呀 与 及 而 之 其 或 被 把 给 让 他 她 它 们 我们 你们 他们".split()
)


def _stemmer() -> snowballstemmer.stemmer:
    stemmer = getattr(_per_thread, "stemmer", None)
    if stemmer is None:
        stemmer = _per_thread.stemmer = snowballstemmer.stemmer("english")
    return stemmer


def needs_segmenting(text: str) -> bool:
    """Whether the text holds Chinese, which jieba segments: its first use in a process loads a
    dictionary (about half a second); afterwards a query's tokens take tens of microseconds."""
    return _CJK.search(text) is not None


def _segment(chunk: str) -> list[str]:
    # jieba loads its dictionary once under its own lock; after that cutting only reads it.
    return jieba.lcut_for_search(chunk)


# Snowball in pure Python costs about 25 µs a word (a third of a millisecond a LoCoMo turn); a text's
# words are mostly ones seen before. Bounded: about 200 bytes a word.
@lru_cache(maxsize=32_768)
def _english(word: str) -> str | None:
    if word.endswith("'s"):  # possessive: "Gina's store" is about Gina
        word = word[:-2]
    if word in ENGLISH_STOPWORDS or (len(word) < 2 and not word.isdigit()):
        return None
    # Stems, so "camped" finds "camping" and "paint" finds "painting".
    return _stemmer().stemWord(word.replace("'", ""))


def keyword_tokens(text: str) -> list[str]:
    """Tokens for indexing and querying, in order, stopwords removed, duplicates kept."""
    out: list[str] = []
    for match in _WORD.finditer(text.lower()):
        word = match.group(0)
        if _CJK.match(word):
            out.extend(t for t in _segment(word) if t.strip() and t not in CHINESE_STOPWORDS)
        elif (token := _english(word)) is not None:
            out.append(token)
    return out


# Structured facts about the person an agent serves use the entity "user" (llm/extraction.py).
_FIRST_PERSON = frozenset({"i", "me", "my", "mine", "myself", "我", "我的", "自己"})
MAX_LOOKUP_NAMES = 64


def lookup_names(text: str) -> list[str]:
    """Lowercase names a query may use for a fact's entity or attribute: its words (not stemmed),
    adjacent pairs joined by a space, "_" or "-", Chinese words, and "user" for first person."""
    words: list[str] = []
    for match in _WORD.finditer(text.lower()):
        word = match.group(0)
        if _CJK.match(word):
            words.extend(t for t in _segment(word) if t.strip())
        else:
            words.append(word.removesuffix("'s"))
    names = ["user"] if _FIRST_PERSON & set(words) else []
    content = [w for w in words if w not in ENGLISH_STOPWORDS and w not in CHINESE_STOPWORDS]
    names.extend(content)
    for left, right in zip(content, content[1:]):
        joints = ("",) if _CJK.match(left) else (" ", "_", "-")
        names.extend(f"{left}{joint}{right}" for joint in joints)
    return list(dict.fromkeys(names))[:MAX_LOOKUP_NAMES]


def tsquery_from_tokens(tokens: list[str]) -> str:
    """An OR query over distinct tokens; tokens are [0-9a-z + CJK] only, so no tsquery syntax leaks in."""
    seen = dict.fromkeys(t for t in tokens if t)
    return " | ".join(f"'{t}'" for t in seen)
