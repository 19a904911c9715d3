"""Process identification as herdr does it on Linux: the pane tty's foreground group, comm, argv and environ."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

KINDS = ("pi", "claude", "codex", "gemini", "cursor", "devin", "agy", "cline", "omp", "mastracode", "opencode",
         "copilot", "kimi", "kiro", "droid", "amp", "grok", "hermes", "kilo", "qodercli", "maki")
ALIASES = {"claude-code": "claude", "cursor-agent": "cursor", "kiro-cli": "kiro", "open-code": "opencode"}
EXECUTABLE = {"cursor": "cursor-agent", "kiro": "kiro-cli"}
SHELLS = ("sh", "bash", "dash", "zsh", "fish", "ksh", "mksh", "csh", "tcsh", "elvish", "xonsh", "nu", "pwsh")
INTERPRETERS = ("python", "python3", "node", "bun", "deno", "ruby", "perl", "sh", "bash")


def parse_kind(label: str) -> str | None:
    """The built-in kind a label names (aliases canonicalized), or None for a custom label."""
    key = label.strip().lower()
    key = ALIASES.get(key, key)
    return key if key in KINDS else None


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(comm, pgrp, tpgid) of a process, or None when it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    comm = raw[raw.index("(") + 1 : raw.rindex(")")]
    fields = raw[raw.rindex(")") + 2 :].split()
    return comm, int(fields[2]), int(fields[5])


def _argv(pid: int) -> list[str]:
    try:
        return [a for a in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0") if a]
    except OSError:
        return []


def _env_agent(pid: int) -> str | None:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None
    for item in raw.split(b"\0"):
        if item.startswith(b"HERDR_AGENT="):
            return parse_kind(item[len(b"HERDR_AGENT="):].decode(errors="replace"))
    return None


def _interpreter(name: str) -> bool:
    base = name.rstrip("0123456789.")
    return base in INTERPRETERS


def identify(pid: int) -> str | None:
    """The agent kind one process is, by comm, argv0, interpreter+argv1, or HERDR_AGENT."""
    st = _stat(pid)
    if st is None:
        return None
    for candidate in (st[0],):
        kind = parse_kind(candidate)
        if kind:
            return kind
    argv = _argv(pid)
    if argv:
        kind = parse_kind(os.path.basename(argv[0]))
        if kind:
            return kind
        if _interpreter(os.path.basename(argv[0])):
            for arg in argv[1:]:
                if arg.startswith("-"):
                    continue
                kind = parse_kind(os.path.basename(arg))
                if kind:
                    return kind
                break
    return _env_agent(pid)


Table = dict[int, tuple[str, int, int]]


def scan() -> Table:
    """One pass over /proc: pid → (comm, pgrp, tpgid). Lets a reconcile look at many panes for one scan.

    Every herdr call reconciles, so this runs once per call over every process of the machine: raw reads, no
    pathlib or text layer (a third of a call's CPU went to them).
    """
    table: Table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fd = os.open(f"/proc/{entry}/stat", os.O_RDONLY)
        except OSError:
            continue
        try:
            raw = os.read(fd, 4096)
        except OSError:
            continue
        finally:
            os.close(fd)
        close = raw.rfind(b")")
        if close < 0:
            continue
        fields = raw[close + 2:].split()
        table[int(entry)] = (raw[raw.find(b"(") + 1:close].decode(errors="replace"), int(fields[2]), int(fields[5]))
    return table


def foreground(shell_pid: int, table: Table | None = None) -> list[int]:
    """Pids of the foreground process group of the shell's terminal ([] when the shell is gone)."""
    st = _stat(shell_pid)
    if st is None:
        return []
    tpgid = st[2]
    if tpgid <= 0:
        return []
    table = scan() if table is None else table
    return sorted(pid for pid, s in table.items() if s[1] == tpgid)


def detect(shell_pid: int, table: Table | None = None) -> str | None:
    """The agent kind running in the pane's foreground job, if any."""
    fg = foreground(shell_pid, table)
    if fg == [shell_pid]:
        return None
    for pid in fg:
        kind = identify(pid)
        if kind:
            return kind
    return None


def shell_at_prompt(shell_pid: int) -> bool:
    """The foreground group is exactly the pane's own shell, and that shell is a known shell."""
    st = _stat(shell_pid)
    return st is not None and st[0] in SHELLS and foreground(shell_pid) == [shell_pid]


def descendants(root: int) -> list[int]:
    """All live descendants of a pid (for tear-down checks)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            raw = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(raw[raw.rindex(")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


_SEND_LATER = (
    "import subprocess, sys, time; time.sleep(float(sys.argv[1])); "
    "subprocess.run(['tmux', '-S', sys.argv[2], '-f', '/dev/null', 'send-keys', '-t', sys.argv[3], '--', *sys.argv[4:]], "
    "capture_output=True, timeout=10)"
)


def send_keys_later(tmux_socket: Path, pane: str, keys: list[str], delay_ms: int) -> None:
    """Write keys to a tmux pane after the answer went out (herdr 0.8.2's delayed Enter), from a detached helper."""
    subprocess.Popen(
        [sys.executable, "-S", "-c", _SEND_LATER, str(delay_ms / 1000), str(tmux_socket), pane, *keys],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
