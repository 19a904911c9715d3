"""Where a simulated herdr keeps its state: home directory, sockets, bin dir, lock and state files."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

MARKER = "herdr-sim.marker"
UNIX_PATH_MAX = 100  # sun_path is 108 bytes; keep a margin for the NUL and tmux suffixes


def resolve_home(env: dict[str, str] | None = None) -> Path:
    """HERDR_SIM_HOME, else the dir of a simulator HERDR_SOCKET_PATH, else $XDG_STATE_HOME/herdr-sim."""
    env = dict(os.environ) if env is None else env
    if env.get("HERDR_SIM_HOME"):
        return Path(env["HERDR_SIM_HOME"]).expanduser().absolute()
    sock = env.get("HERDR_SOCKET_PATH")
    if sock and (Path(sock).parent / MARKER).exists():
        return Path(sock).parent.absolute()
    state = env.get("XDG_STATE_HOME") or str(Path(env.get("HOME", str(Path.home()))) / ".local" / "state")
    return Path(state).expanduser().absolute() / "herdr-sim"


def short_dir(home: Path) -> Path:
    """A short per-home directory under /tmp for unix sockets whose natural path would be too long."""
    digest = hashlib.sha256(str(home).encode()).hexdigest()[:12]
    return Path("/tmp") / f"herdr-sim-{os.getuid()}-{digest}"


@dataclass(frozen=True)
class Paths:
    """All files of one simulator home."""

    home: Path

    @property
    def state(self) -> Path:
        return self.home / "state.json"

    @property
    def lock(self) -> Path:
        return self.home / "state.lock"

    @property
    def marker(self) -> Path:
        return self.home / MARKER

    @property
    def socket(self) -> Path:
        """The HERDR_SOCKET_PATH clients see; always inside home so it points back at the home."""
        return self.home / "herdr.sock"

    @property
    def ready(self) -> Path:
        return self.home / "server.ready"

    @property
    def pidfile(self) -> Path:
        return self.home / "server.pid"

    @property
    def bin(self) -> Path:
        return self.home / "bin"

    @property
    def log(self) -> Path:
        return self.home / "server.log"

    @property
    def tmux_socket(self) -> Path:
        natural = self.home / "tmux.sock"
        if len(str(natural)) <= UNIX_PATH_MAX:
            return natural
        return short_dir(self.home) / "tmux.sock"
