"""bench/load.py still runs against the current code (a few seconds, a tiny table; figures are not checked)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
BENCH = Path(__file__).resolve().parents[2] / "bench"
LOCOMO = BENCH.parent.parent / "shared" / "bench" / "locomo-dev.json"


@pytest.mark.skipif(not LOCOMO.exists(), reason="needs ../shared/bench beside the checkout, as CI has")
def test_load_benchmark_runs_and_stops_by_itself(tmp_path):
    report = tmp_path / "load.json"
    out = subprocess.run(
        [sys.executable, str(BENCH / "load.py"), "--duration", "6", "--interval", "3", "--rows", "60",
         "--warmup", "1", "--sample", "1", "--json", str(report)],
        capture_output=True, text=True, timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "ratio last/first" in out.stdout and "RSS MB" in out.stdout
    assert report.exists()
