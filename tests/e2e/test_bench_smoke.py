"""The benchmarks still run against the current code (at a toy size; figures are not checked)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
BENCH = Path(__file__).resolve().parents[2] / "bench"


LOCOMO = BENCH.parent.parent / "shared" / "bench" / "locomo-dev.json"


@pytest.mark.skipif(not LOCOMO.exists(), reason="needs ../shared/bench beside the checkout, as CI has")
def test_foundation_benchmark_runs_end_to_end():
    out = subprocess.run([sys.executable, str(BENCH / "foundation.py"), "--memories", "65", "--queries", "2"],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "ratio write/embedding" in out.stdout and "ratio p50 search" in out.stdout


@pytest.mark.skipif(not LOCOMO.exists(), reason="needs ../shared/bench beside the checkout, as CI has")
def test_search_scale_benchmark_runs_end_to_end():
    out = subprocess.run([sys.executable, str(BENCH / "search_scale.py"), "--memories", "64", "--queries", "2"],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "ratio p50 search/floor" in out.stdout


@pytest.mark.skipif(not LOCOMO.exists(), reason="needs ../shared/bench beside the checkout, as CI has")
def test_search_scale_benchmark_runs_over_many_tenants():
    out = subprocess.run([sys.executable, str(BENCH / "search_scale.py"), "--memories", "600", "--tenants", "20",
                          "--queries", "5", "--bulk", "--embed-cap", "10", "--pick", "size"],
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "picked in proportion to their size" in out.stdout and "p50 / p95 ms by the queried tenant's" in out.stdout
    assert "memories: 600 written in 20 tenants" in out.stdout and "ratio p50 search/floor" in out.stdout
    assert "floor recall@10 against exact" in out.stdout
    assert "=== tenant t0019 (" in out.stdout and "=== tenant t0000 (" in out.stdout  # the smallest and the biggest


@pytest.mark.skipif(not LOCOMO.exists(), reason="needs ../shared/bench beside the checkout, as CI has")
def test_shared_scan_benchmark_runs_and_both_ways_answer_alike():
    out = subprocess.run([sys.executable, str(BENCH / "shared_scan.py"), "--memories", "300", "--queries", "3",
                          "--others", "30000"], capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:] + out.stdout[-3000:]
    assert "answers differing: 0; tenant walked: False" in out.stdout and "shared/apart: p50" in out.stdout
    assert "--- EXPLAIN shared" in out.stdout and "CTE Scan on shared0" in out.stdout


@pytest.mark.skipif(not LOCOMO.exists(), reason="needs ../shared/bench beside the checkout, as CI has")
def test_forget_benchmark_runs_end_to_end():
    out = subprocess.run([sys.executable, str(BENCH / "forget.py"), "--memories", "150", "--keep", "30", "--queries",
                          "3", "--embed-cap", "10", "--soft"], capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:] + out.stdout[-3000:]
    assert "hard: Forget via SDK" in out.stdout and "soft: Forget via SDK" in out.stdout
    assert "checks: OK" in out.stdout and "EXPLAIN ANALYZE of one batch" in out.stdout


def test_ingest_benchmark_runs_end_to_end():
    out = subprocess.run([sys.executable, str(BENCH / "ingest.py"), "--turns", "64", "--sustain", "3"],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "ratio indexed/embedding" in out.stdout and "backlog max (s of writes)" in out.stdout


def test_consolidate_stall_benchmark_runs_end_to_end():
    out = subprocess.run([sys.executable, str(BENCH / "consolidate_stall.py"), "--lessons", "60", "--rounds", "1",
                          "--idle", "10"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "GetStats during: p50" in out.stdout and "Consolidate(dry_run) over 60 lessons" in out.stdout
    assert "3 clusters, 60 members" in out.stdout  # topics of 20 lessons


def test_watch_streams_benchmark_runs_end_to_end():
    out = subprocess.run([sys.executable, str(BENCH / "watch_streams.py"), "--streams", "103", "--writes", "10"],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "opened 100; refused 3 RESOURCE_EXHAUSTED WATCH_STREAMS_PER_KEY" in out.stdout
    assert "events the watchers received (another tenant's writes): 0" in out.stdout


@pytest.mark.skipif(not LOCOMO.exists(), reason="needs ../shared/bench beside the checkout, as CI has")
def test_peers_benchmark_runs_beside_mem0_end_to_end():
    made = subprocess.run(["make", "peers"], cwd=BENCH.parent, capture_output=True, text=True, timeout=900)
    assert made.returncode == 0, made.stderr[-3000:]
    out = subprocess.run([sys.executable, str(BENCH / "peers.py"), "--turns", "60", "--queries", "3",
                          "--other-rows", "200", "--single", "3"], capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:] + out.stdout[-3000:]
    assert "Mem0 OSS search()" in out.stdout and "ratio search p50 Memplane/Mem0" in out.stdout
    assert "after 200 rows of another tenant" in out.stdout and "where Memplane's time goes" in out.stdout
    assert "--- channel Mem0 statement 1" in out.stdout


def test_background_budget_benchmark_runs_end_to_end():
    out = subprocess.run([sys.executable, str(BENCH / "background_budget.py"), "--turns", "96", "--probe", "3"],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "neighbour's embedding: idle" in out.stdout and "fully indexed / embedding alone" in out.stdout
