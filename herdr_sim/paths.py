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
    if sock:
        parent = Path(sock).parent
        if (parent / MARKER).exists():
            return parent.absolute()
        # A named session's socket lives in <home>/sessions/<name>/ (herdr's layout under its config dir).
        if parent.parent.name == "sessions" and (parent.parent.parent / MARKER).exists():
            return parent.parent.parent.absolute()
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
        """The default session's HERDR_SOCKET_PATH; always inside home so it points back at the home."""
        return self.home / "herdr.sock"

    def session_dir(self, session: str | None) -> Path:
        """herdr's data_dir_for: the home (herdr's config dir) for the default session, else sessions/<name>."""
        return self.home if session is None else self.home / "sessions" / session

    def socket_for(self, session: str | None) -> Path:
        """herdr's api_socket_path_for: `<session dir>/herdr.sock`."""
        return self.session_dir(session) / "herdr.sock"

    @property
    def ready(self) -> Path:
        return self.home / "server.ready"

    @property
    def release(self) -> Path:
        """The running server's release (`<profile> <version>`): a client of another release reads it."""
        return self.home / "server.release"

    @property
    def pidfile(self) -> Path:
        return self.home / "server.pid"

    @property
    def calls_socket(self) -> Path:
        """Where the call zygote (herdr_sim.forks) listens, when HERDR_SIM_FORKSERVER=1 started one."""
        return self.home / "calls.sock"

    @property
    def calls_pidfile(self) -> Path:
        return self.home / "calls.pid"

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
