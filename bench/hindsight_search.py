"""Hindsight benchmark, part (c): the LLM search stages with a real model, on LoCoMo dev.

    .venv/bin/python bench/hindsight_search.py [--questions 60] [--seed 0] [--threads 2] [--stage-timeout 60]
        [--digests llm|keyphrase|off] [--server-env NAME=VALUE ...] [--json out.json]
    .venv/bin/python bench/hindsight_search.py --server-env MEMPLANE_LLM_MODEL=openai/... \\
        --server-env MEMPLANE_LLM_API_BASE=... [--server-env MEMPLANE_LLM_API_KEY=...]

Recall (as quality.py counts it, per category, 5 apart) and latency (p50/p95 per search) of
- `baseline`: LLM-free search (the defaults);
- `rewrite`: + MEMPLANE_SEARCH_REWRITE (the model's rephrasings searched beside the query);
- `rerank`: + MEMPLANE_SEARCH_RERANK (the model orders the 30 best fused candidates);
- `digests`: + the session channel (weight 1, MEMPLANE_SESSION_TOP_SESSIONS 3) over digests the model
  wrote at ingest (MEMPLANE_SESSION_DIGEST_LLM); with `--digests keyphrase` over digests built
  without it (the comparison the model's digests are for), with `--digests off` not run at all.

One ingest serves every variant: LoCoMo dev is written through a real `memplane serve`
(foundation.py's `running_server`) as `search_variants.py --sessions` writes it (each session_N a
session of its own, the conversation the user_id the questions are filtered by), and the variants
take turns on each question in rotating order (search_variants.search_all, in process over one
Runtime), so a busy moment of the shared machine falls on all of them.

The model: by default the packaged local model (scripts/install_local_model.py, Qwen2.5-Coder-1.5B
Q4_K_M), started here once with embedded/model.py as `memplane serve` starts it for
MEMPLANE_LOCAL_MODEL (llama.cpp's server, nice 19, `--threads` threads) and handed to both the server
(which writes the digests with it) and this process (which searches with it) as a litellm model at
its address. With `--server-env MEMPLANE_LLM_MODEL=...` any litellm model serves instead (the
variables go to the server and to this process's settings alike).

Bounds, because a 1.5B model on 2 shared cores answers in seconds: `--questions N` is a fixed sample
(seeded, proportional to each category's share, categories 1-5) of LoCoMo dev's questions; the LLM
stages get `--stage-timeout` seconds (the server's default, MEMPLANE_SEARCH_LLM_TIMEOUT_SECONDS, is 5 s:
a stage that is slower is skipped and the search answers without it, which is also counted here and
shown by the latencies); digests cost one model call per session build, and there are 38 sessions
(a session written across two write batches may be built twice): the run prints how many digests the
model wrote and how long the ingest waited for them. The baseline also runs over every question
(LLM-free, cheap), to show how far the sample's figures are from the whole slice's.

Run every model run under `flock /tmp/memplane-model.lock` on a shared machine.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from foundation import TENANT, environment, running_server  # noqa: E402  (also sets the OMP environment)
from quality import CATEGORIES, write_all  # noqa: E402
from search_variants import locomo_items, pct, search_all  # noqa: E402

from memplane import MemoryClient  # noqa: E402
from memplane_server.embedded.model import LITELLM_MODEL, EmbeddedModel  # noqa: E402
from memplane_server.llm import query_rewrite, rerank  # noqa: E402
from memplane_server.settings import Settings  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from install_local_model import model_path  # noqa: E402  (a script beside bench/, not a package)

SEARCH_LOGGER = "memplane_server.services.search.service"


def variants(digests: str, timeout: float) -> dict[str, dict]:
    stage = {"search_llm_timeout_seconds": timeout}
    out = {"baseline": {}, "rewrite": {"search_rewrite": True, **stage}, "rerank": {"search_rerank": True, **stage}}
    if digests != "off":
        out["digests"] = {"session_weight": 1.0, "session_top_sessions": 3}
    return out


def sample(questions: list, n: int, seed: int) -> list:
    """n questions, each category's share as in the whole slice (largest remainders), drawn with `seed`."""
    if n <= 0 or n >= len(questions):
        return questions
    by_cat = defaultdict(list)
    for q in questions:
        by_cat[q[1]].append(q)
    quota = {c: n * len(qs) / len(questions) for c, qs in by_cat.items()}
    take = {c: int(v) for c, v in quota.items()}
    for c in sorted(quota, key=lambda c: (take[c] - quota[c], c))[:n - sum(take.values())]:
        take[c] += 1
    rng = random.Random(seed)
    picked = [q for c in sorted(by_cat) for q in rng.sample(by_cat[c], take[c])]
    rng.shuffle(picked)
    return picked


