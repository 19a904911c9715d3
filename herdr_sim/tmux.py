"""The private tmux server that hosts every simulated pane as a real shell (one tmux session per pane)."""

from __future__ import annotations

import os
import secrets
import subprocess
from dataclasses import dataclass
from pathlib import Path

TIMEOUT = 10.0
WIDTH, HEIGHT = 120, 40  # herdr 0.8.2's headless size; 0.7.5's is 80x24 (herdr_sim.versions)
# HISTFILE empty: an interactive bash reads, truncates (to HISTFILESIZE, 500 by default) and rewrites $HISTFILE, which
# is ~/.bash_history unless set; a pane shell of the simulator must never touch the history of whoever started it
# (issue 21: the demo cut a person's 5,000-line history to 500 lines). bash keeps an empty HISTFILE empty.
SHELL_ARGV = ["env", "-u", "TMUX", "-u", "TMUX_PANE", "HISTFILE=", "bash", "--norc", "--noprofile"]
ARGV_ENV = ("PATH", "TERM_PROGRAM", "TERM_PROGRAM_VERSION")  # variables tmux would override in a new pane


TITLES = ("list-panes", "-a", "-F", "#{pane_id}\t#{pane_dead}\t#{pane_title}")


def _titles(out: str) -> dict[str, str]:
    live: dict[str, str] = {}
    for line in out.splitlines():
        parts = line.split("\t", 2)
        if len(parts) == 3 and parts[1] == "0":
            live[parts[0]] = parts[2]
    return live


class TmuxError(RuntimeError):
    """A tmux command failed; carries argv, exit code and output."""


