"""A wing's dependencies are filled from the whole by name, and its settings are a view that answers
only the names its Protocol declares; every name a view declares is a setting."""
from __future__ import annotations

import ast
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import pytest

import memplane_server
from memplane_server.services.deps import SettingsView, narrowed
from memplane_server.settings import Settings


class Reads(Protocol):
    max_batch: int


@dataclass(frozen=True)
class Wing:
    settings: Reads
    clock: object


class Whole:
    settings = Settings(bootstrap_tenant="")
    clock = object()
    memories = object()


def test_a_view_answers_the_settings_its_protocol_names():
    assert SettingsView(Settings(max_batch=7, bootstrap_tenant=""), Reads).max_batch == 7


def test_a_view_refuses_a_setting_its_protocol_does_not_name():
    with pytest.raises(AttributeError, match="max_query_bytes"):
        _ = SettingsView(Settings(bootstrap_tenant=""), Reads).max_query_bytes


def test_narrowed_takes_each_field_by_name_and_the_settings_as_a_view():
    whole = Whole()
    wing = narrowed(Wing, whole)  # type: ignore[arg-type]
    assert wing.clock is whole.clock and isinstance(wing.settings, SettingsView)
    assert not hasattr(wing, "memories")


def _setting_views() -> list[tuple[str, str, type]]:
    """Every Protocol named *Settings in services/, with its module."""
    found = []
    for path in (Path(memplane_server.__file__).parent / "services").rglob("*.py"):
        module = ".".join(path.relative_to(Path(memplane_server.__file__).parent.parent).with_suffix("").parts)
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef) and node.name.endswith("Settings") and any(
                    ast.unparse(b) == "Protocol" for b in node.bases):
                found.append((module, node.name, getattr(__import__(module, fromlist=[node.name]), node.name)))
    return sorted(found, key=lambda f: (f[0], f[1]))


@pytest.mark.parametrize("module,name,view", _setting_views(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_name_a_wing_reads_is_a_setting(module, name, view):
    assert set(typing.get_type_hints(view)) <= set(Settings.model_fields), f"{module}.{name}"


def test_the_wings_declare_their_settings():
    assert {name for _, name, _ in _setting_views()} >= {"SearchSettings", "WriteSettings", "ReflectionSettings",
                                                         "ForgetSettings", "WatchSettings"}
