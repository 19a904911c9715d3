"""`herdr --machine <selector> …` and `herdr machine …` (0.9): which commands are forwarded; the saved machines themselves
are herdr_sim/machines.py."""

from __future__ import annotations

import sys

from herdr_sim import help as helptext, machines
from herdr_sim.paths import resolve_home


def machine_prefix(args: list[str]) -> tuple[str, list[str]] | str | None:
    """herdr 0.9.1's `--machine <selector>` before the command (0.9 DELTA, multi-machine: src/cli/target.rs at
    b04bda09): (selector, the command's args), an exit-2 error line, or None when there is no prefix."""
    machine: str | None = None
    other = False
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--machine" or arg.startswith("--machine="):
            if machine is not None:
                return "--machine can only be specified once"
            if arg.startswith("--machine="):
                value = arg.split("=", 1)[1]
            elif i + 1 < len(args):
                i += 1
                value = args[i]
            else:
                return "missing value for --machine"
            if not value.strip() or value.startswith("-"):
                return "--machine requires a saved machine label or profile ID"
            machine = value
        elif arg.startswith("-") and arg != "--":
            other = True
            if arg in ("--session", "--remote", "--remote-keybindings"):
                i += 1  # their value is not the command
        else:
            break
        i += 1
    if machine is None:
        return None
    if other:
        return "--machine cannot be combined with other launch options; it uses the saved machine's session"
    if i >= len(args) or args[i] == "--":
        return "usage: herdr --machine <label-or-id> <command>"
    return machine, args[i:]


# What `--machine` forwards: the API-backed commands (0.9 DELTA, "What is forwarded").
_FORWARDED = {"workspace": None, "worktree": None, "tab": None, "pane": None, "notification": None, "api": ("snapshot",),
              "status": ("server",), "plugin": ("link", "unlink", "enable", "disable", "list", "action", "log", "logs", "pane"),
              "server": ("stop", "reload-config", "agent-manifests", "reload-agent-manifests")}


def machine_command(selector: str, args: list[str]) -> int:
    """A `--machine` call: the command must be one herdr forwards; then the selector must name a saved machine, whose
    simulated server runs it (herdr_sim/machines.py)."""
    command = args[0]
    sub = args[1] if len(args) > 1 else ""
    if command == "agent":
        forwarded = sub != "attach" and not (sub == "explain" and any(a == "--file" or a.startswith("--file=") for a in args[2:]))
    else:
        subs = _FORWARDED.get(command, ())
        forwarded = command in _FORWARDED and (subs is None or sub in subs)
    if not forwarded:
        print(f"error: `{command} {sub}` is not an API-backed machine command; --machine does not run local management "
              "commands or attach a TUI", file=sys.stderr)
        return 2
    long_help = helptext.requested_help(args)
    if long_help is not None:
        print(long_help, end="")
        return 0
    return machines.forward(resolve_home(), selector, args)


def machine_local(args: list[str]) -> int:
    """`herdr machine list|add|status|reconnect` (0.9.0; status and reconnect 0.9.2, 0.9.5 DELTA rows 4-5): local
    commands over this client's saved machine profiles (herdr_sim/machines.py)."""
    return machines.local(resolve_home(), args)
