"""Hindsight benchmark: (a) extraction over sessions with gold answers, (b) lessons before a similar task.

Part (b) is bench/hindsight_lessons.py (`--part b`, or `--part all` for both); this page is part (a).
Part (c), the LLM search stages (rewrite, rerank, model-written session digests) against LLM-free search
on LoCoMo dev, is bench/hindsight_search.py, a command of its own.

    .venv/bin/python bench/hindsight.py [--part a|b|all] [--sessions N] [--tasks N] [--threads 2] [--json out.json]
    .venv/bin/python bench/hindsight.py --server-env MEMPLANE_LLM_MODEL=openai/... --server-env MEMPLANE_LLM_API_BASE=...
    .venv/bin/python bench/hindsight.py --part b --llm-free   # part (b) against a server without a model
    .venv/bin/python bench/hindsight.py --rescore out.json   # an earlier run's stored facts, scored again

One run starts embedded PostgreSQL and Redis and a real `memplane serve` (foundation.py's
`running_server`) with the packaged local model (MEMPLANE_LOCAL_MODEL, scripts/install_local_model.py)
or, with --server-env, any litellm model. Each session of bench/hindsight/extraction.json (written
for this benchmark, English and Chinese: moves, new numbers, job and diet changes, corrections,
retractions, negations, other people's facts, small talk) is written turn by turn through the SDK
with INFER_MODE_SYNC, as a user's agent would, each session under its own user id. Then the user's
active facts and preferences are read back and scored against the gold answers:

- a gold current fact (subject, value) is found when an active fact holds the value (case-insensitive,
  one contained in the other; a date is given in its forms, "March 5|03-05") about that subject: for another person of the session (a daughter,
  a brother) its entity must be one of that person's names ("anna|wife"); for the user any entity
  but another person's (the model names the user's facts "user", "phone_number", "flight");
- precision: active facts that match a gold current fact or a fact the gold lists as `also` (true,
  stated, not required), of all active facts; the precision counting only required facts is printed beside;
- stale: gold superseded values still active for their subject (a move whose old city stayed);
- ungrounded: active facts whose value is in none of the session's turns (an invented fact).

Without a model extraction stores nothing (Write refuses `infer` without one): the LLM-free line
is printed beside the model's for that reason, not measured.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import unicodedata
from pathlib import Path

import hindsight_lessons as lessons
from foundation import environment, running_server  # also sets the OMP environment

from memplane import MemoryClient

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from install_local_model import model_path  # noqa: E402  (a script beside bench/, not a package)

DATA = Path(__file__).resolve().parent / "hindsight" / "extraction.json"
MODEL = model_path()


def plain(text: str) -> str:
    return unicodedata.normalize("NFKC", text or "").casefold().strip(" .。")


def holds(stored: str, gold: str) -> bool:
    s, g = plain(stored), plain(gold)
    return bool(s) and (g in s or s in g)


def subject_of(entity: str) -> str:
    return plain(entity).removeprefix("the ")


def matches(active: tuple[str, str], gold: list[str], people: set[str]) -> bool:
    """A fact of the user may have any entity the model chose ("user", "phone_number", "flight")
    but another person's of the session; another person's must have that person as its entity."""
    subject, value = active
    names = set(plain(gold[0]).split("|"))
    same = subject not in people if names == {"user"} else subject in names
    return same and any(holds(value, form) for form in gold[1].split("|"))


def score(session: dict, active: list[tuple[str, str]]) -> dict:
    people = {name for g in session["current"] + session["stale"] for name in plain(g[0]).split("|")} - {"user"}
    found = [g for g in session["current"] if any(matches(a, g, people) for a in active)]
    strict = [a for a in active if any(matches(a, g, people) for g in session["current"])]
    right = [a for a in active if any(matches(a, g, people) for g in session["current"] + session.get("also", []))]
    stale = [g for g in session["stale"] if any(matches(a, g, people) for a in active)]
    said = plain(" ".join(session["turns"]))
    ungrounded = [a for a in active if plain(a[1]) not in said]
    return {"gold": len(session["current"]), "found": len(found), "active": len(active), "right": len(right),
            "strict": len(strict),
            "stale": len(stale), "stale_gold": len(session["stale"]), "ungrounded": len(ungrounded),
            "facts": active}


def run(address: str, key: str, sessions: list[dict]) -> tuple[list[dict], list[float]]:
    results, seconds = [], []
    with MemoryClient(address, key) as client:
        for session in sessions:
            user = f"u-{session['id']}"
            for n, text in enumerate(session["turns"]):
                start = time.perf_counter()
                written = client.write([{"content": text, "kind": "turn", "session_id": session["id"], "user_id": user}],
                                       infer="sync", timeout=600)
                seconds.append(time.perf_counter() - start)
                if written.operation is not None:
                    print(f"  {session['id']} turn {n}: extraction failed, left to a job", flush=True)
            facts = client.list_memories(user_id=user, kinds=["fact", "preference"], page_size=100).items
            active = [(subject_of(f.entity or "user"), f.value or f.content) for f in facts]
            result = {"id": session["id"], "lang": session["lang"], **score(session, active)}
            results.append(result)
            print(f"  {session['id']:16} found {result['found']}/{result['gold']}  active {result['active']}"
                  f"  stale {result['stale']}/{result['stale_gold']}  ungrounded {result['ungrounded']}"
                  f"  {result['facts']}", flush=True)
    return results, seconds


def rescore(path: Path) -> int:
    """The facts (or, for part b, the answers) of an earlier run scored by this version of the rules
    (the gold files as they are now); a `--part all` file holds both."""
    earlier = json.loads(path.read_text())
    for part in ("a", "b"):
        if part in earlier:
            print(f"part ({part}):")
            rescore_run(earlier[part])
    if "a" not in earlier and "b" not in earlier:
        rescore_run(earlier)
    return 0


def rescore_run(earlier: dict) -> None:
    if "items" in earlier:
        lessons.rescore(earlier)
        return
    gold = {s["id"]: s for s in json.loads(DATA.read_text())["sessions"]}
    results = [{"id": r["id"], "lang": r["lang"], **score(gold[r["id"]], [tuple(f) for f in r["facts"]])}
               for r in earlier["sessions"]]
    report(results, earlier["model"])


def report(results: list[dict], model: str) -> dict:
    figures = totals(results)
    print(f"{model}: F1 {figures['f1']}  precision {figures['precision']}  recall {figures['recall']}"
          f" ({figures['found']}/{figures['gold_current']})  stale {figures['stale']}/{figures['stale_gold']}"
          f"  ungrounded {figures['ungrounded']} of {figures['active']} active"
          f"  (precision counting only required facts right: {figures['precision_required_only']})")
    for lang in ("en", "zh"):
        f = totals([r for r in results if r["lang"] == lang])
        print(f"  {lang}: F1 {f['f1']}  precision {f['precision']}  recall {f['recall']} ({f['found']}/{f['gold_current']})"
              f"  stale {f['stale']}/{f['stale_gold']}  ungrounded {f['ungrounded']} of {f['active']}")
    print(f"LLM-free: F1 0.0  recall 0.0 (0/{figures['gold_current']}): without a model nothing is extracted")
    return figures


def totals(results: list[dict]) -> dict:
    gold, found = sum(r["gold"] for r in results), sum(r["found"] for r in results)
    active, right = sum(r["active"] for r in results), sum(r["right"] for r in results)
    strict = sum(r.get("strict", r["right"]) for r in results)
    recall = found / gold if gold else 0.0
    precision = right / active if active else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"sessions": len(results), "gold_current": gold, "found": found, "recall": round(recall, 3),
            "active": active, "precision": round(precision, 3), "f1": round(f1, 3),
            "precision_required_only": round(strict / active if active else 0.0, 3),
            "stale": sum(r["stale"] for r in results), "stale_gold": sum(r["stale_gold"] for r in results),
            "ungrounded": sum(r["ungrounded"] for r in results)}


def part_a(args: argparse.Namespace, model: str) -> dict:
    sessions = json.loads(DATA.read_text())["sessions"]
    sessions = sessions[:args.sessions] if args.sessions else sessions
    print(f"hindsight (a) extraction: {len(sessions)} sessions, {sum(len(s['turns']) for s in sessions)} turns,"
          f" model {model}; {environment()}", flush=True)
    started = time.perf_counter()
    with running_server("memplane-hindsight-") as server:
        results, seconds = run(server.address, server.key, sessions)
    figures = report(results, model)
    by_lang = {lang: totals([r for r in results if r["lang"] == lang]) for lang in ("en", "zh")}
    seconds.sort()
    timing = {"turn_p50_s": round(seconds[len(seconds) // 2], 1), "turn_max_s": round(seconds[-1], 1),
              "total_s": round(time.perf_counter() - started)}
    print(f"time: a turn with extraction p50 {timing['turn_p50_s']} s, max {timing['turn_max_s']} s;"
          f" run {timing['total_s']} s")
    return {"model": model, "totals": figures, "by_lang": by_lang, "timing": timing, "sessions": results,
            "environment": environment()}


def part_b(args: argparse.Namespace, model: str) -> dict:
    items = lessons.load(args.tasks)
    print(f"hindsight (b) lessons: {len(items)} tasks ({sum(i['lang'] == 'zh' for i in items)} Chinese),"
          f" {sum(bool(i['gold']) for i in items)} with a lesson, model {model}; {environment()}", flush=True)
    started = time.perf_counter()
    with running_server("memplane-hindsight-b-") as server:
        results, seconds, without_model = lessons.run(server.address, server.key, items)
    figures = lessons.report(results, model)
    by_lang = {lang: lessons.totals([r for r in results if r["lang"] == lang]) for lang in ("en", "zh")}
    timing = lessons.timing(seconds, started)
    print(f"time: a reflection p50 {timing['reflect_p50_s']} s, max {timing['reflect_max_s']} s;"
          f" {without_model} of {len(items)} reflections without the model's part; run {timing['total_s']} s")
    return {"part": "b", "model": model, "totals": figures, "by_lang": by_lang, "timing": timing,
            "without_model": without_model, "items": results, "environment": environment()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=("a", "b", "all"), default="a",
                    help="a: extraction; b: lessons before a similar task (hindsight_lessons.py); all: both")
    ap.add_argument("--sessions", type=int, default=0, help="part a: only the first N sessions (0: all)")
    ap.add_argument("--tasks", type=int, default=0,
                    help="part b: only the first N tasks, English and Chinese in turn (0: all)")
    ap.add_argument("--llm-free", action="store_true", help="part b: a server without a model")
    ap.add_argument("--threads", type=int, default=2, help="MEMPLANE_LOCAL_MODEL_THREADS for the packaged model")
    ap.add_argument("--server-env", action="append", default=[], metavar="NAME=VALUE",
                    help="an environment variable for the server, e.g. MEMPLANE_LLM_MODEL=... (repeatable)")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--rescore", type=Path, help="score what a --json run stored again, without a model")
    args = ap.parse_args()
    if args.rescore:
        return rescore(args.rescore)
    for pair in args.server_env:
        name, _, value = pair.partition("=")
        os.environ[name] = value
    if args.llm_free:
        if args.part != "b":
            sys.exit("--llm-free is for part b: without a model, part a's extraction stores nothing")
        for name in ("MEMPLANE_LLM_MODEL", "MEMPLANE_LOCAL_MODEL"):
            os.environ.pop(name, None)
        model = "LLM-free"
    elif "MEMPLANE_LLM_MODEL" not in os.environ:
        if not MODEL.is_file():
            sys.exit(f"{MODEL} is missing: run scripts/install_local_model.py, or name a model with --server-env")
        os.environ.setdefault("MEMPLANE_LOCAL_MODEL", str(MODEL))
        os.environ.setdefault("MEMPLANE_LOCAL_MODEL_THREADS", str(args.threads))
        # A reflection's answer took 54 s on 2 quiet cores; beside another model it passed the default
        # 60 s and the sync Reflect failed UNAVAILABLE. The benchmark measures answers, not patience.
        os.environ.setdefault("MEMPLANE_LLM_TIMEOUT_SECONDS", "600")
    if not args.llm_free:
        model = os.environ.get("MEMPLANE_LLM_MODEL") or Path(os.environ["MEMPLANE_LOCAL_MODEL"]).name
    out = {}
    if args.part in ("a", "all"):
        out["a"] = part_a(args, model)
    if args.part in ("b", "all"):
        out["b"] = part_b(args, model)
    if args.json:
        args.json.write_text(json.dumps(out if args.part == "all" else out[args.part], ensure_ascii=False, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
