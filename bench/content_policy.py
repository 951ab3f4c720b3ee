"""The content policy's detectors on their corpus (tests/data/content_corpus.jsonl, written by
bench/content_corpus.py): recall and false positives per detector, per category and per language,
then the throughput of `find` on the corpus and on 8 KB texts with and without candidates.

A positive is caught when a finding of its detector (for a secret: of any secret detector) covers
the planted value wherever it occurs; a negative counts as a false positive when anything at all
is found in it.

With --fresh N (10 by default) it also scores N corpora drawn from other seeds by the same
generator: figures the detectors were not tuned on.

Run:  .venv/bin/python bench/content_policy.py [--corpus PATH] [--fresh 10] [--seconds 1.0]
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter
from pathlib import Path

import content_corpus

from memplane_server.core.content.detectors import DETECTORS, Finding, find

ROOT = Path(__file__).resolve().parent.parent

SIZE = 8 * 1024
# Prose with nothing a detector looks for: no digits, no "@", no long tokens, no key prefixes.
QUIET = ["The agent summarised the meeting and wrote down who owns each follow-up. ",
         "Users prefer short answers in the morning and longer explanations in the evening. ",
         "用户更喜欢在早上收到简短的回答，晚上再看详细的解释。",
         "会议结束后，助手整理了待办事项，并标注了每一项的负责人。",
         "The deployment went smoothly once the configuration was reviewed by the team. ",
         "这个项目的目标是让智能体记住重要的偏好和经验教训。"]


def caught(line: dict, findings: list[Finding]) -> bool:
    secret, planted = line["secret"], line["detector"]
    fitting = [f for f in findings if f.detector == planted or (DETECTORS[planted] == "secret" == f.category)]
    starts = [i for i in range(len(line["text"])) if line["text"].startswith(secret, i)]
    return bool(starts) and all(any(f.start <= i and i + len(secret) <= f.end for f in fitting) for i in starts)


def quality(corpus: list[dict]) -> None:
    found = [find(line["text"]) for line in corpus]
    per_detector: Counter[tuple[str, str]] = Counter()
    per_group: Counter[tuple[str, str]] = Counter()
    for line, findings in zip(corpus, found):
        if line["detector"]:
            hit = caught(line, findings)
            category = DETECTORS[line["detector"]]
            per_detector[line["detector"], "positives"] += 1
            per_detector[line["detector"], "caught"] += hit
            for group in (category, f"{category}/{line['lang']}", "all", f"all/{line['lang']}"):
                per_group[group, "positives"] += 1
                per_group[group, "caught"] += hit
        else:
            for name in {f.detector for f in findings}:
                per_detector[name, "false"] += 1
            for category in {f.category for f in findings}:
                per_group[category, "false"] += 1
                per_group[f"{category}/{line['lang']}", "false"] += 1
            for group in ("all", f"all/{line['lang']}"):
                per_group[group, "negatives"] += 1
                per_group[group, "false"] += bool(findings)
    negatives = {lang: sum(1 for c in corpus if not c["detector"] and c["lang"] == lang) for lang in ("en", "zh")}
    total_negatives = sum(negatives.values())
    print(f"corpus: {sum(1 for c in corpus if c['detector'])} positives, {total_negatives} negatives "
          f"({negatives['zh']} zh)\n")
    print(f"{'detector':<20}{'category':<10}{'recall':>14}{'false pos':>12}")
    for name, category in DETECTORS.items():
        n, hits, false = (per_detector[name, k] for k in ("positives", "caught", "false"))
        print(f"{name:<20}{category:<10}{hits:>6}/{n:<3} {hits / n if n else 0:>4.2f}{false:>6}/{total_negatives}")
    print(f"\n{'group':<20}{'recall':>14}{'false pos':>16}")
    groups = [f"{g}{lang}" for g in ("secret", "personal", "all") for lang in ("", "/en", "/zh")]
    for group in groups:
        n, hits, false = (per_group[group, k] for k in ("positives", "caught", "false"))
        lang = group.split("/")[1] if "/" in group else None
        negs = negatives[lang] if lang else total_negatives
        print(f"{group:<20}{hits:>6}/{n:<3} {hits / n:>4.2f}{false:>6}/{negs:<3} {false / negs:>5.3f}")
    misses = [c for c, f in zip(corpus, found) if c["detector"] and not caught(c, f)]
    flagged = [(c, f) for c, f in zip(corpus, found) if not c["detector"] and f]
    for line in misses:
        print(f"  missed {line['detector']}: {line['text'][:100]!r}")
    for line, findings in flagged:
        spans = [(f.detector, line["text"][f.start:f.end]) for f in findings]
        print(f"  flagged: {line['text'][:80]!r} {spans}")


def fresh(count: int) -> None:
    """Corpora drawn anew from other seeds: the detectors were built against the committed corpus,
    and these tell whether they hold on values they have never seen."""
    positives: Counter[str] = Counter()
    missed: Counter[str] = Counter()
    flagged: Counter[str] = Counter()
    negatives = 0
    for seed in range(1, count + 1):
        for line in content_corpus.lines(seed):
            findings = find(line["text"])
            if line["detector"]:
                positives[line["detector"]] += 1
                missed[line["detector"]] += not caught(line, findings)
            else:
                negatives += 1
                flagged.update({f.detector for f in findings})
    print(f"\n{count} fresh corpora (seeds 1-{count}): {sum(positives.values())} positives, {negatives} negatives")
    print(f"{'detector':<20}{'recall':>8}{'false pos':>12}")
    for name in DETECTORS:
        print(f"{name:<20}{1 - missed[name] / positives[name]:>8.3f}{flagged[name]:>6}/{negatives}")


def rate(texts: list[str], seconds: float) -> tuple[float, float, float]:
    """texts/s, MB/s (of UTF-8) and µs per text, from the fastest whole pass over the list within
    the time given: a shared machine only ever slows a pass down."""
    size = sum(len(t.encode()) for t in texts)
    fastest, started = float("inf"), time.perf_counter()
    while time.perf_counter() - started < seconds or fastest == float("inf"):
        begun = time.perf_counter()
        for text in texts:
            find(text)
        fastest = min(fastest, time.perf_counter() - begun)
    return len(texts) / fastest, size / fastest / 1e6, fastest / len(texts) * 1e6


def eight_kb(pieces: list[str], rng: random.Random, count: int) -> list[str]:
    texts = []
    for _ in range(count):
        parts, length = [], 0
        while length < SIZE:
            piece = rng.choice(pieces)
            parts.append(piece)
            length += len(piece.encode())
        texts.append(" ".join(parts)[:SIZE])
    return texts


def speed(corpus: list[dict], seconds: float) -> None:
    rng = random.Random(7)
    lines = [c["text"] for c in corpus]
    cases = {
        "corpus lines": lines,
        "8 KB, corpus lines": eight_kb(lines, rng, 20),
        "8 KB, negatives only": eight_kb([c["text"] for c in corpus if not c["detector"]], rng, 20),
        # Prose with a corpus line in about every tenth sentence: a few findings per text.
        "8 KB, prose and lines": eight_kb(QUIET * 300 + lines[::3], rng, 20),
        "8 KB, no candidates": eight_kb(QUIET, rng, 20),
    }
    find(cases["corpus lines"][0])  # the libraries load their tables on first use
    print(f"\n{'find() on':<28}{'texts/s':>10}{'MB/s':>8}{'µs/text':>10}{'findings/text':>15}")
    for label, texts in cases.items():
        per_second, mb, micros = rate(texts, seconds)
        findings = sum(len(find(t)) for t in texts) / len(texts)
        print(f"{label:<28}{per_second:>10.0f}{mb:>8.2f}{micros:>10.0f}{findings:>15.1f}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=ROOT / "tests" / "data" / "content_corpus.jsonl")
    parser.add_argument("--seconds", type=float, default=1.0, help="time spent on each throughput case")
    parser.add_argument("--fresh", type=int, default=10, metavar="N",
                        help="also score N corpora drawn from other seeds")
    args = parser.parse_args(argv)
    corpus = [json.loads(line) for line in args.corpus.read_text(encoding="utf-8").splitlines()]
    quality(corpus)
    if args.fresh:
        fresh(args.fresh)
    speed(corpus, args.seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
