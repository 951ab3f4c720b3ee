"""Every setting is documented in the README's settings table."""
from __future__ import annotations

from pathlib import Path

from memplane_server.settings import Settings

README = Path(__file__).resolve().parents[2] / "README.md"


def test_every_setting_is_in_the_readme_table():
    table = {line.split("`")[1] for line in README.read_text().splitlines() if line.startswith("| `MEMPLANE_")}
    assert {f"MEMPLANE_{name.upper()}" for name in Settings.model_fields} <= table