class StageFailures(logging.Handler):
    """Counts the search service's warnings (a stage that failed, timed out or answered malformed and
    was skipped) by variant and by their first words."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.current: str | None = None
        self.counts: dict[str, Counter] = defaultdict(Counter)

    def emit(self, record: logging.LogRecord) -> None:
        if self.current is not None:
            exc = record.args[0] if isinstance(record.args, tuple) and record.args else None
            what = type(exc).__name__ if isinstance(exc, BaseException) else ""
            self.counts[self.current][f"{record.getMessage().split(':')[0]} ({what})" if what else record.getMessage()[:100]] += 1



class Answers:
    """The model's raw answers to the rewrite and rerank prompts, by variant, in the order asked (the parse
    functions the stages call, wrapped), so a run shows what the model said, not only what recall did."""

    def __init__(self) -> None:
        self.current: str | None = None
        self.by_variant: dict[str, list[dict]] = defaultdict(list)
        for module, name in ((query_rewrite, "parse_rewrites"), (rerank, "parse_ranking")):
            setattr(module, name, self._wrap(getattr(module, name), name))

    def _wrap(self, parse, stage: str):
        def recorded(text, *args):
            if self.current is not None:
                self.by_variant[self.current].append({"stage": stage, "answer": text[:2000]})
            return parse(text, *args)
        return recorded


def summary(rows: list[dict]) -> dict:
    times = [r["ms"] for r in rows]
    out = {"n": len(rows), "p50_ms": round(statistics.median(times)), "p95_ms": round(pct(times, 95))}
    for cat in [1, 2, 3, 4, "1-4", 5]:
        sel = [r["recall"] for r in rows if r["category"] == cat or (cat == "1-4" and r["category"] in (1, 2, 3, 4))]
        if sel:
            out[str(cat)] = {"n": len(sel), **{f"R@{k}": round(statistics.fmean(r[k] for r in sel), 3) for k in (1, 5, 10)}}
    return out


def print_summary(name: str, figures: dict, failures: Counter | None = None) -> None:
    print(f"== {name}: search p50 {figures['p50_ms']} ms, p95 {figures['p95_ms']} ms ({figures['n']} searches)")
    for cat in ["1", "2", "3", "4", "1-4", "5"]:
        if cat in figures:
            f = figures[cat]
            label = CATEGORIES.get(int(cat), "") if cat.isdigit() else "overall"
            print(f"   {cat:4s}{label:12s} n={f['n']:3d}  R@1 {f['R@1']:.3f}  R@5 {f['R@5']:.3f}  R@10 {f['R@10']:.3f}")
    for reason, count in (failures or Counter()).most_common():
        print(f"   skipped ({count}x): {reason}")
    sys.stdout.flush()


async def digest_counts(dsn: str) -> tuple[int, int]:
    import asyncpg  # the owner's connection, as foundation.wait_for_keyword_stats reads

    conn = await asyncpg.connect(dsn)
    try:
        row = await conn.fetchrow("SELECT count(*) AS n, count(*) FILTER (WHERE written_by <> '') AS written"
                                  " FROM session_digests WHERE tenant_id = $1", TENANT)
        return row["n"], row["written"]
    finally:
        await conn.close()


def deadline(hhmm: str | None) -> float | None:
    if not hhmm:
        return None
    now = datetime.now(timezone.utc)
    hour, minute = (int(x) for x in hhmm.split(":"))
    at = now.replace(hour=hour, minute=minute, second=0, microsecond=0)
    return (at if at > now else at + timedelta(days=1)).timestamp()


@contextmanager
def chat_model(args):
    """The model both the server and this process use, as environment variables (Settings reads them)."""
    for pair in args.server_env:
        name, _, value = pair.partition("=")
        os.environ[name] = value
    if os.environ.get("MEMPLANE_LLM_MODEL"):
        yield os.environ["MEMPLANE_LLM_MODEL"]
        return
    model_file = model_path()
    if not model_file.is_file():
        sys.exit(f"{model_file} is missing: run scripts/install_local_model.py, or name a model with --server-env")
    folder = Path(tempfile.mkdtemp(prefix="memplane-hsearch-model-", dir="/tmp"))
    try:
        with EmbeddedModel(folder, model_file, threads=args.threads) as model:
            os.environ.update(MEMPLANE_LLM_MODEL=LITELLM_MODEL, MEMPLANE_LLM_API_BASE=model.api_base or "",
                              MEMPLANE_LLM_API_KEY=model.api_key, MEMPLANE_LLM_STRUCTURED_OUTPUT="json_object_schema")
            yield f"{model_file.name} ({args.threads} threads, local)"
    finally:
        for name in ("MEMPLANE_LLM_MODEL", "MEMPLANE_LLM_API_BASE", "MEMPLANE_LLM_API_KEY"):
            os.environ.pop(name, None)
        shutil.rmtree(folder, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--questions", type=int, default=60, help="a fixed sample of this many questions (0: all 302)")
    ap.add_argument("--seed", type=int, default=0, help="the sample's seed")
    ap.add_argument("--threads", type=int, default=2, help="threads of the packaged local model")
    ap.add_argument("--stage-timeout", type=float, default=60.0,
                    help="MEMPLANE_SEARCH_LLM_TIMEOUT_SECONDS of the rewrite and rerank variants (server default 5)")
    ap.add_argument("--digests", choices=("llm", "keyphrase", "off"), default="llm",
                    help="what the digests variant's session digests are: written by the model at ingest, built"
                    " without it, or no digests variant")
    ap.add_argument("--server-env", action="append", default=[], metavar="NAME=VALUE",
                    help="an environment variable for the server and this process, e.g. MEMPLANE_LLM_MODEL=... (repeatable)")
    ap.add_argument("--until", help="UTC time (HH:MM) after which no further question is begun; the report covers"
                    " those searched by every variant (a bound for a shared machine)")
    ap.add_argument("--json", type=Path, help="also write the figures and every search's hits here")
    args = ap.parse_args()
    if args.digests != "off":
        os.environ["MEMPLANE_SESSION_DIGESTS"] = "true"
        os.environ["MEMPLANE_SESSION_DIGEST_LLM"] = "true" if args.digests == "llm" else "false"
    failures, answers = StageFailures(), Answers()
    logging.getLogger(SEARCH_LOGGER).addHandler(failures)

    @contextmanager
    def observe(name: str):
        failures.current = answers.current = name
        try:
            yield
        finally:
            failures.current = answers.current = None

    started = time.perf_counter()
    with chat_model(args) as model:
        items, questions = locomo_items(sessions=True)
        picked = sample(questions, args.questions, args.seed)
        cats = Counter(q[1] for q in picked)
        chosen = variants(args.digests, args.stage_timeout)
        print(f"hindsight (c) search stages: model {model}; {len(picked)} of {len(questions)} LoCoMo dev questions"
              f" (seed {args.seed}; by category {dict(sorted(cats.items()))}); digests {args.digests};"
              f" stage timeout {args.stage_timeout:g} s; {environment()}", flush=True)
        with running_server("memplane-hsearch-") as server, MemoryClient(server.address, server.key) as client:
            written, waited = write_all(client, items, server.dsn)
            digests, by_model = asyncio.run(digest_counts(server.dsn))
            print(f"ingest: {len(items)} turns written in {written:.0f} s, windows, digests and terms {waited:.0f} s"
                  f" more; {digests} session digests, {by_model} written by the model", flush=True)
            settings = Settings(database_url=server.dsn, redis_url=server.redis_url, bootstrap_tenant="", workers=0)
            full = asyncio.run(search_all(settings, server.dsn, server.redis_url, {"baseline": {}}, questions, True))
            rows = asyncio.run(search_all(settings, server.dsn, server.redis_url, chosen, picked, True,
                                          observe=observe, until=deadline(args.until)))
            searched = Counter(r["category"] for r in rows["baseline"])
            print(f"searched {len(rows['baseline'])} questions, by category {dict(sorted(searched.items()))}", flush=True)
    whole = summary(full["baseline"])
    print_summary(f"baseline over all {len(questions)} questions (LLM-free)", whole)
    figures = {name: summary(rows[name]) for name in chosen}
    for name, change in chosen.items():
        print_summary(f"{name} {change}", figures[name], failures.counts.get(name))
    total = round(time.perf_counter() - started)
    print(f"total {total} s")
    if args.json:
        args.json.write_text(json.dumps({
            "model": model, "questions": len(picked), "searched": len(rows["baseline"]), "seed": args.seed, "stage_timeout_s": args.stage_timeout,
            "digests": {"kind": args.digests, "count": digests, "by_model": by_model, "ingest_wait_s": round(waited)},
            "variants": chosen, "figures": figures, "baseline_all": whole,
            "skipped": {k: dict(v) for k, v in failures.counts.items()}, "rows": rows,
            "answers": answers.by_variant, "total_s": total,
            "environment": environment()}, ensure_ascii=False, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
