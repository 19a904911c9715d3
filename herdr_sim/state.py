"""The simulated server's state: pydantic models persisted as one JSON file under an exclusive fcntl lock."""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Iterator
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from herdr_sim.paths import Paths

State = Literal["idle", "working", "blocked", "unknown"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore")


class Pane(_Model):
    """One simulated pane and the terminal (tmux pane) it hosts."""

    pane_id: str
    terminal_id: str
    workspace_id: str
    tab_id: str
    tmux: str
    shell_pid: int
    cwd: str
    label: str | None = None
    aliases: list[str] = Field(default_factory=list)
    revision: int = 0
    # Hook authority (pane report-agent).
    hook_source: str | None = None
    hook_agent: str | None = None
    hook_seqs: dict[str, int] = Field(default_factory=dict)
    agent_session: dict[str, str] | None = None
    state: State = "unknown"
    seen: bool = True
    state_change_seq: int = 0
    detected: str | None = None
    name: str | None = None
    launch_kind: str | None = None
    launch_typed_at: float | None = None
    launch_deadline: float | None = None
    interactive_ready: bool = False


class Tab(_Model):
    """A tab: a split tree of panes and its focused pane."""

    tab_id: str
    number: int
    custom_label: str | None = None
    layout: dict[str, Any]
    focused_pane_id: str | None = None


class Workspace(_Model):
    """A workspace with its tabs and per-workspace counters."""

    workspace_id: str
    custom_label: str | None = None
    cwd: str
    tabs: list[Tab] = Field(default_factory=list)
    next_tab: int = 1
    next_pane: int = 1
    active_tab_id: str | None = None
    worktree: dict[str, Any] | None = None
    group_parent: str | None = None


class Fault(_Model):
    """One injected failure waiting for a matching command."""

    command: str
    code: str | None = None
    message: str | None = None
    drop_root_pane: bool = False
    delay_ms: int | None = None
    times: int = 1


class World(_Model):
    """Everything the simulated server knows."""

    server_pid: int | None = None
    session: str | None = None
    settle_ms: int = 3000
    next_workspace: int = 1
    terminal_counter: int = 0
    state_change_seq: int = 0
    active_workspace_id: str | None = None
    workspaces: list[Workspace] = Field(default_factory=list)
    panes: dict[str, Pane] = Field(default_factory=dict)
    faults: list[Fault] = Field(default_factory=list)
    prompt_counter: int = 0


class Store:
    """Reads and writes the World atomically; `transaction` holds the lock for one read-modify-write."""

    def __init__(self, paths: Paths) -> None:
        self.paths = paths

    def load(self) -> World:
        """Read the current state without locking (the file is replaced atomically)."""
        try:
            return World.model_validate_json(self.paths.state.read_text())
        except FileNotFoundError:
            return World()

    def save(self, world: World) -> None:
        """Atomically replace the state file."""
        fd, tmp = tempfile.mkstemp(dir=self.paths.home, prefix=".state.", suffix=".json")
        with os.fdopen(fd, "w") as handle:
            handle.write(world.model_dump_json())
        os.replace(tmp, self.paths.state)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[World]:
        """Lock, load, yield, save. Never sleep inside one."""
        self.paths.home.mkdir(parents=True, exist_ok=True)
        with open(self.paths.lock, "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                world = self.load()
                yield world
                self.save(world)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
