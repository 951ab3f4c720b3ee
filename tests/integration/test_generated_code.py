"""The committed protobuf/gRPC modules must be exactly what scripts/gen_proto.py makes from proto/."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_generated_code_is_current():
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_proto.py"), "--check"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
