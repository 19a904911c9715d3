"""Saved machines (herdr 0.9.0 `machine …`, 0.9.1 `--machine`, 0.9.2 `machine status`): profiles in the client's
state, and a simulated network deciding which SSH target reaches which simulated server.

herdr keeps saved SSH machines in the state of whoever runs the CLI, and `herdr --machine <selector> <command>` sends an
API command over non-interactive SSH to the profile's remote session (../shared/herdr-0.9.1/DELTA.md "Multi-machine").
The simulator plays the SSH hop with a network file (``$HERDR_SIM_NETWORK``, JSON ``{"targets": {TARGET: {"home":
SIM_HOME, "down": false}}}``): a target it lists reaches the simulated herdr whose home is ``home``; one it does not
list, or marks ``down``, is unreachable; ``"drop_after": ["worktree create"]`` drops the link once after the remote server
ran that command (its answer is lost); ``"down_at": ["worktree list"]`` takes the target down (``down`` set true in
the file, for ssh too) when that command arrives, before it runs (a command listed N times: at its Nth arrival, each
arrival taking one off the list): a host lost mid-run stays lost until a test brings it back. A forwarded command runs as that herdr's own client, in the profile's
session, without the caller's pane context (herdr drops it for a remote target), and its answer comes back unchanged.
herdr documents no JSON for `machine list` or `machine status`: the fields here are ours (id, label, ssh_target,
remote_session, enabled; status adds reachable and error).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from herdr_sim.paths import Paths

NETWORK_ENV = "HERDR_SIM_NETWORK"
USAGE = ("usage: herdr machine list [--json] | herdr machine add <ssh-target> [--label L] [--remote-session NAME] | "
         "herdr machine status [<label-or-id>] [--json] | herdr machine reconnect <label-or-id>")
# The caller's context: herdr never sends it to another machine (DELTA: "Local context is dropped").
_LOCAL_CONTEXT = ("HERDR_PANE_ID", "HERDR_TAB_ID", "HERDR_WORKSPACE_ID", "HERDR_SESSION", "HERDR_SOCKET_PATH", "HERDR_SIM_HOME", "HERDR_ENV")


def _file(home: Path) -> Path:
    return home / "machines.json"


def load(home: Path) -> list[dict[str, Any]]:
    """The saved machine profiles, in the order they were added."""
    try:
        return list(json.loads(_file(home).read_text())["machines"])
    except FileNotFoundError:
        return []


def _save(home: Path, machines: list[dict[str, Any]]) -> None:
    home.mkdir(parents=True, exist_ok=True)
    tmp = _file(home).with_suffix(".tmp")
    tmp.write_text(json.dumps({"machines": machines}, indent=2) + "\n")
    os.replace(tmp, _file(home))


def resolve(home: Path, selector: str) -> dict[str, Any] | str:
    """`resolve_machine`: an exact profile ID first, else a unique, case-sensitive label; else herdr's error line."""
    machines = load(home)
    by_id = [m for m in machines if m["id"] == selector]
    found = by_id or [m for m in machines if m["label"] == selector]
    if not found:
        return f"unknown machine '{selector}'; use `herdr machine list`"
    if len(found) > 1:
        return f"machine label '{selector}' is ambiguous; use its profile ID"
    if not found[0]["enabled"]:
        return f"machine '{selector}' is disabled"
    return found[0]


def targets() -> dict[str, Any]:
    """The simulated network's SSH targets (``$HERDR_SIM_NETWORK``), as saved machines and the stand-in `ssh` see them."""
    path = os.environ.get(NETWORK_ENV)
    return dict(json.loads(Path(path).read_text()).get("targets", {})) if path and Path(path).is_file() else {}


def _target(machine: dict[str, Any]) -> dict[str, Any] | str:
    """Where the simulated network takes this machine's SSH target, or why it cannot get there."""
    target = targets().get(machine["ssh_target"])
    if target is None:
        return f"ssh: Could not resolve hostname {machine['ssh_target']}: Name or service not known"
    if target.get("down"):
        return f"ssh: connect to host {machine['ssh_target']} port 22: Connection refused"
    remote = Paths(Path(target["home"]))
    if not remote.socket_for(machine["remote_session"]).exists():
        return "the remote herdr server is not running (forwarding never starts it)"
    return target


def _session(machine: dict[str, Any]) -> str | None:
    return None if machine["remote_session"] in (None, "", "default") else str(machine["remote_session"])


def forward(home: Path, selector: str, args: list[str]) -> int:
    """`herdr --machine SELECTOR <args>`: the command runs on the saved machine's server; its answer comes back as is."""
    machine = resolve(home, selector)
    if isinstance(machine, str):
        print(f"error: {machine}", file=sys.stderr)
        return 2
    _goes_down_at(machine["ssh_target"], args)
    target = _target(machine)
    if isinstance(target, str):
        # Never falls back to local, never retries (DELTA "Transport"); the outcome of a mutation is unknown to herdr too.
        print(f"error: machine '{machine['label']}' (session {machine['remote_session'] or 'default'}): {target}", file=sys.stderr)
        return 1
    remote = Paths(Path(target["home"]))
    session = _session(machine)
    env = {key: value for key, value in os.environ.items() if key not in _LOCAL_CONTEXT}
    env.update(HERDR_SIM_HOME=str(remote.home), HERDR_SOCKET_PATH=str(remote.socket_for(session)))
    if session is not None:
        env["HERDR_SESSION"] = session
    done = subprocess.run([sys.executable, "-m", "herdr_sim.cli", *args], env=env, capture_output=True, text=True, timeout=600)
    if _drops_after(machine["ssh_target"], args):
        # The link dropped after the remote server ran the command: its answer never arrives, as with a real ssh hop
        # cut mid-call; the caller cannot tell whether it ran (DELTA: "A connection failure does not prove a mutation
        # was not applied").
        print(f"error: machine '{machine['label']}' (session {machine['remote_session'] or 'default'}): "
              "ssh: Connection to the remote host closed by remote host", file=sys.stderr)
        return 1
    sys.stdout.write(done.stdout)
    sys.stderr.write(done.stderr)
    return done.returncode


