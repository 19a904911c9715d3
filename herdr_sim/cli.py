"""The `herdr-sim` command: herdr 0.7.5's CLI grammar, envelopes, streams and exit codes, plus server and faults.

This module parses the global flags and dispatches; each herdr noun's commands live in `herdr_sim/commands/<noun>.py`
(mixed into `Cli`), what they share in `herdr_sim/commands/base.py`.
"""

from __future__ import annotations

import os
import sys

# Only light modules at import time: --version, --help and usage errors never load the state or the engine.
from herdr_sim import help as helptext, versions
from herdr_sim.commands.agent import AgentCommands
from herdr_sim.commands.api import ApiCommands
from herdr_sim.commands.base import CliBase, Custom, Usage
from herdr_sim.commands.fault import FaultCommands
from herdr_sim.commands.integration import IntegrationCommands
from herdr_sim.commands.machine import machine_command, machine_local, machine_prefix
from herdr_sim.commands.pane import PaneCommands
from herdr_sim.commands.session import SessionCommands
from herdr_sim.commands.tab import TabCommands
from herdr_sim.commands.workspace import WorkspaceCommands
from herdr_sim.commands.worktree import WorktreeCommands
from herdr_sim.ids import SESSION_RE

__all__ = ["Cli", "main", "machine_prefix", "split_global_flags"]


def split_global_flags(args: list[str]) -> tuple[list[str], str | None, str | None]:
    """herdr's argv cleaning before any subcommand parser (src/session.rs:54-78, src/remote.rs:39-119).

    Returns (cleaned args, the last --session value or None, an exit-2 error line or None). Both scans stop at
    `--`; `--handoff` without `--remote` moves to the end; `--remote` with a subcommand is refused by main.rs:472-485.
    """
    cleaned: list[str] = []
    session: str | None = None
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            cleaned += args[i:]
            break
        if arg == "--session":
            if i + 1 >= len(args):
                return cleaned, session, "missing value for --session"
            session, i = args[i + 1], i + 2
            continue
        if arg.startswith("--session="):
            session, i = arg.split("=", 1)[1], i + 1
            continue
        cleaned.append(arg)
        i += 1
    out: list[str] = []
    remote: str | None = None
    keybindings = handoff = False
    i = 0
    while i < len(cleaned):
        arg = cleaned[i]
        if arg == "--":
            out += cleaned[i:]
            break
        if arg == "--handoff":
            handoff, i = True, i + 1
            continue
        name, eq, inline = arg.partition("=")
        if name in ("--remote", "--remote-keybindings"):
            if name == "--remote" and remote is not None or name == "--remote-keybindings" and keybindings:
                return out, session, f"{name} can only be specified once"
            if not eq:
                if i + 1 >= len(cleaned):
                    return out, session, f"missing value for {name}"
                inline, i = cleaned[i + 1], i + 2
            else:
                i += 1
            if name == "--remote":
                if not inline or inline.startswith("-"):
                    return out, session, "missing value for --remote" if not inline else "--remote target must not start with '-'"
                remote = inline
            else:
                keybindings = True
            continue
        out.append(arg)
        i += 1
    if remote is None and keybindings:
        return out, session, "--remote-keybindings requires --remote"
    if remote is None and handoff:
        out.append("--handoff")
    if remote is not None and out and not any(a in ("--help", "-h", "--version", "-V", "--default-config") for a in out):
        return out, session, "--remote can only be used with the default launch command"
    return out, session, None


class Cli(WorkspaceCommands, TabCommands, PaneCommands, AgentCommands, WorktreeCommands, SessionCommands,
          IntegrationCommands, ApiCommands, FaultCommands, CliBase):
    """One invocation: every noun's commands over the shared plumbing (`herdr_sim.commands.base.CliBase`)."""


GROUPS = ("workspace", "tab", "pane", "agent", "worktree")


def main(argv: list[str] | None = None) -> int:
    """Entry point of `herdr-sim` (and of `<home>/bin/herdr`)."""
    raw = list(sys.argv[1:] if argv is None else argv)
    try:
        profile = versions.current()
    except versions.UnknownVersion as exc:
        print(f"herdr-sim: {exc}", file=sys.stderr)
        return 2
    if profile.machine_prefix:
        routed = machine_prefix(raw)
        if isinstance(routed, str):
            print(f"error: {routed}", file=sys.stderr)
            return 2
        if routed is not None:
            return machine_command(*routed)
    args, requested, refused = split_global_flags(raw)
    if refused is not None:
        print(f"error: {refused}\nrun 'herdr --help' for usage", file=sys.stderr)
        return 2
    # src/session.rs:80-92: --session is validated; HERDR_SESSION only when HERDR_SOCKET_PATH does not override it.
    check = requested if requested is not None else (
        None if os.environ.get("HERDR_SOCKET_PATH") else os.environ.get("HERDR_SESSION"))
    if check is not None and (not SESSION_RE.match(check) or check in (".", "..")):
        print(f"error: invalid session name: {check}\nrun 'herdr --help' for usage", file=sys.stderr)
        return 2
    name = requested if requested is not None else os.environ.get("HERDR_SESSION")
    session = name if name and name != "default" and SESSION_RE.match(name) and name not in (".", "..") else None
    if not args:
        print("herdr-sim: the interactive TUI is not simulated; use a subcommand", file=sys.stderr)
        return 2
    top, rest = args[0], args[1:]
    if top in ("--version", "-V"):
        print(f"herdr {profile.version}")
        return 0
    if top in ("--help", "-h"):
        print(helptext.main_help(profile.no_session_launch), end="")
        return 0
    if top.startswith("-") and top != "--":
        # src/main.rs:750-769: a launch option starts the TUI; any other option is refused (0.9 removed --no-session).
        if top in ("--handoff", "--default-config") or (top == "--no-session" and profile.no_session_launch):
            print("herdr-sim: the interactive TUI is not simulated; use a subcommand", file=sys.stderr)
            return 2
        print(f"unknown option: {top}\nrun 'herdr --help' for usage", file=sys.stderr)
        return 2
    long_help = helptext.requested_help(args)
    if long_help is not None:
        print(long_help, end="")  # clap prints it before any dispatch (src/cli.rs:76-78)
        return 0
    cli = Cli(session, explicit=requested is not None)
    try:
        if top == "server":
            from herdr_sim import server
            if rest == ["stop"]:
                return server.stop_server(cli.paths)
            if rest:
                raise Usage("usage: herdr-sim server [--session NAME] | herdr-sim server stop")
            return server.serve(cli.paths, session)
        if top == "status":
            return cli.status(rest)
        if top == "machine" and profile.machine_status:
            return machine_local(rest)
        if top in ("session", "integration", "api", "fault", *GROUPS):
            if not rest:
                if top == "fault":
                    raise Usage("usage: herdr-sim fault add|list|clear")
                return cli.group_help(top, "")
            sub, sub_args = rest[0], rest[1:]
            return int(getattr(cli, top)(sub, sub_args))
        print(f"unknown command: {top}\nrun 'herdr --help' for usage", file=sys.stderr)
        return 2
    except Usage as exc:
        print(str(exc), file=sys.stderr)
        return 2
    except Custom as exc:
        print(f'Error: Custom {{ kind: Other, error: "{exc}" }}', file=sys.stderr)
        return 1
    except SystemExit as exc:
        return int(exc.code or 0)
    except BrokenPipeError:
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
