"""Help and usage texts printed by the simulated CLI, matching herdr 0.7.5's wording."""

from __future__ import annotations

from herdr_sim.procs import KINDS

GROUPS: dict[str, list[str]] = {
    "workspace": [
        "herdr workspace commands:",
        "  herdr workspace list",
        "  herdr workspace create [--cwd PATH] [--label TEXT] [--env KEY=VALUE] [--focus] [--no-focus]",
        "  herdr workspace get <workspace_id>",
        "  herdr workspace focus <workspace_id>",
        "  herdr workspace rename <workspace_id> <label>",
        "  herdr workspace close <workspace_id>",
    ],
    "tab": [
        "herdr tab commands:",
        "  herdr tab list [--workspace <workspace_id>]",
        "  herdr tab create [--workspace <workspace_id>] [--cwd PATH] [--label TEXT] [--env KEY=VALUE] [--focus]"
        " [--no-focus]",
        "  herdr tab get <tab_id>",
        "  herdr tab focus <tab_id>",
        "  herdr tab rename <tab_id> <label>",
        "  herdr tab close <tab_id>",
    ],
    "pane": [
        "herdr pane commands:",
        "  herdr pane list [--workspace <workspace_id>]",
        "  herdr pane current [--pane ID|--current]",
        "  herdr pane get <pane_id>",
        "  herdr pane layout [--pane ID|--current]",
        "  herdr pane rename <pane_id> <label>|--clear",
        "  herdr pane read <pane_id> [--source visible|recent|recent-unwrapped] [--lines N] [--format text|ansi]"
        " [--ansi]",
        "  herdr pane split [<pane_id>|--pane ID|--current] --direction right|down [--ratio FLOAT] [--cwd PATH]"
        " [--env KEY=VALUE] [--focus] [--no-focus]",
        "  herdr pane move <pane_id> --tab <tab_id> --split right|down [--target-pane ID] [--ratio FLOAT]"
        " [--focus|--no-focus]",
        "  herdr pane move <pane_id> --new-tab [--workspace ID] [--label TEXT] [--focus|--no-focus]",
        "  herdr pane move <pane_id> --new-workspace [--label TEXT] [--tab-label TEXT] [--focus|--no-focus]",
        "  herdr pane close <pane_id>",
        "  herdr pane send-text <pane_id> <text>",
        "  herdr pane send-keys <pane_id> <key> [key ...]",
        "  herdr pane wait-output <pane_id> (--match TEXT | --regex PATTERN) [--source visible|recent|recent-unwrapped]"
        " [--lines N] [--timeout MS] [--raw]",
        "  herdr pane report-agent <pane_id> --source ID --agent LABEL --state idle|working|blocked|unknown"
        " [--message TEXT] [--seq N] [--agent-session-id ID] [--agent-session-path PATH]",
        "  herdr pane release-agent <pane_id> --source ID --agent LABEL [--seq N]",
        "  herdr pane run <pane_id> <command>",
    ],
    "agent": [
        "herdr agent commands:",
        "  herdr agent list",
        "  herdr agent get <target>",
        "  herdr agent read <target> [--source visible|recent|recent-unwrapped|detection] [--lines N]"
        " [--format text|ansi] [--ansi]",
        "  herdr agent send-keys <target> <key> [key ...]",
        "  herdr agent prompt <target> <text> [--wait] [--until STATUS]... [--timeout MS]",
        "  herdr agent rename <target> <name>|--clear",
        "  herdr agent focus <target>",
        "  herdr agent wait <target> [--until STATUS]... [--timeout MS]",
        "  herdr agent attach <target> [--takeover]",
        "  herdr agent start <name> --kind KIND --pane ID [--timeout MS] [-- <agent-args...>]",
        "  herdr agent explain <target> [--json|--format text|json] [--verbose]",
        "  herdr agent explain --file PATH --agent LABEL [--json|--format text|json] [--verbose]",
        "  targets accept unique agent names and pane ids that currently host agents",
        "  kinds: " + "|".join(KINDS),
    ],
    "worktree": [
        "herdr worktree commands:",
        "  herdr worktree list [--workspace ID | --cwd PATH] [--json]",
        "  herdr worktree create [--workspace ID | --cwd PATH] [--branch NAME] [--base REF] [--path PATH]"
        " [--label TEXT] [--focus] [--no-focus] [--json]",
        "  herdr worktree open [--workspace ID | --cwd PATH] (--path PATH | --branch NAME) [--label TEXT] [--focus]"
        " [--no-focus] [--json]",
        "  herdr worktree remove --workspace ID [--force] [--json]",
    ],
    "api": [
        "herdr api commands:",
        "  herdr api schema [--json]",
    ],
    "session": [
        "herdr session commands:",
        "  herdr session list [--json]",
    ],
    "integration": [
        "herdr integration commands:",
        "  herdr integration status [--outdated-only]",
    ],
}

