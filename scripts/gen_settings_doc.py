"""Renders docs/settings.md from the server's Settings class (server/memplane_server/settings.py)
and the client tools' ToolSettings (clients/python/memplane/tool_settings.py).

Each field is one MEMPLANE_<FIELD> variable: its type and bounds, its default and its description,
the server's grouped by the blank-line sections of the class. The prose around the tables is
hand-written in scripts/settings_doc_template.md, whose SETTINGS_TABLE line the server's tables
replace and whose CLIENT_SETTINGS_TABLE line the client tools' table.
Run with --check to fail (exit 1) when the committed page differs from what would be rendered,
which the tests do so that the page never drifts from the code.
"""
from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import json
import re
import sys
import types
import typing
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The settings of this checkout, not of whichever memplane_server or memplane is installed.
sys.path[:0] = [str(ROOT / "server"), str(ROOT / "clients" / "python")]

from annotated_types import Ge, Gt, Le, Lt  # noqa: E402
from pydantic import SecretStr  # noqa: E402
from pydantic.fields import FieldInfo  # noqa: E402

from memplane.tool_settings import ToolSettings  # noqa: E402
from memplane_server.settings import Settings  # noqa: E402

OUTPUT = ROOT / "docs" / "settings.md"
TEMPLATE = Path(__file__).resolve().parent / "settings_doc_template.md"
PLACEHOLDER = "SETTINGS_TABLE"
CLIENT_PLACEHOLDER = "CLIENT_SETTINGS_TABLE"

# The class groups its fields by blank lines; each group is named here by its first field.
SECTIONS = {
    "listen": "Server, databases and backups",
    "embedding_model": "Embedding",
    "llm_model": "LLM",
    "max_content_bytes": "Input limits and search",
    "max_memories_per_tenant": "Quotas and rate limits",
    "working_ttl_seconds": "Working memory, Watch and memory thresholds",
    "workers": "Background work, shutdown and telemetry",
}

_TYPE_NAMES = {str: "string", int: "integer", float: "number", bool: "boolean", Path: "path", SecretStr: "secret"}


def sections() -> list[tuple[str, list[str]]]:
    """The class's fields in declaration order, split where a blank line separates two of them."""
    source = inspect.getsource(Settings)
    lines = source.splitlines()
    (cls,) = ast.parse(source).body
    groups: list[tuple[str, list[str]]] = []
    previous_end = None
    for node in cls.body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        name = node.target.id
        if name not in Settings.model_fields:
            continue
        if previous_end is None or any(not line.strip() for line in lines[previous_end:node.lineno - 1]):
            if name not in SECTIONS:
                raise SystemExit(f"name the settings section that starts at `{name}` in SECTIONS of {__file__}")
            groups.append((SECTIONS[name], []))
        groups[-1][1].append(name)
        previous_end = node.end_lineno
    return groups


def render_type(info: FieldInfo) -> str:
    annotation = info.annotation
    args = typing.get_args(annotation)
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        annotation = next(arg for arg in args if arg is not type(None))
    if typing.get_origin(annotation) is dict:
        text = f"JSON object of {_TYPE_NAMES[typing.get_args(annotation)[1]]}s"
    else:
        text = _TYPE_NAMES[annotation]
    bounds = []
    for item in info.metadata:
        for kind, attribute, sign in ((Ge, "ge", "≥"), (Gt, "gt", ">"), (Le, "le", "≤"), (Lt, "lt", "<")):
            if isinstance(item, kind):
                bounds.append(f"{sign} {render_value(getattr(item, attribute))}")
        pattern = getattr(item, "pattern", None)
        if pattern is None:
            continue
        choices = re.fullmatch(r"\^\(([\w|-]+)\)\$", pattern)
        if choices:
            bounds.append("one of " + ", ".join(f"`{choice}`" for choice in choices.group(1).split("|")))
        elif pattern == r"^.*:\d+$":
            bounds.append("host:port")
        else:
            bounds.append(f"matching `{pattern}`")
    return ", ".join([text, *bounds])


def render_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def render_default(info: FieldInfo) -> str:
    if info.default_factory is not None:
        # A named function computes the default from the machine (the description says how);
        # a lambda or a type only builds a fresh literal.
        if info.default_factory.__name__ not in ("<lambda>", "dict", "list"):
            return "computed"
        return f"`{render_value(info.default_factory())}`"
    if info.default is None:
        return "unset"
    if info.default == "":
        return "empty"
    return f"`{render_value(info.default)}`"


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


HEADER = ["| variable | type | default | meaning |", "|---|---|---|---|"]


def row(name: str, kind: str, default: str, description: str) -> str:
    return f"| `MEMPLANE_{name.upper()}` | {cell(kind)} | {cell(default)} | {cell(description)} |"


def server_tables() -> str:
    parts = []
    for title, names in sections():
        rows = [row(name, render_type(info), render_default(info), info.description or "")
                for name in names for info in [Settings.model_fields[name]]]
        parts.append(f"## {title}\n\n" + "\n".join(HEADER + rows))
    return "\n\n".join(parts)


def client_table() -> str:
    """ToolSettings is a plain dataclass (the client distribution takes no pydantic): its fields are
    strings, and their metadata says which are secrets or host:port."""
    rows = []
    for setting in dataclasses.fields(ToolSettings):
        meta = setting.metadata
        kind = "secret" if meta["secret"] else ", ".join(["string"] + ["host:port"] * meta["host_port"])
        default = "unset" if setting.default is None else f"`{setting.default}`"
        rows.append(row(setting.name, kind, default, meta["description"]))
    return "\n".join(HEADER + rows)


def render() -> str:
    text = TEMPLATE.read_text(encoding="utf-8")
    for placeholder, tables in ((PLACEHOLDER, server_tables()), (CLIENT_PLACEHOLDER, client_table())):
        if text.count(f"\n{placeholder}\n") != 1:
            raise SystemExit(f"{TEMPLATE} must hold one line {placeholder} where its tables go")
        text = text.replace(f"\n{placeholder}\n", f"\n{tables}\n")
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="fail if docs/settings.md is stale")
    args = parser.parse_args()
    fresh = render()
    current = OUTPUT.read_text(encoding="utf-8") if OUTPUT.exists() else None
    if args.check:
        if fresh != current:
            print("docs/settings.md is stale; run scripts/gen_settings_doc.py", file=sys.stderr)
            return 1
        return 0
    if fresh != current:
        OUTPUT.write_text(fresh, encoding="utf-8")
    count = len(Settings.model_fields) + len(dataclasses.fields(ToolSettings))
    print(f"docs/settings.md: {count} settings, {'changed' if fresh != current else 'unchanged'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
