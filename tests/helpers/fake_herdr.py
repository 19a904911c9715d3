"""One stateful in-memory herdr for unit tests: every ``Herdr`` protocol method, herdr's semantics, real git worktrees.

What it models (../shared/herdr-0.7.5/CONTRACT.md §1, §5-§9, and the simulator, docs/simulator.md):
- ids minted as herdr mints them and never reused: workspaces ``w1, w2…`` from one counter, tabs ``w1:t1…`` and panes
  ``w1:p1…`` per workspace (bijective base 32); a pane moved into another workspace gets a new id there and its old id
  stays an alias that pane commands (not agent commands) accept;
- ``worktree create`` runs a real ``git worktree add`` in the source workspace's repository and opens a NEW workspace
  with its own tab and root pane, linked to the source's group; ``worktree open`` reuses a workspace already open at
  the path (``already_open``); ``pane move --new-tab`` into another workspace closes the emptied source workspace;
- agents on panes with status, ``state_change_seq`` and (0.9.2+) ``completion_seq``; a target is a unique name or
  the pane's current id; ``pane read``/``agent read`` return a screen the test sets;
- failures as the real boundary raises them: a herdr JSON error body run through ``orchestrator.herdr.error_for``
  (so ``agent_not_found`` is a ``HerdrNotFound`` with the same message and hint ``HerdrCli`` would give), and a lost
  outcome as ``HerdrCallLost``.

Every call is recorded in ``calls`` as a ``HerdrCall`` whose argv ``HerdrCli`` itself built (``orchestrator.herdr.argv_of``:
an argv change cannot leave the fake behind; ``argvs()``,
``commands()`` and ``count()`` read them). Fault hooks: ``fail_next`` (the next call of a command fails, before or after
acting) and ``lose_next`` (acts, then its answer is lost). Unlike ``HerdrCli`` nothing is retried. Thread-safe:
provisioning calls it from a pool.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from orchestrator.errors import HerdrCall, HerdrCallLost, HerdrFailure
from orchestrator.herdr import Env, Herdr, PathArg, argv_of, error_for, features_of
from orchestrator.herdr_models import (
    AgentExplain,
    AgentInfo,
    AgentPrompted,
    AgentSession,
    AgentStarted,
    AgentStatus,
    ClientStatus,
    HerdrFeatures,
    HerdrStatus,
    HerdrVersion,
    IntegrationEntry,
    LayoutPane,
    LayoutSplit,
    PaneInfo,
    PaneLayoutSnapshot,
    PaneMoveResult,
    ReadSource,
    Rect,
    ServerStatus,
    SessionInfo,
    SessionList,
    SplitDirection,
    TabCreated,
    TabInfo,
    UpdateStatus,
    WorkspaceCreated,
    WorkspaceInfo,
    WorkspaceWorktree,
    WorktreeCreated,
    WorktreeInfo,
    WorktreeListResult,
    WorktreeOpened,
    WorktreeRemoved,
    WorktreeSource,
)

T = TypeVar("T")

_DIGITS = "123456789ABCDEFGHJKMNPQRSTVWXYZ0"
_AGENT_NAME = re.compile(r"[a-z][a-z0-9_-]{0,31}")
# What a tab's layout area measures (a wide terminal: its first split goes right, see provision.choose_direction).
AREA = Rect(x=0, y=0, width=240, height=60)


def herdr_number(n: int) -> str:
    """N in herdr's bijective base 32 (CONTRACT §1): 1 -> 1, 10 -> A, 32 -> 0, 33 -> 11."""
    out = ""
    while n > 0:
        n, rem = divmod(n - 1, 32)
        out = _DIGITS[rem] + out
    return out


@dataclass
class FakeAgent:
    """An agent on a pane: what herdr reports, and how it reacts to a prompt (work | finish | stall)."""

    name: str | None
    kind: str
    status: AgentStatus = "idle"
    seq: int = 1
    completion: int | None = None
    ready: bool = True
    reacts: str = "work"
    prompts: list[str] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)
    on_prompt: Callable[[], object] | None = None  # what happens while herdr submits (a fast worker's callback)
    after_prompt: str | None = None  # what its pane shows once a prompt landed (a dialog the turn opened)
    exit_command: str | None = "/exit"  # typed into its pane and then Enter, the agent leaves it (the pane is a shell again)
    exits: bool = True  # False: it ignores its exit command
    stops: bool = True  # a `stop` envelope ends its turn (it goes idle); False: it keeps working
    rests_after: int | None = None  # working, it goes idle after this many more `agent get`s (its turn ends)
    explain: AgentExplain | None = None  # what `agent explain` answers (its evidence); None: its status, nothing more


@dataclass
class FakePane:
    """A pane: where it lives, its cwd, its screen, what was typed into it, and its agent if any."""

    pane_id: str
    workspace_id: str
    tab_id: str
    cwd: str
    terminal_id: str
    rect: Rect = AREA
    label: str | None = None
    screen: str = "$ \n"
    sent: list[str] = field(default_factory=list)
    agent: FakeAgent | None = None
    session: AgentSession | None = None
    busy: bool = False  # its foreground process is not the shell: agent start answers agent_pane_busy
    after_read: str | None = None  # what it shows from the next read on (a dialog drawn right after a look)
    after_keys: str | None = None  # what it shows once keys were sent to it (a form they answered)
    revision: int = 0


@dataclass
class FakeTab:
    tab_id: str
    workspace_id: str
    number: int
    label: str | None = None
    panes: list[str] = field(default_factory=list)
    splits: list[LayoutSplit] = field(default_factory=list)


