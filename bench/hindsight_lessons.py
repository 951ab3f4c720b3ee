"""Hindsight benchmark, part (b): does the right lesson come back before a similar task?

    .venv/bin/python bench/hindsight.py --part b [--tasks N] [--llm-free] [--json out.json]
    .venv/bin/python bench/hindsight.py --rescore out.json   # an earlier run's answers, scored again

Each item of bench/hindsight/lessons.json (written for this benchmark, English and Chinese) is a
finished agent task (a TaskTrajectory: request, steps, outcome, feedback, attempts: failed steps then
a fix, retries, a user's correction, a success with a procedure, a routine success) and a later
similar task in other words, as an agent describes it to Foresee (task, entities, tools).

All trajectories go to one tenant, tenant-wide (the tenant admin key's default scope), as one team's
agents would share what they learned: the lessons of the other 35 tasks are there when one task's
lesson is looked for, which is the realistic and the harder case. First every trajectory is
reflected on (Reflect, sync, one after another, timed); then for each later task the agent asks
Foresee (top 10) and Search (the task's text, top 10), and the answers are scored:

- foresee@3 / search@3: a memory among the first 3 says the right lesson: it comes from the item's
  trajectory (source id = its task id) and its content and context say every element of the item's
  `gold`, each in one of its forms; search@3 counts any kind (a
  task summary quoting the user's feedback is an answer too), search@3 typed leaves summaries out;
- contradicting: stored typed memories (lesson, procedure, preference, fact) of a trajectory
  (source id = its task id) that say one of its `contradicting` forms (a lesson stating the opposite);
- stored: typed memories reflection stored; on routine successes (no gold) every one is noise.

A form is said when it occurs (case- and width-insensitive; an ASCII form needs no letter or digit
right beside it, a form ending in * is a word's beginning) and is not negated: in its clause, the
five words before it (English) and ten characters before it (Chinese) hold an odd number of
negations ("not", "never", "avoid", "skip", "non", 不要, 避免, 跳过 ...), so "never skip the dry
run" says "dry run" and "do not use local time" does not say "use local time". A heuristic, checked
by the run's stored texts (--json keeps them; --rescore applies the rules again).

Without a model (--llm-free, the same data against a server without one) Reflect stores only its
task summary (request, outcome, step count, feedback): the LLM-free line is measured, not assumed.
"""
from __future__ import annotations

import json
import re
import time
import unicodedata
from pathlib import Path

from memplane import MemoryClient

DATA = Path(__file__).resolve().parent / "hindsight" / "lessons.json"
TOP = 3
TYPED = ("lesson", "procedure", "preference", "fact")

EN_NEGATIONS = {"not", "never", "no", "nor", "t", "don", "dont", "doesn", "didn", "shouldn", "mustn", "cannot",
                "avoid", "avoiding", "without", "instead", "rather", "stop", "non", "skip", "skipping", "skipped",
                "forget", "forgetting", "forgot", "omit", "ignore", "ignoring"}
ZH_NEGATIONS = re.compile(r"不需要|不要|不能|不可|不得|不用|不必|无需|无须|禁止|避免|切勿|勿|(?<![特分区个类识级告])别|而不是"
                          r"|而非|不是|不再|没有|未|忘记|忘了|跳过|省略|遗漏")
CLAUSE_END = re.compile(r"[;:!?,\n；：！？，、。]|\.\s")
ASCII_WORD = re.compile(r"[a-z0-9]")


def plain(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text or "").casefold().split())


def negated(before: str) -> bool:
    """Whether the clause before a match negates it (an odd number of negations close before it)."""
    clause = CLAUSE_END.split(before)[-1]
    words = re.findall(r"[a-z0-9]+", clause)[-5:]
    return (sum(w in EN_NEGATIONS for w in words) + len(ZH_NEGATIONS.findall(clause[-10:]))) % 2 == 1


def says(text: str, form: str) -> bool:
    """text says form somewhere, not negated (text and form already plain)."""
    prefix = form.endswith("*")
    form = form.rstrip("*")
    start = text.find(form)
    while form and start >= 0:
        end = start + len(form)
        clear_before = not (ASCII_WORD.match(form[0]) and start and ASCII_WORD.match(text[start - 1]))
        clear_after = prefix or not (ASCII_WORD.match(form[-1]) and end < len(text) and ASCII_WORD.match(text[end]))
        if clear_before and clear_after and not negated(text[:start]):
            return True
        start = text.find(form, start + 1)
    return False


def said(text: str, alternatives: str) -> bool:
    t = plain(text)
    return any(says(t, plain(form)) for form in alternatives.split("|") if form.strip())


def right(text: str, gold: list[str]) -> bool:
    """text says the lesson: every element of gold in one of its forms."""
    return bool(gold) and all(said(text, element) for element in gold)


def contradicts(text: str, forms: list[str]) -> bool:
    return any(said(text, element) for element in forms)


def score(item: dict, foresee: list[list[str]], search: list[list[str]], stored: list[list[str]]) -> dict:
    """foresee, search: [kind, text, source id] best first; stored: [kind, text] of the item's trajectory.
    A right answer comes from the item's own trajectory: another's that happens to use the same
    words ("time zone") is not its lesson."""
    gold, against, own = item["gold"], item["contradicting"], item["task"]["task_id"]

    def found(answers: list[list[str]], typed: bool = False) -> bool:
        return any(source == own and right(t, gold) and not (typed and k == "summary") for k, t, source in answers)

    return {"gold": bool(gold),
            "foresee_at_3": found(foresee[:TOP]), "foresee_any": found(foresee),
            "search_at_3": found(search[:TOP]), "search_at_3_typed": found(search[:TOP], typed=True),
            "stored_right": sum(right(t, gold) for _, t in stored),
            "stored": len(stored), "contradicting": sum(contradicts(t, against) for _, t in stored)}


