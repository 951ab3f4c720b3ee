"""A tool run without its extra (memplane._extras): one line naming the pip command, exit status 2."""
from __future__ import annotations

import pytest

from memplane._extras import missing_extra


def test_a_missing_module_of_the_extra_is_a_one_line_install_hint_and_exit_2(capsys):
    assert missing_extra(ModuleNotFoundError("No module named 'jinja2'", name="jinja2"), "panel", "memplane panel") == 2
    message = capsys.readouterr().err
    assert message.count("\n") == 1 and message.startswith("memplane panel needs the 'panel' extra")
    assert "pip install 'memplane-client[panel]'" in message


def test_a_missing_submodule_of_the_extra_counts_as_the_extra():
    assert missing_extra(ModuleNotFoundError(name="mcp.server.mcpserver"), "mcp", "memplane mcp") == 2


def test_a_missing_module_outside_the_extra_is_raised_again():
    # Not the user's install but a fault of the tool: the traceback is what finds it.
    with pytest.raises(ModuleNotFoundError):
        missing_extra(ModuleNotFoundError(name="memplane.panel.no_such_module"), "panel", "memplane panel")