@dataclass
class FakeWorkspace:
    workspace_id: str
    cwd: str
    label: str | None = None
    tabs: list[str] = field(default_factory=list)
    next_tab: int = 1
    next_pane: int = 1
    worktree: WorkspaceWorktree | None = None
    group: str | None = None  # a linked worktree's parent workspace


@dataclass
class _Fault:
    error: HerdrFailure | None
    code: str | None
    message: str
    after: bool
    word: str | None


class FakeHerdr:
    """The ``Herdr`` protocol over in-memory workspaces, tabs, panes and agents (see the module docstring).

    ``FakeHerdr(cwd=repo)`` starts like a person's herdr: one workspace ``w1`` at ``repo`` with tab ``w1:t1`` and pane
    ``w1:p1`` (the controller's). ``ready_screens`` maps an agent kind to the screen its pane shows once started.
    """

    binary = "herdr"

    def __init__(
        self,
        *,
        cwd: PathArg | None = None,
        version: str = "0.9.5",
        ready_screens: dict[str, str] | None = None,
        worktrees_dir: PathArg | None = None,
    ) -> None:
        self.version_text = version
        self.ready_screens = dict(ready_screens or {})
        self.worktrees_dir = Path(worktrees_dir) if worktrees_dir is not None else Path.home() / ".herdr" / "worktrees"
        self.calls: list[HerdrCall] = []
        self.prompted: list[tuple[str, str]] = []  # every prompt an agent took, in order: (its pane, the text)
        self.trust_repository = False
        self.workspaces: dict[str, FakeWorkspace] = {}
        self.tabs: dict[str, FakeTab] = {}
        self.panes: dict[str, FakePane] = {}
        self.aliases: dict[str, str] = {}  # a moved pane's old id -> its current id
        self.integrations: list[IntegrationEntry] = [
            IntegrationEntry(target=kind, state="current", installed_version=1, path=f"~/.{kind}") for kind in ("pi", "claude", "codex", "opencode")
        ]
        self.current_pane: str | None = None
        self.faults: dict[str, list[_Fault]] = {}
        # Set: every call fails with it before acting (a host whose link is gone: `HostUnreachable`), until cleared.
        self.down: HerdrFailure | None = None
        self._next_workspace = 1
        self._next_terminal = 1
        self._next_split = 1
        self._lock = threading.RLock()
        if cwd is not None:
            created = self._new_workspace(os.fspath(cwd), None)
            self.current_pane = created[2].pane_id

    # --- what tests use ---

    def fail_next(
        self, command: str, code: str | None = None, message: str = "", *, error: HerdrFailure | None = None, after: bool = False, word: str | None = None,
    ) -> None:
        """The next ``herdr COMMAND`` (e.g. ``"agent start"``; with ``word``, the next whose argv holds that word, e.g. an
        agent's name) fails with herdr's JSON error ``code``/``message`` (mapped exactly as the real boundary maps it),
        or raises ``error``; with ``after`` it acts first, then fails."""
        self.faults.setdefault(command, []).append(_Fault(error, code, message, after, word))

    def lose_next(self, command: str, *, after: bool = True, word: str | None = None) -> None:
        """The next ``herdr COMMAND`` (holding ``word``) dies of SIGKILL: after acting (herdr did it, orch never hears) or before."""
        self.faults.setdefault(command, []).append(_Fault(None, None, "", after, word))

    def argvs(self) -> list[tuple[str, ...]]:
        """Every call's argv without the binary, in call order."""
        return [call.argv[1:] for call in self.calls]

    def commands(self) -> list[str]:
        """Every call's command path (``worktree create``), in call order."""
        return [" ".join(call.argv[1:3]) for call in self.calls]

    def count(self, command: str) -> int:
        return self.commands().count(command)

    def pane(self, pane_id: str) -> FakePane:
        """A pane by id or alias (for a test to set its screen or read what was typed)."""
        return self.panes[self.aliases.get(pane_id, pane_id)]

    def agent(self, name: str) -> FakeAgent:
        return next(p.agent for p in self.panes.values() if p.agent is not None and p.agent.name == name)

    def add_agent(self, pane_id: str, name: str | None, kind: str, **state: Any) -> FakeAgent:
        """An agent already running in a pane (a person's, or one an earlier run started)."""
        pane = self.pane(pane_id)
        state.setdefault("completion", 0 if self.features().completion_seq else None)
        pane.agent = FakeAgent(name=name, kind=kind, **state)
        return pane.agent

    def set_status(self, name: str, status: AgentStatus) -> None:
        """The agent's state changes as herdr would report it: the seq moves; a finished turn counts (0.9.2+)."""
        with self._lock:
            self._move(self.agent(name), status)

    # --- discovery ---

    def version(self) -> HerdrVersion:
        return self._call(self._argv("version"), lambda: HerdrVersion(text=f"herdr {self.version_text}", version=self.version_text))

    def features(self) -> HerdrFeatures:
        return features_of(self.version_text)  # no call: HerdrCli asks `status` once and caches it

    def help_text(self) -> str:
        return self._call(self._argv("help_text"), lambda: "herdr: a terminal workspace for agents (fake)\n")

    def status(self) -> HerdrStatus:
        def act() -> HerdrStatus:
            client = ClientStatus(version=self.version_text, channel="stable", protocol=22, binary=self.binary)
            server = ServerStatus(status="running", running=True, version=self.version_text, protocol=22, compatible=True, socket="/fake/herdr.sock")
            return HerdrStatus(client=client, server=server, update=UpdateStatus())

        return self._call(self._argv("status"), act)

    def session_list(self) -> SessionList:
        one = SessionInfo(name="default", default=True, running=True, socket_path="/fake/herdr.sock", session_dir="/fake")
        return self._call(self._argv("session_list"), lambda: SessionList(sessions=(one,)))

    def integration_status(self) -> tuple[IntegrationEntry, ...]:
        return self._call(self._argv("integration_status"), lambda: tuple(self.integrations))

    def api_schema_methods(self) -> tuple[str, ...]:
        return self._call(self._argv("api_schema_methods"), lambda: ("ping", "workspace.list", "pane.read", "agent.start", "agent.prompt", "worktree.create"))

    # --- workspaces ---

    def workspace_list(self) -> tuple[WorkspaceInfo, ...]:
        return self._call(self._argv("workspace_list"), lambda: tuple(self._ws_info(w) for w in self.workspaces))

    def workspace_create(self, *, cwd: PathArg | None = None, label: str | None = None, env: Env | None = None) -> WorkspaceCreated:
        def act() -> WorkspaceCreated:
            ws, tab, pane = self._new_workspace(os.fspath(cwd) if cwd is not None else str(Path.home()), label)
            return WorkspaceCreated(type="workspace_created", workspace=self._ws_info(ws.workspace_id), tab=self._tab_info(tab.tab_id), root_pane=self._pane_info(pane.pane_id))

        return self._call(self._argv("workspace_create", (), {"cwd": cwd, "label": label, "env": env}), act)

    def workspace_get(self, workspace_id: str) -> WorkspaceInfo:
        return self._call(self._argv("workspace_get", (workspace_id,)), lambda: self._ws_info(self._ws(workspace_id).workspace_id))

    def workspace_close(self, workspace_id: str) -> None:
        def act() -> None:
            ws = self._ws(workspace_id)
            for member in [w for w in self.workspaces.values() if w.group == ws.workspace_id]:
                self._drop_workspace(member.workspace_id)  # closing a group's parent closes the group (CONTRACT §5)
            self._drop_workspace(ws.workspace_id)

        self._call(self._argv("workspace_close", (workspace_id,)), act)

    # --- tabs ---

    def tab_list(self, *, workspace: str | None = None) -> tuple[TabInfo, ...]:
        def act() -> tuple[TabInfo, ...]:
            spaces = [self._ws(workspace)] if workspace is not None else list(self.workspaces.values())
            return tuple(self._tab_info(t) for w in spaces for t in w.tabs)

        return self._call(self._argv("tab_list", (), {"workspace": workspace}), act)

    def tab_create(self, *, workspace: str | None = None, cwd: PathArg | None = None, label: str | None = None, env: Env | None = None) -> TabCreated:
        def act() -> TabCreated:
            ws = self._ws(workspace) if workspace is not None else self._ws(self.pane(self._current()).workspace_id)
            tab = self._new_tab(ws, label)
            pane = self._new_pane(ws, tab, os.fspath(cwd) if cwd is not None else ws.cwd)
            return TabCreated(type="tab_created", tab=self._tab_info(tab.tab_id), root_pane=self._pane_info(pane.pane_id))

        argv = self._argv("tab_create", (), {"workspace": workspace, "cwd": cwd, "label": label, "env": env})
        return self._call(argv, act)

    def tab_rename(self, tab_id: str, label: str) -> TabInfo:
        def act() -> TabInfo:
            self._tab(tab_id).label = label
            return self._tab_info(tab_id)

        return self._call(self._argv("tab_rename", (tab_id, label)), act)

    def tab_close(self, tab_id: str) -> None:
        def act() -> None:
            tab = self._tab(tab_id)
            if len(self.workspaces[tab.workspace_id].tabs) == 1:
                raise self._refusal("tab_close_failed", "cannot close the last tab in a workspace")
            for pane_id in list(tab.panes):
                del self.panes[pane_id]
            self.workspaces[tab.workspace_id].tabs.remove(tab_id)
            del self.tabs[tab_id]

        self._call(self._argv("tab_close", (tab_id,)), act)

    # --- panes ---

    def pane_current(self, *, pane: str | None = None) -> PaneInfo:
        return self._call(self._argv("pane_current", (), {"pane": pane}), lambda: self._pane_info(pane or self._current()))

    def pane_list(self, *, workspace: str | None = None) -> tuple[PaneInfo, ...]:
        def act() -> tuple[PaneInfo, ...]:
            spaces = [self._ws(workspace)] if workspace is not None else list(self.workspaces.values())
            return tuple(self._pane_info(p) for w in spaces for t in w.tabs for p in self.tabs[t].panes)

        return self._call(self._argv("pane_list", (), {"workspace": workspace}), act)

    def pane_get(self, pane_id: str) -> PaneInfo:
        return self._call(self._argv("pane_get", (pane_id,)), lambda: self._pane_info(pane_id))

    def pane_layout(self, pane_id: str) -> PaneLayoutSnapshot:
        return self._call(self._argv("pane_layout", (pane_id,)), lambda: self._layout(self._pane(pane_id).tab_id))

    def pane_split(self, pane_id: str, *, direction: SplitDirection, ratio: float | None = None, cwd: PathArg | None = None, env: Env | None = None) -> PaneInfo:
        def act() -> PaneInfo:
            source = self._pane(pane_id)
            tab, ws = self.tabs[source.tab_id], self.workspaces[source.workspace_id]
            r = source.rect
            if direction == "right":
                left = r.width // 2
                source.rect, rect = r.model_copy(update={"width": left}), Rect(x=r.x + left, y=r.y, width=r.width - left, height=r.height)
            else:
                top = r.height // 2
                source.rect, rect = r.model_copy(update={"height": top}), Rect(x=r.x, y=r.y + top, width=r.width, height=r.height - top)
            new = self._new_pane(ws, tab, os.fspath(cwd) if cwd is not None else source.cwd, rect=rect)
            tab.splits.append(LayoutSplit(id=f"split-{self._next_split}", direction=direction, ratio=ratio or 0.5, rect=r))
            self._next_split += 1
            return self._pane_info(new.pane_id)

        argv = self._argv("pane_split", (pane_id,), {"direction": direction, "ratio": ratio, "cwd": cwd, "env": env})
        return self._call(argv, act)

    def pane_move_new_tab(self, pane_id: str, *, workspace: str | None = None, label: str | None = None) -> PaneMoveResult:
        def act() -> PaneMoveResult:
            pane = self._pane(pane_id)
            previous = (pane.pane_id, pane.workspace_id, pane.tab_id)
            source_ws = self.workspaces[pane.workspace_id]
            target = self._ws(workspace) if workspace is not None else source_ws
            source_tab = self.tabs[pane.tab_id]
            source_tab.panes.remove(pane.pane_id)
            tab = self._new_tab(target, label)
            if target is not source_ws:
                # Into another workspace: a new id there; the old one stays an alias for pane commands (CONTRACT §1).
                del self.panes[pane.pane_id]
                new_id = f"{target.workspace_id}:p{herdr_number(target.next_pane)}"
                target.next_pane += 1
                self.aliases[pane.pane_id] = new_id
                self.aliases.update({old: new_id for old, cur in self.aliases.items() if cur == pane.pane_id})
                pane.pane_id, pane.workspace_id = new_id, target.workspace_id
                self.panes[new_id] = pane
            pane.tab_id, pane.rect = tab.tab_id, AREA
            tab.panes.append(pane.pane_id)
            closed_tab = closed_ws = None
            if not source_tab.panes:
                closed_tab = source_tab.tab_id
                source_ws.tabs.remove(closed_tab)
                del self.tabs[closed_tab]
                if not source_ws.tabs:
                    closed_ws = source_ws.workspace_id
                    del self.workspaces[closed_ws]
            return PaneMoveResult(
                changed=True, previous_pane_id=previous[0], previous_workspace_id=previous[1], previous_tab_id=previous[2],
                pane=self._pane_info(pane.pane_id), target_layout=self._layout(tab.tab_id), created_tab=self._tab_info(tab.tab_id),
                closed_workspace_id=closed_ws, closed_tab_id=closed_tab, focused_pane_id=self._current() if self.current_pane in self.panes else pane.pane_id,
            )  # fmt: skip

        return self._call(self._argv("pane_move_new_tab", (pane_id,), {"workspace": workspace, "label": label}), act)

    def pane_read(self, pane_id: str, *, source: ReadSource = "recent", lines: int | None = None) -> str:
        return self._call(self._argv("pane_read", (pane_id,), {"source": source, "lines": lines}), lambda: self._read(self._pane(pane_id), lines))

    def pane_send_text(self, pane_id: str, text: str) -> None:
        self._call(self._argv("pane_send_text", (pane_id, text)), lambda: self._pane(pane_id).sent.append(text))

    def pane_send_keys(self, pane_id: str, *keys: str) -> None:
        def act() -> None:
            pane = self._pane(pane_id)
            typed = pane.sent[-1] if pane.sent and not pane.sent[-1].startswith("<") else None
            pane.sent.extend(f"<{k}>" for k in keys)
            if pane.after_keys is not None:
                pane.screen, pane.after_keys = pane.after_keys, None
            agent = pane.agent
            if keys[:1] == ("Enter",) and agent is not None and agent.exits and typed is not None and typed == agent.exit_command:
                pane.agent = None  # the agent left: its pane is a shell again
                pane.screen = pane.screen.rstrip("\n") + "\n$ \n"

        self._call(self._argv("pane_send_keys", (pane_id, *keys)), act)

    def pane_run(self, pane_id: str, command: str) -> None:
        self._call(self._argv("pane_run", (pane_id, command)), lambda: self._pane(pane_id).sent.append(command + "<enter>"))

    def pane_close(self, pane_id: str) -> None:
        def act() -> None:
            pane = self._pane(pane_id)
            ws = self.workspaces[pane.workspace_id]
            only = sum(len(self.tabs[t].panes) for t in ws.tabs) == 1
            if only and any(w.group == ws.workspace_id for w in self.workspaces.values()):
                raise self._refusal("confirmation_required", "closing this pane would close a worktree group")
            tab = self.tabs[pane.tab_id]
            tab.panes.remove(pane.pane_id)
            del self.panes[pane.pane_id]
            if not tab.panes:
                ws.tabs.remove(tab.tab_id)
                del self.tabs[tab.tab_id]
            if not ws.tabs:
                del self.workspaces[ws.workspace_id]

        self._call(self._argv("pane_close", (pane_id,)), act)

    def pane_report_agent_session(self, pane_id: str, *, source: str, agent: str, session: AgentSession, resume: Sequence[str]) -> None:
        def act() -> None:
            self._pane(pane_id).session = session

        self._call(self._argv("pane_report_agent_session", (pane_id,), {"source": source, "agent": agent, "session": session, "resume": resume}), act)

    def pane_rename(self, pane_id: str, label: str | None) -> PaneInfo:
        def act() -> PaneInfo:
            self._pane(pane_id).label = label
            return self._pane_info(pane_id)

        return self._call(self._argv("pane_rename", (pane_id, label)), act)

    # --- worktrees ---

    def worktree_list(self, *, workspace: str | None = None, cwd: PathArg | None = None) -> WorktreeListResult:
        def act() -> WorktreeListResult:
            root, source_ws = self._source(workspace, cwd, linked_ok=True)
            return WorktreeListResult(type="worktree_list", source=self._wt_source(root, source_ws), worktrees=self._worktrees(root))

        return self._call(self._argv("worktree_list", (), {"workspace": workspace, "cwd": cwd}), act)

    def worktree_create(
        self,
        *,
        workspace: str | None = None,
        cwd: PathArg | None = None,
        branch: str | None = None,
        base: str | None = None,
        path: PathArg | None = None,
        label: str | None = None,
    ) -> WorktreeCreated:
        def act() -> WorktreeCreated:
            root, source_ws = self._source(workspace, cwd, linked_ok=False)
            name = branch or "worktree/fake-branch"
            where = os.fspath(path) if path is not None else str(self.worktrees_dir / Path(root).name / _slug(name))
            exists = _git(root, "rev-parse", "--verify", "--quiet", f"refs/heads/{name}").returncode == 0
            Path(where).parent.mkdir(parents=True, exist_ok=True)
            argv = ["worktree", "add", where, name] if exists else ["worktree", "add", "-b", name, where, base or "HEAD"]
            done = _git(root, *argv)
            if done.returncode != 0:
                raise self._refusal("worktree_create_failed", done.stderr.strip() or done.stdout.strip())
            ws, tab, pane = self._open_checkout(root, where, label, source_ws)
            info = next(w for w in self._worktrees(root) if _same(w.path, where))
            return WorktreeCreated(type="worktree_created", workspace=self._ws_info(ws), tab=self._tab_info(tab), root_pane=self._pane_info(pane), worktree=info)

        argv = self._argv("worktree_create", (), {"workspace": workspace, "cwd": cwd, "branch": branch, "base": base, "path": path, "label": label})  # fmt: skip
        return self._call(argv, act)

    def worktree_open(
        self,
        *,
        workspace: str | None = None,
        cwd: PathArg | None = None,
        path: PathArg | None = None,
        branch: str | None = None,
        label: str | None = None,
    ) -> WorktreeOpened:
        def act() -> WorktreeOpened:
            root, source_ws = self._source(workspace, cwd, linked_ok=False)
            listed = self._worktrees(root)
            if path is not None:
                found = next((w for w in listed if _same(w.path, os.fspath(path))), None)
            else:
                found = next((w for w in listed if w.branch == branch), None)
            if found is None or found.is_bare or found.is_prunable:
                raise self._refusal("worktree_not_found", f"worktree {os.fspath(path) if path is not None else branch} not found")
            already = found.open_workspace_id is not None
            ws, tab, pane = self._open_checkout(root, found.path, label, source_ws)
            again = next(w for w in self._worktrees(root) if _same(w.path, found.path))
            return WorktreeOpened(
                type="worktree_opened", workspace=self._ws_info(ws), tab=self._tab_info(tab), root_pane=self._pane_info(pane) if pane else None,
                worktree=again, already_open=already,
            )  # fmt: skip

        argv = self._argv("worktree_open", (), {"workspace": workspace, "cwd": cwd, "path": path, "branch": branch, "label": label})
        return self._call(argv, act)

    def worktree_remove(self, workspace_id: str, *, force: bool = False) -> WorktreeRemoved:
        def act() -> WorktreeRemoved:
            ws = self._ws(workspace_id)
            if ws.worktree is None or not ws.worktree.is_linked_worktree:
                raise self._refusal("not_linked_worktree", f"workspace {workspace_id} is not a linked worktree")
            done = _git(ws.worktree.repo_root, "worktree", "remove", *(["--force"] if force else []), ws.cwd)
            if done.returncode != 0:
                code = "dirty_worktree_requires_force" if "modified or untracked" in done.stderr else "worktree_remove_failed"
                raise self._refusal(code, done.stderr.strip())
            self._drop_workspace(ws.workspace_id)
            return WorktreeRemoved(type="worktree_removed", workspace_id=ws.workspace_id, path=ws.cwd, forced=force)

        return self._call(self._argv("worktree_remove", (workspace_id,), {"force": force}), act)

    # --- agents ---

    def agent_list(self) -> tuple[AgentInfo, ...]:
        return self._call(self._argv("agent_list"), lambda: tuple(self._agent_info(p) for p in self._agent_panes()))

    def agent_get(self, target: str) -> AgentInfo:
        def act() -> AgentInfo:
            pane = self._target(target)
            agent = pane.agent
            if agent is not None and agent.rests_after is not None:
                agent.rests_after -= 1
                if agent.rests_after <= 0:
                    agent.rests_after = None
                    self._move(agent, "idle")
            return self._agent_info(pane)

        return self._call(self._argv("agent_get", (target,)), act)

    def agent_start(self, name: str, *, kind: str, pane: str, timeout_ms: int | None = None, args: Sequence[str] = ()) -> AgentStarted:
        def act() -> AgentStarted:
            if not _AGENT_NAME.fullmatch(name):
                raise self._refusal("invalid_agent_name", f"invalid agent name {name}")
            if pane not in self.panes:
                raise self._refusal("agent_pane_not_found", f"pane {pane} not found")
            if any(p.agent is not None and p.agent.name == name for p in self.panes.values()):
                raise self._refusal("agent_name_taken", f"agent name {name} is already used")
            target = self.panes[pane]
            if target.agent is not None or target.busy:
                raise self._refusal("agent_pane_busy", f"pane {pane} is not an idle shell")
            target.agent = FakeAgent(name=name, kind=kind, completion=0 if self.features().completion_seq else None)
            target.sent.append(" ".join([kind, *args]) + "<enter>")
            target.screen = self.ready_screens.get(kind, target.screen)
            return AgentStarted(type="agent_started", agent=self._agent_info(target), argv=(kind, *args))

        argv = self._argv("agent_start", (name,), {"kind": kind, "pane": pane, "timeout_ms": timeout_ms, "args": args})
        return self._call(argv, act)

    def agent_prompt(self, target: str, text: str, *, wait: bool = False, until: Sequence[AgentStatus] = (), timeout_ms: int | None = None) -> AgentPrompted:
        def act() -> AgentPrompted:
            pane = self._target(target)
            agent = pane.agent
            assert agent is not None
            agent.prompts.append(text)
            self.prompted.append((pane.pane_id, text))
            if agent.on_prompt is not None:
                agent.on_prompt()
            if agent.after_prompt is not None:
                pane.screen = agent.after_prompt
            if "kind=stop " in text.partition("\n")[0]:
                if agent.stops:
                    self._move(agent, "idle")
            elif agent.reacts == "work":
                agent.status, agent.seq = "working", agent.seq + 1
            elif agent.reacts == "finish":
                agent.status, agent.seq = "done", agent.seq + 2
                agent.completion = None if agent.completion is None else agent.completion + 1
            elif wait:
                raise self._refusal("agent_prompt_stalled", f"no observed state change; state_change_seq remained {agent.seq}")
            if wait and until and agent.status not in until:
                raise self._refusal("timeout", "timed out waiting for agent status")
            return AgentPrompted(type="agent_prompted", agent=self._agent_info(pane))

        argv = self._argv("agent_prompt", (target, text), {"wait": wait, "until": until, "timeout_ms": timeout_ms})
        return self._call(argv, act)

    def agent_wait(self, target: str, *, until: Sequence[AgentStatus] = (), timeout_ms: int) -> AgentInfo:
        def act() -> AgentInfo:
            pane = self._target(target)
            assert pane.agent is not None
            if until and pane.agent.status not in until:
                raise self._refusal("timeout", "timed out waiting for agent status")  # nothing moves while a test waits
            return self._agent_info(pane)

        return self._call(self._argv("agent_wait", (target,), {"until": until, "timeout_ms": timeout_ms}), act)

    def agent_read(self, target: str, *, source: ReadSource = "recent", lines: int | None = None) -> str:
        return self._call(self._argv("agent_read", (target,), {"source": source, "lines": lines}), lambda: self._read(self._target(target), lines))

    def agent_send_keys(self, target: str, *keys: str) -> None:
        def act() -> None:
            pane = self._target(target)
            assert pane.agent is not None
            if not pane.agent.ready:
                raise self._refusal("agent_not_ready", f"agent {target} is not ready")
            pane.agent.keys.extend(keys)

        self._call(self._argv("agent_send_keys", (target, *keys)), act)

    def agent_rename(self, target: str, name: str | None) -> AgentInfo:
        def act() -> AgentInfo:
            pane = self._target(target)
            assert pane.agent is not None
            if name is not None and any(p.agent is not None and p.agent.name == name and p is not pane for p in self.panes.values()):
                raise self._refusal("agent_name_taken", f"agent name {name} is already used")
            pane.agent.name = name
            return self._agent_info(pane)

        return self._call(self._argv("agent_rename", (target, name)), act)

    def agent_focus(self, target: str) -> AgentInfo:
        return self._call(self._argv("agent_focus", (target,)), lambda: self._agent_info(self._target(target)))

    def agent_explain(self, target: str) -> AgentExplain:
        def act() -> AgentExplain:
            agent = self._target(target).agent
            assert agent is not None
            return agent.explain or AgentExplain(agent=agent.kind, state=agent.status)

        return self._call(self._argv("agent_explain", (target,)), act)

    # --- the machinery ---

    def _move(self, agent: FakeAgent, status: AgentStatus) -> None:
        """A state change as herdr reports it: the seq moves; a turn that ends counts as finished (0.9.2+)."""
        if agent.status == "working" and status in ("idle", "done") and agent.completion is not None:
            agent.completion += 1
        agent.status, agent.seq = status, agent.seq + 1

    def _argv(self, call: str, args: Sequence[object] = (), kwargs: Mapping[str, object] | None = None) -> tuple[str, ...]:
        """The argv ``HerdrCli.<call>`` runs for these arguments, built by HerdrCli itself for this fake's release."""
        return argv_of(call, args, kwargs, features=self.features(), trust_repository=self.trust_repository)

    def _call(self, args: Sequence[str], act: Callable[[], T]) -> T:
        """Record the call, apply a queued fault, act; a refusal becomes the typed error the real boundary raises."""
        argv = (self.binary, *args)
        command = " ".join(args[:2])
        with self._lock:
            if self.down is not None:
                self._record(argv, 255, "", self.down.message)
                raise self.down
            queued = self.faults.get(command, [])
            fault = next((f for f in queued if f.word is None or f.word in args), None)
            if fault is not None:
                queued.remove(fault)
            if fault is not None and not fault.after:
                raise self._failed(argv, fault)
            try:
                result = act()
            except _Refusal as refusal:
                call = self._record(argv, 1, "", json.dumps({"id": f"cli:{':'.join(args[:2])}", "error": {"code": refusal.code, "message": refusal.message}}))
                raise error_for(call) from None
            if fault is not None:
                raise self._failed(argv, fault)
            self._record(argv, 0, "", "")
            return result

    def _failed(self, argv: tuple[str, ...], fault: _Fault) -> HerdrFailure:
        if fault.error is not None:
            self._record(argv, 1, "", "")
            return fault.error
        if fault.code is not None:
            body = json.dumps({"id": "cli:request", "error": {"code": fault.code, "message": fault.message}})
            return error_for(self._record(argv, 1, "", body))
        call = self._record(argv, -9, "", "")  # as HerdrCli reports a herdr process killed by SIGKILL
        return HerdrCallLost(
            f"{call.command}: the herdr process died of signal 9; its outcome is unknown",
            call=call,
            hint="a mutating call may still have taken effect; read herdr's state back before repeating it",
        )

    def _record(self, argv: tuple[str, ...], returncode: int, stdout: str, stderr: str) -> HerdrCall:
        call = HerdrCall(argv, returncode, stdout, stderr, 0.0)
        self.calls.append(call)
        return call

    def _refusal(self, code: str, message: str) -> _Refusal:
        return _Refusal(code, message)

    def _read(self, pane: FakePane, lines: int | None) -> str:
        shown = _last(pane.screen, lines)
        if pane.after_read is not None:
            pane.screen, pane.after_read = pane.after_read, None
        return shown

    def _current(self) -> str:
        if self.current_pane is None:
            raise self._refusal("pane_not_found", "pane not found")
        return self.aliases.get(self.current_pane, self.current_pane)

    def _ws(self, workspace_id: str) -> FakeWorkspace:
        if workspace_id not in self.workspaces:
            raise self._refusal("workspace_not_found", f"workspace {workspace_id} not found")
        return self.workspaces[workspace_id]

    def _tab(self, tab_id: str) -> FakeTab:
        if tab_id not in self.tabs:
            raise self._refusal("tab_not_found", f"tab {tab_id} not found")
        return self.tabs[tab_id]

    def _pane(self, pane_id: str) -> FakePane:
        """A pane by its current id or an alias (pane commands accept both)."""
        current = self.aliases.get(pane_id, pane_id)
        if current not in self.panes:
            raise self._refusal("pane_not_found", f"pane {pane_id} not found")
        return self.panes[current]

    def _agent_panes(self) -> list[FakePane]:
        return [self.panes[p] for w in self.workspaces.values() for t in w.tabs for p in self.tabs[t].panes if self.panes[p].agent is not None]

    def _target(self, target: str) -> FakePane:
        """An agent target: a unique agent name, or the pane's current canonical id (never an alias; CONTRACT §8.1)."""
        named = [p for p in self._agent_panes() if p.agent is not None and p.agent.name == target]
        if len(named) > 1:
            raise self._refusal("agent_target_ambiguous", f"agent target {target} is ambiguous")
        if named:
            return named[0]
        pane = self.panes.get(target)
        if pane is None or pane.agent is None:
            raise self._refusal("agent_not_found", f"agent target {target} not found")
        return pane

    def _new_workspace(self, cwd: str, label: str | None, worktree: WorkspaceWorktree | None = None, group: str | None = None) -> tuple[FakeWorkspace, FakeTab, FakePane]:
        ws = FakeWorkspace(workspace_id=f"w{herdr_number(self._next_workspace)}", cwd=cwd, label=label, worktree=worktree, group=group)
        self._next_workspace += 1
        self.workspaces[ws.workspace_id] = ws
        tab = self._new_tab(ws, None)
        return ws, tab, self._new_pane(ws, tab, cwd)

    def _new_tab(self, ws: FakeWorkspace, label: str | None) -> FakeTab:
        tab = FakeTab(tab_id=f"{ws.workspace_id}:t{herdr_number(ws.next_tab)}", workspace_id=ws.workspace_id, number=ws.next_tab, label=label)
        ws.next_tab += 1
        ws.tabs.append(tab.tab_id)
        self.tabs[tab.tab_id] = tab
        return tab

    def _new_pane(self, ws: FakeWorkspace, tab: FakeTab, cwd: str, *, rect: Rect = AREA) -> FakePane:
        pane = FakePane(pane_id=f"{ws.workspace_id}:p{herdr_number(ws.next_pane)}", workspace_id=ws.workspace_id, tab_id=tab.tab_id, cwd=cwd,
                        terminal_id=f"term_{self._next_terminal:x}", rect=rect)  # fmt: skip
        ws.next_pane += 1
        self._next_terminal += 1
        tab.panes.append(pane.pane_id)
        self.panes[pane.pane_id] = pane
        return pane

    def _drop_workspace(self, workspace_id: str) -> None:
        ws = self.workspaces.pop(workspace_id)
        for tab_id in ws.tabs:
            for pane_id in self.tabs.pop(tab_id).panes:
                del self.panes[pane_id]

    def _source(self, workspace: str | None, cwd: PathArg | None, *, linked_ok: bool) -> tuple[str, str | None]:
        """The repository root a worktree command works on, and its source workspace (CONTRACT §9)."""
        if workspace is not None and cwd is not None:
            raise ValueError("give workspace or cwd, not both (herdr exits 2)")
        if workspace is not None:
            ws = self._ws(workspace)
            if ws.worktree is not None and ws.worktree.is_linked_worktree and not linked_ok:
                raise self._refusal("linked_worktree_source", f"workspace {workspace} is a linked worktree")
            where, source = ws.cwd, ws.workspace_id
        else:
            where, source = os.fspath(cwd) if cwd is not None else self.pane(self._current()).cwd, None
        common = _git(where, "rev-parse", "--path-format=absolute", "--git-common-dir")
        if common.returncode != 0:
            raise self._refusal("not_git_worktree", f"{where} is not inside a git worktree")
        return str(Path(common.stdout.strip()).parent), source

    def _wt_source(self, root: str, source_ws: str | None) -> WorktreeSource:
        return WorktreeSource(repo_key=str(Path(root) / ".git"), repo_name=Path(root).name, repo_root=root, source_checkout_path=root, source_workspace_id=source_ws)

    def _worktrees(self, root: str) -> tuple[WorktreeInfo, ...]:
        """``git worktree list --porcelain``, each with the workspace open at its path (if any)."""
        out = _git(root, "worktree", "list", "--porcelain").stdout
        found: list[WorktreeInfo] = []
        for index, block in enumerate(b for b in out.strip().split("\n\n") if b.strip()):
            fields = dict((line.split(" ", 1) + [""])[:2] for line in block.splitlines())
            path = fields["worktree"]
            branch = fields.get("branch", "").removeprefix("refs/heads/") or None
            open_ws = next((w.workspace_id for w in self.workspaces.values() if _same(w.cwd, path)), None)
            found.append(WorktreeInfo(path=path, is_bare="bare" in fields, is_detached="detached" in fields, is_prunable="prunable" in fields,
                                      is_linked_worktree=index > 0, label=Path(path).name, branch=branch, open_workspace_id=open_ws))  # fmt: skip
        return tuple(found)

    def _open_checkout(self, root: str, path: str, label: str | None, source_ws: str | None) -> tuple[str, str, str]:
        """The workspace open at ``path``, or a new one rooted there (tab :t1, pane :p1) in the source's group."""
        existing = next((w for w in self.workspaces.values() if _same(w.cwd, path)), None)
        if existing is not None:
            tab = self.tabs[existing.tabs[0]]
            return existing.workspace_id, tab.tab_id, tab.panes[0]
        parent = source_ws or next((w.workspace_id for w in self.workspaces.values() if _same(w.cwd, root)), None)
        info = WorkspaceWorktree(repo_key=str(Path(root) / ".git"), repo_name=Path(root).name, repo_root=root, checkout_path=path, is_linked_worktree=True)
        ws, tab, pane = self._new_workspace(path, label, info, parent)
        return ws.workspace_id, tab.tab_id, pane.pane_id

    def _status_of(self, pane_ids: Sequence[str]) -> AgentStatus:
        statuses = [a.status for a in (self.panes[p].agent for p in pane_ids) if a is not None]
        for status in ("blocked", "working", "done", "idle"):
            if status in statuses:
                return status
        return "unknown"

    def _ws_info(self, workspace_id: str) -> WorkspaceInfo:
        ws = self.workspaces[workspace_id]
        panes = [p for t in ws.tabs for p in self.tabs[t].panes]
        focused = self.current_pane is not None and self._current() in panes
        return WorkspaceInfo(
            workspace_id=ws.workspace_id, number=list(self.workspaces).index(workspace_id) + 1, label=ws.label or Path(ws.cwd).name,
            focused=focused, pane_count=len(panes), tab_count=len(ws.tabs), active_tab_id=ws.tabs[0], agent_status=self._status_of(panes),
            worktree=ws.worktree,
        )  # fmt: skip

    def _tab_info(self, tab_id: str) -> TabInfo:
        tab = self.tabs[tab_id]
        position = self.workspaces[tab.workspace_id].tabs.index(tab_id) + 1
        focused = self.current_pane is not None and self._current() in tab.panes
        return TabInfo(tab_id=tab_id, workspace_id=tab.workspace_id, number=tab.number, label=tab.label or str(position), focused=focused,
                       pane_count=len(tab.panes), agent_status=self._status_of(tab.panes))  # fmt: skip

    def _pane_info(self, pane_id: str) -> PaneInfo:
        pane = self._pane(pane_id)
        agent = pane.agent
        return PaneInfo(
            pane_id=pane.pane_id, terminal_id=pane.terminal_id, workspace_id=pane.workspace_id, tab_id=pane.tab_id,
            focused=pane.pane_id == self.current_pane, agent_status=agent.status if agent else "unknown", revision=pane.revision,
            cwd=pane.cwd, foreground_cwd=pane.cwd, label=pane.label, agent=agent.kind if agent else None, agent_session=pane.session,
        )  # fmt: skip

    def _agent_info(self, pane: FakePane) -> AgentInfo:
        agent = pane.agent
        assert agent is not None
        return AgentInfo(
            terminal_id=pane.terminal_id, agent_status=agent.status, workspace_id=pane.workspace_id, tab_id=pane.tab_id, pane_id=pane.pane_id,
            focused=pane.pane_id == self.current_pane, revision=pane.revision, state_change_seq=agent.seq, name=agent.name, agent=agent.kind,
            interactive_ready=agent.ready, cwd=pane.cwd, foreground_cwd=pane.cwd, agent_session=pane.session, completion_seq=agent.completion,
        )  # fmt: skip

    def _layout(self, tab_id: str) -> PaneLayoutSnapshot:
        tab = self.tabs[tab_id]
        panes = tuple(LayoutPane(pane_id=p, focused=p == self.current_pane, rect=self.panes[p].rect) for p in tab.panes)
        focused = next((p for p in tab.panes if p == self.current_pane), tab.panes[0])
        return PaneLayoutSnapshot(workspace_id=tab.workspace_id, tab_id=tab_id, zoomed=False, area=AREA, focused_pane_id=focused, panes=panes, splits=tuple(tab.splits))


class _Refusal(Exception):
    """herdr answered with a JSON error body (turned into the boundary's typed error by ``FakeHerdr._call``)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(code)
        self.code, self.message = code, message


def _last(text: str, lines: int | None) -> str:
    return text if lines is None else "".join(text.splitlines(keepends=True)[-lines:])


def _slug(branch: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", branch.lower()).strip("-") or "worktree"


def _same(a: str, b: str) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


def _git(cwd: str, *args: str) -> subprocess.CompletedProcess[str]:
    # Real git, as herdr's server runs it; the test's private HOME and identity come from tests/conftest.py.
    return subprocess.run(["git", "-C", cwd, *args], capture_output=True, text=True, check=False)


if TYPE_CHECKING:
    # `python3 -m mypy` checks this file (pyproject's [tool.mypy] files): the fake must satisfy the protocol.
    _IS_A_HERDR: Herdr = FakeHerdr()