@dataclass(frozen=True)
class Tmux:
    """Runs tmux against one private socket with no user config."""

    socket: Path
    width: int = WIDTH
    height: int = HEIGHT

    def run(self, *args: str, check: bool = True, input_text: str | None = None) -> str:
        """Run one tmux command; raise TmuxError on failure when check is set."""
        argv = ["tmux", "-S", str(self.socket), "-f", "/dev/null", *args]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT, input=input_text)
        if check and proc.returncode != 0:
            raise TmuxError(f"{argv!r} exited {proc.returncode}: stdout={proc.stdout!r} stderr={proc.stderr!r}")
        return proc.stdout

    def start(self) -> None:
        """Start the server so it keeps running with no sessions and inherits our environment."""
        self.socket.parent.mkdir(parents=True, exist_ok=True)
        # update-environment "" keeps client variables out of panes: panes inherit the server's env only.
        self.run("start-server", ";", "set", "-s", "exit-empty", "off", ";",
                 "set", "-g", "update-environment", "", ";", "set", "-g", "status", "off", ";",
                 "set", "-g", "history-limit", "5000")

    def alive(self) -> bool:
        """Whether the tmux server answers."""
        try:
            self.run("list-sessions")
            return True
        except (TmuxError, subprocess.TimeoutExpired, FileNotFoundError):
            return False

    def kill(self) -> None:
        """Kill the tmux server and with it every pane process it still hosts."""
        self.run("kill-server", check=False)

    def new_pane(self, session: str, cwd: str, env: dict[str, str], unset: tuple[str, ...] = ()) -> tuple[str, int]:
        """Create a session whose single pane runs a plain bash without the ``unset`` variables; return (tmux pane
        id, shell pid)."""
        args = ["new-session", "-d", "-s", session, "-x", str(self.width), "-y", str(self.height), "-c", cwd]
        for key, value in env.items():
            args += ["-e", f"{key}={value}"]
        # tmux replaces a new pane's PATH with the PATH of the client that ran the command and sets its own
        # TERM_PROGRAM (spawn.c), whatever -e says; `env NAME=…` in the pane's own argv is the only way the pane gets
        # herdr's values (<home>/bin first on PATH; herdr 0.9's TERM_PROGRAM=herdr, else the outer terminal's).
        assigns: list[str] = []
        unsets: list[str] = [word for name in unset if name not in env for word in ("-u", name)]
        for name in ARGV_ENV:
            found: str | None = env.get(name, os.environ.get(name) if name != "PATH" else None)
            if found is not None:
                assigns.append(f"{name}={found}")
            elif name != "PATH":
                unsets += ["-u", name]
        shell = [*SHELL_ARGV[:5], *unsets, *assigns, *SHELL_ARGV[5:]]
        args += ["-P", "-F", "#{pane_id} #{pane_pid}", "--", *shell]
        out = self.run(*args).split()
        return out[0], int(out[1])

    def panes(self) -> dict[str, int]:
        """Live tmux panes: pane id → pid of its process."""
        out = self.run("list-panes", "-a", "-F", "#{pane_id} #{pane_pid} #{pane_dead}", check=False)
        live: dict[str, int] = {}
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[2] == "0":
                live[parts[0]] = int(parts[1])
        return live

    def titles(self) -> dict[str, str]:
        """Live tmux panes: pane id → the title its application set (OSC 0/2), in one list-panes."""
        return _titles(self.run(*TITLES, check=False))

    def titles_and_screens(self, panes: list[str]) -> tuple[dict[str, str], dict[str, str]]:
        """titles(), and the visible screen of each of ``panes`` as capture(…, history=False, joined=False,
        ansi=False) joined with newlines would give it, all from one tmux client.

        tmux runs a command sequence in order and stops at its first failing command: a screen is kept only when the
        marker after it was printed, so a pane whose capture failed is missing (and so are those after it).
        """
        if not panes:
            return self.titles(), {}
        tag = f"herdr-sim-{secrets.token_hex(8)}-"
        args: list[str] = list(TITLES)
        for i, pane in enumerate(panes):
            args += [";", "display", "-p", "--", f"{tag}{i}", ";", "capture-pane", "-p", "-t", pane]
        args += [";", "display", "-p", "--", f"{tag}{len(panes)}"]
        out = "\n" + self.run(*args, check=False)
        marks = []
        for i in range(len(panes) + 1):
            at = out.find(f"\n{tag}{i}\n", marks[-1] if marks else 0)
            if at < 0:
                break
            marks.append(at)
        head = out[1:marks[0] + 1] if marks else out[1:]
        screens = {}
        for i, (at, end) in enumerate(zip(marks, marks[1:], strict=False)):
            screens[panes[i]] = out[at + len(f"\n{tag}{i}\n"):end + 1]
        return _titles(head), screens

    def kill_pane(self, pane: str) -> None:
        """Kill the session holding this pane (and so its process)."""
        self.run("kill-pane", "-t", pane, check=False)

    def capture(self, pane: str, *, history: bool, joined: bool, ansi: bool) -> list[str]:
        """Rendered rows of the pane: the visible screen, or history plus screen."""
        args = ["capture-pane", "-p", "-t", pane]
        if history:
            args += ["-S", "-"]
        if joined:
            args.append("-J")
        if ansi:
            args.append("-e")
        return self.run(*args).split("\n")

    def send_literal(self, pane: str, text: str) -> None:
        """Write text to the pane unchanged (no paste brackets, no Enter)."""
        if text:
            self.run("send-keys", "-t", pane, "-l", "--", text)

    def send_keys(self, pane: str, keys: list[str]) -> None:
        """Send tmux key names."""
        if keys:
            self.run("send-keys", "-t", pane, "--", *keys)

    def paste(self, pane: str, text: str, buffer: str) -> None:
        """Paste text, bracketed only when the application enabled bracketed paste (tmux -p decides)."""
        self.run("load-buffer", "-b", buffer, "-", input_text=text)
        self.run("paste-buffer", "-p", "-d", "-r", "-b", buffer, "-t", pane)

    def alternate_on(self, pane: str) -> bool:
        """Whether the pane's application switched to the alternate screen."""
        return self.run("display", "-p", "-t", pane, "#{alternate_on}", check=False).strip() == "1"

    def cursor_mode(self, pane: str) -> str:
        """Whether the pane's application enabled bracketed paste ('1' or '0')."""
        return self.run("display", "-p", "-t", pane, "#{bracketed_paste}", check=False).strip()
