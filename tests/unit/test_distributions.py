"""The two distributions' dependencies (pyproject.toml and clients/python/pyproject.toml): the server
brings no web stack; the client's extras bring the tools theirs, and its console scripts name them."""
from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path

import pytest

from memplane._extras import EXTRA_MODULES

if sys.version_info >= (3, 11):
    import tomllib
else:  # pytest itself needs tomli before Python 3.11
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
SERVER = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
CLIENT = tomllib.loads((ROOT / "clients" / "python" / "pyproject.toml").read_text())["project"]
WEB_STACK = {"mcp", "starlette", "jinja2", "uvicorn", "sse-starlette", "python-multipart"}
PANEL = {"starlette", "jinja2", "uvicorn", "sse-starlette", "python-multipart"}
REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9._-]+)\s*(?:\[([^\]]*)\])?")


def brought(requirements: list[str]) -> set[str]:
    """The distributions the requirements name, the client's extras they ask for unfolded."""
    names = set()
    for requirement in requirements:
        name, extras = REQUIREMENT.match(requirement).groups()
        name = re.sub(r"[-_.]+", "-", name).lower()
        names.add(name)
        if name == CLIENT["name"]:
            names |= brought(CLIENT["dependencies"])
            for extra in filter(None, (e.strip() for e in (extras or "").split(","))):
                names |= brought(CLIENT["optional-dependencies"][extra])
    return names


def test_the_servers_dependencies_bring_none_of_the_web_stack():
    assert brought(SERVER["dependencies"]) & WEB_STACK == set()


def test_the_tools_extra_brings_the_whole_web_stack():
    assert brought(["memplane-client[tools]"]) >= WEB_STACK


def test_the_mcp_extra_brings_mcp_alone():
    assert brought(["memplane-client[mcp]"]) & WEB_STACK == {"mcp"}


def test_the_panel_extra_brings_the_panels_stack_alone():
    assert brought(["memplane-client[panel]"]) & WEB_STACK == PANEL


@pytest.mark.parametrize("extra", ["mcp", "panel"])
def test_the_missing_extra_hint_knows_the_modules_each_extra_installs(extra):
    installed = {name.replace("-", "_") for name in brought(CLIENT["optional-dependencies"][extra])}
    assert installed == EXTRA_MODULES[extra]


@pytest.mark.parametrize("script", ["memplane-mcp", "memplane-panel", "memplane-import-chats"])
def test_each_console_script_names_a_main(script):
    module, _, function = CLIENT["scripts"][script].partition(":")
    assert callable(getattr(importlib.import_module(module), function))
