"""The client tools' settings (memplane.tool_settings): MEMPLANE_* variables read without the server."""
from __future__ import annotations

import pytest

from memplane.tool_settings import DEFAULT_ADDRESS, ToolSettings


def test_defaults_without_environment():
    s = ToolSettings.from_environment({})
    assert (s.address, s.api_key, s.agent_id) == (DEFAULT_ADDRESS, None, None)
    assert (s.mcp_listen, s.panel_listen) == ("127.0.0.1:8765", "127.0.0.1:8766")


def test_reads_the_memplane_variables():
    s = ToolSettings.from_environment({
        "MEMPLANE_ADDRESS": "memplane:50051", "MEMPLANE_API_KEY": "mpk_x", "MEMPLANE_AGENT_ID": "bot",
        "MEMPLANE_MCP_LISTEN": "0.0.0.0:9000", "MEMPLANE_PANEL_LISTEN": "[::1]:9001"})
    assert (s.address, s.api_key, s.agent_id, s.mcp_listen, s.panel_listen) == (
        "memplane:50051", "mpk_x", "bot", "0.0.0.0:9000", "[::1]:9001")


def test_without_an_address_the_tools_call_the_servers_listen_address():
    assert ToolSettings.from_environment({"MEMPLANE_LISTEN": "0.0.0.0:6000"}).address == "0.0.0.0:6000"


def test_an_address_wins_over_the_listen_address():
    environ = {"MEMPLANE_LISTEN": "0.0.0.0:6000", "MEMPLANE_ADDRESS": "memplane:50051"}
    assert ToolSettings.from_environment(environ).address == "memplane:50051"


def test_an_empty_variable_counts_as_unset():
    s = ToolSettings.from_environment({"MEMPLANE_ADDRESS": "", "MEMPLANE_API_KEY": "", "MEMPLANE_LISTEN": "h:1"})
    assert (s.address, s.api_key) == ("h:1", None)


def test_variable_names_are_case_insensitive():
    assert ToolSettings.from_environment({"memplane_api_key": "mpk_x"}).api_key == "mpk_x"


def test_unknown_variables_are_ignored():
    assert ToolSettings.from_environment({"MEMPLANE_DATABASE_URL": "postgresql://db"}) == ToolSettings()


@pytest.mark.parametrize("name", ["MEMPLANE_MCP_LISTEN", "MEMPLANE_PANEL_LISTEN"])
def test_a_listen_address_without_a_port_is_refused_by_name(name):
    with pytest.raises(ValueError, match=name):
        ToolSettings.from_environment({name: "localhost"})


def test_the_key_stays_out_of_the_settings_repr():
    assert "mpk_secret" not in repr(ToolSettings.from_environment({"MEMPLANE_API_KEY": "mpk_secret"}))
