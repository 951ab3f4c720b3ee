"""Where the real-model tests find the packaged model (scripts/install_local_model.py)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "install_local_model.py"


def installed_model() -> Path:
    """The model file; the test fails, saying how to install it, when it or the runtime is missing:
    `make test` installs both, so a skip here would hide a broken install step."""
    spec = importlib.util.spec_from_file_location("install_local_model", _SCRIPT)
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    path: Path = script.model_path()
    if importlib.util.find_spec("llama_cpp") is None or not path.is_file():
        pytest.fail(f"the local model runtime or {path} is missing: run `make test` or"
                    " `.venv/bin/python scripts/install_local_model.py`")
    return path