def text_of(memory) -> str:
    return " ".join(filter(None, (memory.content, memory.context)))


def run(address: str, key: str, items: list[dict]) -> tuple[list[dict], list[float], int]:
    """Reflects on every trajectory, then asks for each later task; returns the scored items, the
    seconds of each reflection and how many reflections ran without the model's part."""
    seconds, without_model, answers = [], 0, []
    with MemoryClient(address, key) as client:
        for item in items:
            start = time.perf_counter()
            result = client.reflect(task=item["task"], mode="sync", timeout=900)
            seconds.append(time.perf_counter() - start)
            without_model += not result.used_llm
            kinds = [m.kind.name.lower() for m in result.memories]
            print(f"  reflect {item['id']:20} {seconds[-1]:6.1f} s  used_llm {result.used_llm}  {kinds}", flush=True)
        memories = list(client.iter_memories(kinds=list(TYPED), page_size=200, timeout=60))
        for item in items:
            later = item["later"]
            advice = client.foresee(later["task"], entities=later["entities"], tools=later["tools"], top_k=10,
                                    timeout=120)
            hits = client.search(later["task"], top_k=10, timeout=120).hits
            stored = [[m.kind.name.lower(), text_of(m)] for m in memories if m.source_id == item["task"]["task_id"]]
            foresee = [[a.memory.kind.name.lower(), text_of(a.memory), a.memory.source_id] for a in advice]
            search = [[h.memory.kind.name.lower(), text_of(h.memory), h.memory.source_id] for h in hits[:5]]
            result = {"id": item["id"], "lang": item["lang"], **score(item, foresee, search, stored),
                      "foresee": foresee, "search": search, "stored_memories": stored}
            answers.append(result)
            print(f"  {item['id']:20} foresee@3 {mark(result, 'foresee_at_3')}  search@3 {mark(result, 'search_at_3')}"
                  f"  stored {result['stored']} (right {result['stored_right']}, contradicting {result['contradicting']})"
                  f"  foresee: {[f[1][:60] for f in foresee[:TOP]]}", flush=True)
    return answers, seconds, without_model


def mark(result: dict, name: str) -> str:
    return "-" if not result["gold"] else ("yes" if result[name] else "no ")


def totals(results: list[dict]) -> dict:
    taught = [r for r in results if r["gold"]]
    n = len(taught)

    def share(name: str) -> dict:
        hits = sum(r[name] for r in taught)
        return {"hits": hits, "of": n, "rate": round(hits / n, 3) if n else 0.0}

    return {"items": len(results), "with_lesson": n, "foresee_at_3": share("foresee_at_3"),
            "foresee_any": share("foresee_any"), "search_at_3": share("search_at_3"),
            "search_at_3_typed": share("search_at_3_typed"),
            "lesson_stored": sum(r["stored_right"] > 0 for r in taught),
            "stored": sum(r["stored"] for r in results), "contradicting": sum(r["contradicting"] for r in results),
            "stored_on_routine": sum(r["stored"] for r in results if not r["gold"])}


def report(results: list[dict], model: str) -> dict:
    figures = totals(results)
    for label, f in ((model, figures), *((f"  {lang}", totals([r for r in results if r["lang"] == lang]))
                                         for lang in ("en", "zh"))):
        print(f"{label}: foresee@3 {f['foresee_at_3']['hits']}/{f['with_lesson']}"
              f"  (in its 10: {f['foresee_any']['hits']})  search@3 {f['search_at_3']['hits']}/{f['with_lesson']}"
              f" (typed {f['search_at_3_typed']['hits']})  lesson stored for {f['lesson_stored']}/{f['with_lesson']}"
              f"  stored {f['stored']} typed memories, {f['contradicting']} contradicting their trajectory,"
              f" {f['stored_on_routine']} on routine tasks")
    return figures


def rescore(earlier: dict) -> dict:
    """The answers of an earlier run scored by this version of the rules and the data file."""
    items = {i["id"]: i for i in load()}
    results = [{"id": r["id"], "lang": r["lang"], **score(items[r["id"]], r["foresee"], r["search"], r["stored_memories"]),
                "foresee": r["foresee"], "search": r["search"], "stored_memories": r["stored_memories"]}
               for r in earlier["items"]]
    return report(results, earlier["model"])


def load(tasks: int = 0) -> list[dict]:
    """Every item, or the first N taking English and Chinese in turn (a small run sees both)."""
    items = json.loads(DATA.read_text())["items"]
    if not tasks:
        return items
    en, zh = [i for i in items if i["lang"] == "en"], [i for i in items if i["lang"] == "zh"]
    turns = [i for pair in zip(en, zh) for i in pair] + en[len(zh):] + zh[len(en):]
    return turns[:tasks]


def timing(seconds: list[float], started: float) -> dict:
    ordered = sorted(seconds) or [0.0]
    return {"reflect_p50_s": round(ordered[len(ordered) // 2], 1), "reflect_max_s": round(ordered[-1], 1),
            "reflect_total_s": round(sum(seconds)), "total_s": round(time.perf_counter() - started)}