def _drops_after(target: str, args: list[str]) -> bool:
    """Whether the network drops the link after this command (the target's ``drop_after``: command paths such as
    ``"worktree create"``, each dropping once and then taken off the list)."""
    path = os.environ.get(NETWORK_ENV)
    if not path or not Path(path).is_file():
        return False
    data = json.loads(Path(path).read_text())
    entry = data.get("targets", {}).get(target, {})
    drops = list(entry.get("drop_after", []))
    command = " ".join(args[:2])
    if command not in drops:
        return False
    drops.remove(command)
    entry["drop_after"] = drops
    Path(path).write_text(json.dumps(data))
    return True


def _goes_down_at(target: str, args: list[str]) -> None:
    """The target goes down for good when a command of its ``down_at`` list arrives (taken off the list) and was
    its last entry there: a command listed N times takes the target down at its Nth arrival."""
    path = os.environ.get(NETWORK_ENV)
    if not path or not Path(path).is_file():
        return
    data = json.loads(Path(path).read_text())
    entry = data.get("targets", {}).get(target, {})
    downs = list(entry.get("down_at", []))
    command = " ".join(args[:2])
    if command not in downs:
        return
    downs.remove(command)
    entry["down_at"] = downs
    if command not in downs:
        entry["down"] = True
    Path(path).write_text(json.dumps(data))


def _status(machine: dict[str, Any]) -> dict[str, Any]:
    target = _target(machine) if machine["enabled"] else "disabled"
    return {**machine, "reachable": not isinstance(target, str), "error": target if isinstance(target, str) else None}


def local(home: Path, args: list[str]) -> int:
    """`herdr machine list|add|status|reconnect` over this client's saved profiles."""
    sub, rest = (args[0], args[1:]) if args else ("", [])
    as_json = "--json" in rest
    words = [a for a in rest if a != "--json"]
    if sub == "add" and not as_json:
        return _add(home, words)
    unknown = next((a for a in words if a.startswith("-")), None)
    if unknown is not None:
        print(f"error: unexpected argument '{unknown}'", file=sys.stderr)
        return 2
    machines = load(home)
    if sub == "list" and not words:
        if as_json:
            print(json.dumps({"machines": machines}))
        else:
            print("\n".join(f"{m['label']} ({m['id']}): {m['ssh_target']}, session {m['remote_session'] or 'default'}" for m in machines)
                  or "no saved machines")
        return 0
    if sub in ("status", "reconnect") and len(words) <= 1 and not (sub == "reconnect" and (as_json or not words)):
        chosen: list[dict[str, Any]] = machines
        if words:
            found = resolve(home, words[0])
            if isinstance(found, str):
                print(f"error: {found}", file=sys.stderr)
                return 2
            chosen = [found]
        statuses = [_status(m) for m in chosen]
        if sub == "reconnect":
            # Finishes an SSH sign-in in a terminal; the simulated network has none to finish.
            print(f"machine {statuses[0]['label']}: {'reachable' if statuses[0]['reachable'] else statuses[0]['error']}")
            return 0 if statuses[0]["reachable"] else 1
        if as_json:
            print(json.dumps({"machines": statuses}))
        else:
            print("\n".join(f"{s['label']} ({s['id']}): {'reachable' if s['reachable'] else 'unreachable: ' + str(s['error'])}" for s in statuses)
                  or "no saved machines")
        return 0
    print(f"error: {USAGE}", file=sys.stderr)
    return 2


def _add(home: Path, words: list[str]) -> int:
    """`machine add <ssh-target> [--label L] [--remote-session NAME]`: saves a profile; never installs a server."""
    options: dict[str, str] = {}
    target: str | None = None
    i = 0
    while i < len(words):
        word = words[i]
        if word in ("--label", "--remote-session") and i + 1 < len(words):
            options[word] = words[i + 1]
            i += 2
            continue
        if word.startswith("-") or target is not None:
            print(f"error: {USAGE}", file=sys.stderr)
            return 2
        target = word
        i += 1
    if target is None:
        print(f"error: {USAGE}", file=sys.stderr)
        return 2
    machines = load(home)
    number = 1 + max((int(m["id"][1:]) for m in machines), default=0)
    profile = {"id": f"m{number}", "label": options.get("--label", target), "ssh_target": target,
               "remote_session": options.get("--remote-session"), "enabled": True}
    _save(home, [*machines, profile])
    print(f"saved machine {profile['label']} ({profile['id']})")
    return 0