_MAIN = """herdr — terminal workspace manager for AI coding agents

Usage:
  herdr [options]
  herdr --session <name> [options]
  herdr --remote <target> [options]
  herdr session attach <name>
  herdr workspace <subcommand> ...
  herdr tab <subcommand> ...
  herdr pane <subcommand> ...
  herdr agent <subcommand> ...
  herdr worktree <subcommand> ...
  herdr session <subcommand> ...
  herdr integration <subcommand> ...
  herdr api <subcommand> ...
  herdr status [server|client] [--json]

Common commands:
  herdr workspace list      list workspaces
  herdr pane list           list panes
  herdr agent list          list agents
  herdr agent start         start an agent in a shell pane
  herdr agent prompt        send a prompt to an agent
  herdr worktree create     create a git worktree workspace
  herdr status              show client and server status

Advanced commands:
  herdr server              run a headless server in the foreground

Options:
{no_session}  --session <name>          use a named session
  --remote <target>         attach to a remote herdr
  --remote-keybindings      use remote keybindings
  --handoff                 hand off a running session
  --default-config          print the default config
  --version, -V             print version
  --help, -h                print help

Config: ~/.config/herdr/config.toml
Logs: ~/.config/herdr/herdr.log
Env: HERDR_SESSION, HERDR_SOCKET_PATH

Home: https://herdr.dev
"""


def group_help(group: str) -> str:
    """The group's help text (printed on stderr)."""
    return "\n".join(GROUPS[group]) + "\n"


TOP_USAGE = {"status": "herdr status [server|client] [--json]", "server": "herdr server [--session NAME]"}


def subcommands(group: str) -> list[str]:
    """The subcommand words a group's help lists."""
    words = []
    for line in GROUPS[group][1:]:
        parts = line.split()
        if len(parts) >= 3 and parts[0] == "herdr" and parts[2] not in words:
            words.append(parts[2])
    return words


def requested_help(args: list[str]) -> str | None:
    """src/cli/spec.rs write_requested_help: `--help`/`-h` directly after a known command path → its long help."""
    index = next((i for i, a in enumerate(args) if a in ("--help", "-h")), None)
    if index is None or index < 1 or "--" in args[:index]:
        return None
    top = args[0]
    if top in TOP_USAGE and index == 1:
        return f"Usage: {TOP_USAGE[top]}\n"
    if top not in GROUPS:
        return None
    path = [top] + ([args[1]] if index >= 2 and args[1] in subcommands(top) else [])
    if index != len(path):
        return None
    if len(path) == 1:
        return group_help(top)
    lines = [line.strip() for line in GROUPS[top][1:] if line.split()[2:3] == [path[1]]]
    return "Usage: " + "\n       ".join(lines) + "\n"


def main_help(no_session: bool) -> str:
    """`herdr --help`; `--no-session` is listed only by the releases that have it (0.9 DELTA row 10)."""
    return _MAIN.replace("{no_session}", "  --no-session              run without a persistent session\n" if no_session else "")
