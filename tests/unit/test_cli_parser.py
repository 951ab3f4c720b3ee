"""The `memplane` command line's parsing: each admin command takes its own flags (and no other
command's), and --target/--api-key before or after the command."""
from __future__ import annotations

import pytest

from memplane.chats.command import build_parser as build_import_chats_parser
from memplane_server.cli import CLIENT_TOOLS, build_parser, run_client_tool


def parse(*argv: str):
    return build_parser().parse_args(list(argv))


@pytest.mark.parametrize("argv", [
    ("admin", "--target", "h:1", "create-tenant", "--id", "acme"),
    ("admin", "create-tenant", "--id", "acme", "--target", "h:1"),
])
def test_target_is_taken_before_or_after_the_admin_command(argv):
    args = parse(*argv)
    assert (args.command, args.id, args.target) == ("create-tenant", "acme", "h:1")


def test_without_target_the_command_has_none():
    assert parse("admin", "list-tenants").target is None


@pytest.mark.parametrize("argv", [
    ("admin", "list-tenants", "--user", "u-1"),  # erase-user's flag
    ("admin", "create-tenant", "--tokens-per-day", "5"),  # token-budget's
    ("admin", "lifecycle", "scan"),  # content-policy's action
])
def test_a_flag_or_action_of_another_command_is_refused(argv, capsys):
    with pytest.raises(SystemExit) as exited:
        parse(*argv)
    assert exited.value.code == 2


def test_actions_and_flags_reach_their_command():
    args = parse("admin", "content-policy", "set", "--tenant", "acme", "--rule", "email=redact", "--rule", "secret=refuse")
    assert (args.action, args.tenant, args.rule) == ("set", "acme", ["email=redact", "secret=refuse"])
    args = parse("admin", "usage", "--csv", "--start-day", "2026-12-01")
    assert args.csv and args.start_day.isoformat() == "2026-12-01"


def documented_commands() -> list[str]:
    """Every `memplane admin` / `import-chats` command line in the README's and docs' code blocks."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    found = []
    for page in [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
        lines = page.read_text().splitlines()
        joined, inside = [], False
        for line in lines:
            if line.startswith("```"):
                inside = not inside
                continue
            if inside:
                if joined and joined[-1].endswith("\\"):
                    joined[-1] = joined[-1][:-1] + " " + line.strip()
                else:
                    joined.append(line)
        found += [line for line in joined if "memplane admin " in line or "memplane import-chats " in line]
    return found


@pytest.mark.parametrize("line", documented_commands())
def test_every_documented_command_line_parses(line):
    import shlex

    words = shlex.split(line.split(" # ")[0].split(" > ")[0], comments=True)
    start = next(i for i, w in enumerate(words) if w.endswith("memplane")) + 1
    if words[start] == "import-chats":  # the client's command, which parses its own arguments
        build_import_chats_parser().parse_args(words[start + 1:])
    else:
        parse(*words[start:])


def test_the_server_lists_the_client_tools_among_its_commands():
    listed = build_parser().format_help()
    assert all(name in listed for name in CLIENT_TOOLS)


@pytest.mark.parametrize("name", sorted(CLIENT_TOOLS))
def test_a_client_tools_arguments_are_parsed_by_the_client_under_the_servers_name(name, capsys):
    with pytest.raises(SystemExit) as exited:
        run_client_tool(name, ["--help"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: memplane {name}")
