"""The documentation: links that resolve, a generated settings page, a README that fits one screen."""
from __future__ import annotations

import dataclasses
import importlib.util
import re
from pathlib import Path

import pytest

from memplane.tool_settings import ToolSettings
from memplane_server.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted(
    [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), ROOT / "bench" / "README.md"]
    + ([ROOT / "examples" / "README.md"] if (ROOT / "examples" / "README.md").exists() else [])
)
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)
ISSUE_NUMBER = re.compile(r"\bissues?\s+#?\d+", re.I)


def _load_generator():
    spec = importlib.util.spec_from_file_location("gen_settings_doc", ROOT / "scripts" / "gen_settings_doc.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _slug(heading: str) -> str:
    # GitHub's anchors: inline code and links keep only their text, then lowercase, drop
    # punctuation but hyphens and underscores, spaces become hyphens.
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    anchors = set()
    for heading in HEADING.findall(FENCE.sub("", page.read_text(encoding="utf-8"))):
        slug = _slug(heading)
        anchors.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return anchors


def _links(page: Path) -> list[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return [a or b for a, b in LINK.findall(text)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    broken = []
    for target in _links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(target)
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
            broken.append(target)
    assert broken == []


def test_the_anchor_slug_follows_github():
    assert _slug("3. The API (package `memplane.v1`)") == "3-the-api-package-memplanev1"


def test_settings_page_is_what_the_script_renders():
    assert (ROOT / "docs" / "settings.md").read_text(encoding="utf-8") == _load_generator().render()


def test_every_setting_has_a_description():
    assert [name for name, info in Settings.model_fields.items() if not (info.description or "").strip()] == []
    assert [f.name for f in dataclasses.fields(ToolSettings) if not f.metadata["description"].strip()] == []


def test_readme_fits_under_12_kb():
    assert len((ROOT / "README.md").read_bytes()) < 12 * 1024


@pytest.mark.parametrize("page", [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_no_page_cites_an_issue_number(page):
    assert ISSUE_NUMBER.findall(page.read_text(encoding="utf-8")) == []


def test_every_error_reason_the_examples_and_docs_name_is_one_the_server_sends():
    # A reason is written in brackets after a gRPC code: "UNAUTHENTICATED [INVALID_API_KEY]".
    texts = [*PAGES, *(ROOT / "examples").glob("*.py")]
    named = {m for path in texts for m in re.findall(r"\b[A-Z_]{5,} \[([A-Z][A-Z_]+)\]", path.read_text())}
    server_code = "\n".join(p.read_text() for p in (ROOT / "server" / "memplane_server").rglob("*.py"))
    assert named and {r for r in named if f'"{r}"' not in server_code} == set()
