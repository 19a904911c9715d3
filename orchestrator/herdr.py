"""The herdr boundary: the only module that runs the herdr CLI (argv, timeouts, parsing, error mapping, retries).

Everything else in orch talks to herdr through the ``Herdr`` Protocol; nothing else may import subprocess for herdr.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

import pydantic
import tenacity

from orchestrator import crash_seam
from orchestrator.children import run_child
from orchestrator.remote import SSH_FAILED, ssh_argv
from orchestrator.errors import (
    HERDR_ERROR_BY_CODE,
    HerdrAgentBlocked,
    HerdrCall,
    HerdrCallLost,
    HerdrCommandError,
    HerdrFailure,
    HerdrMissing,
    HerdrPaneBusy,
    HerdrProtocolError,
    HerdrTimeout,
    HerdrUnavailable,
    HerdrUsageError,
    HostUnreachable,
    one_line,
)
from orchestrator.herdr_models import (
    AgentExplain,
    AgentInfo,
    AgentInfoResult,
    AgentListResult,
    AgentPrompted,
    AgentSession,
    AgentStarted,
    AgentStatus,
    ErrorBody,
    ErrorEnvelope,
    HerdrFeatures,
    HerdrStatus,
    HerdrVersion,
    IntegrationEntry,
    MachineStatus,
    MachineStatusList,
    OkResult,
    PaneCurrentResult,
    PaneInfo,
    PaneInfoResult,
    PaneLayoutResult,
    PaneLayoutSnapshot,
    PaneListResult,
    PaneMoved,
    PaneMoveResult,
    ReadSource,
    ServerStatus,
    SessionList,
    SplitDirection,
    SuccessEnvelope,
    TabCreated,
    VersionSupport,
    TabInfo,
    TabInfoResult,
    TabListResult,
    WorkspaceCreated,
    WorkspaceInfo,
    WorkspaceInfoResult,
    WorkspaceListResult,
    WorktreeCreated,
    WorktreeListResult,
    WorktreeOpened,
    WorktreeRemoved,
)

DEFAULT_TIMEOUT_S = 30.0
# git runs inside worktree create/remove and herdr sets no client timeout for them (CONTRACT §9).
WORKTREE_TIMEOUT_S = 180.0
# Our wall clock for a call that waits inside herdr: herdr's own timeout plus this, so herdr reports first.
WAIT_MARGIN_S = 15.0
# herdr's default agent start timeout (CONTRACT §8.5).
AGENT_START_DEFAULT_MS = 30_000

# The herdr releases orch is tested against (the simulator's profiles: docs/simulator.md). 0.9.0 to 0.9.5 share
# protocol 22 and are judged alike (0.9.0-0.9.1 as the 0.9.1 profile, 0.9.2-0.9.5 as the 0.9.5 one).
TESTED_VERSIONS = ("0.7.5", "0.8.2", "0.9.1", "0.9.5")
NEWEST_TESTED = (0, 9, 5)
MINIMUM_VERSION = (0, 7, 5)
# shift+tab reaches the agent as Shift+Tab from here on (../herdr-0.8.2/DELTA.md row 7, commit adb50cba).
SHIFT_TAB_VERSION = (0, 8, 2)
# From 0.8.0 `agent prompt` answers, then writes Enter 300 ms later (#1878, ../herdr-0.8.2/DELTA.md row 5); from 0.9.0
# the Enter is written before the answer (../herdr-0.9.1/DELTA.md row 1). In that window a second prompt to the same
# agent is typed into the same unsubmitted input, so two callbacks can reach the controller agent as one prompt.
LATE_ENTER_VERSIONS = ((0, 8, 0), (0, 9, 0))
LATE_ENTER_S = 0.3
# `completion_seq` on agent info and resume commands (../herdr-0.9.5/DELTA.md rows 1, 6), worktree `--trust-repository`
# (0.9.1 DELTA row 6).
COMPLETION_SEQ_VERSION = (0, 9, 2)
TRUST_REPOSITORY_VERSION = (0, 9, 0)
# Where to get a herdr orch supports: every hint that says "install herdr" names these.
INSTALL_HINT = f"install herdr {', '.join(TESTED_VERSIONS[:-1])} or {TESTED_VERSIONS[-1]}, or point orch at it with `orch --herdr PATH` or ORCH_HERDR"

Env = Mapping[str, str]
PathArg = str | os.PathLike[str]

_OS_ERROR = re.compile(r"^Error: Os \{.*\bkind: (?P<kind>\w+)")
_CUSTOM_ERROR = re.compile(r"^Error: Custom \{")
_VERSION = re.compile(r"^herdr (?P<version>\S+)$")
_INTEGRATION_LINE = re.compile(
    r"^(?P<target>[^:\s]+): (?:"
    r"(?P<not_installed>not installed)"
    r"|current \((?:v(?P<current>\d+)|(?P<current_legacy>legacy))\)"
    r"|outdated \((?:v(?P<outdated>\d+)|(?P<outdated_legacy>legacy)) < v(?P<expected>\d+)\)"
    # herdr 0.8.2 src/cli/integration.rs:50-56: installed >= expected but still Outdated (grok, opencode).
    r"|needs repair \((?:v(?P<repair>\d+)|(?P<repair_legacy>legacy))\)"
    r") \((?P<path>.*)\)$"
)
# Any other `<target>: <state> (<path>)` line: a state a newer herdr added. Kept and quoted, never a parse failure.
_INTEGRATION_ANY = re.compile(r"^(?P<target>[^:\s]+): (?P<state>.*?)(?: \((?P<path>[^()]*)\))?$")

R = TypeVar("R", bound=pydantic.BaseModel)


class Runner(Protocol):
    """Runs one argv (no shell) and returns the finished process; raises like ``subprocess.run`` does."""

    def __call__(self, argv: Sequence[str], *, env: Env, timeout: float) -> subprocess.CompletedProcess[str]: ...


def run_process(argv: Sequence[str], *, env: Env, timeout: float) -> subprocess.CompletedProcess[str]:
    """The default runner: the argv as a child that outlives an interrupt (``orchestrator.children.run_child``)."""
    return run_child(argv, env=env, timeout=timeout)


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long the boundary retries the calls that are safe to repeat."""

    read_attempts: int = 3
    read_wait_s: float = 0.5
    # A freshly created pane's shell may still be starting (rc files, prompt); herdr then answers
    # agent_pane_busy before typing anything. 20 waits of 0.5 s bound that at about 10 s.
    busy_attempts: int = 21
    busy_wait_s: float = 0.5


class Herdr(Protocol):
    """What the engine may ask of herdr; ``HerdrCli`` is the real implementation."""

    binary: str
    calls: list[HerdrCall]

    def version(self) -> HerdrVersion: ...
    def features(self) -> HerdrFeatures: ...
    def help_text(self) -> str: ...
    def status(self) -> HerdrStatus: ...
    def session_list(self) -> SessionList: ...
    def integration_status(self) -> tuple[IntegrationEntry, ...]: ...
    def api_schema_methods(self) -> tuple[str, ...]: ...
    def workspace_list(self) -> tuple[WorkspaceInfo, ...]: ...
    def workspace_create(self, *, cwd: PathArg | None = None, label: str | None = None, env: Env | None = None) -> WorkspaceCreated: ...
    def workspace_get(self, workspace_id: str) -> WorkspaceInfo: ...
    def workspace_close(self, workspace_id: str) -> None: ...
    def tab_list(self, *, workspace: str | None = None) -> tuple[TabInfo, ...]: ...
    def tab_create(self, *, workspace: str | None = None, cwd: PathArg | None = None, label: str | None = None, env: Env | None = None) -> TabCreated: ...
    def tab_rename(self, tab_id: str, label: str) -> TabInfo: ...
    def tab_close(self, tab_id: str) -> None: ...
    def pane_current(self, *, pane: str | None = None) -> PaneInfo: ...
    def pane_list(self, *, workspace: str | None = None) -> tuple[PaneInfo, ...]: ...
    def pane_get(self, pane_id: str) -> PaneInfo: ...
    def pane_layout(self, pane_id: str) -> PaneLayoutSnapshot: ...
    def pane_split(self, pane_id: str, *, direction: SplitDirection, ratio: float | None = None, cwd: PathArg | None = None, env: Env | None = None) -> PaneInfo: ...
    def pane_move_new_tab(self, pane_id: str, *, workspace: str | None = None, label: str | None = None) -> PaneMoveResult: ...
    def pane_read(self, pane_id: str, *, source: ReadSource = "recent", lines: int | None = None) -> str: ...
    def pane_send_text(self, pane_id: str, text: str) -> None: ...
    def pane_send_keys(self, pane_id: str, *keys: str) -> None: ...
    def pane_run(self, pane_id: str, command: str) -> None: ...
    def pane_close(self, pane_id: str) -> None: ...
    def pane_report_agent_session(self, pane_id: str, *, source: str, agent: str, session: AgentSession, resume: Sequence[str]) -> None: ...
    def pane_rename(self, pane_id: str, label: str | None) -> PaneInfo: ...
    def worktree_list(self, *, workspace: str | None = None, cwd: PathArg | None = None) -> WorktreeListResult: ...
    def worktree_create(self, *, workspace: str | None = None, cwd: PathArg | None = None, branch: str | None = None, base: str | None = None, path: PathArg | None = None, label: str | None = None) -> WorktreeCreated: ...
    def worktree_open(self, *, workspace: str | None = None, cwd: PathArg | None = None, path: PathArg | None = None, branch: str | None = None, label: str | None = None) -> WorktreeOpened: ...
    def worktree_remove(self, workspace_id: str, *, force: bool = False) -> WorktreeRemoved: ...
    def agent_list(self) -> tuple[AgentInfo, ...]: ...
    def agent_get(self, target: str) -> AgentInfo: ...
    def agent_start(self, name: str, *, kind: str, pane: str, timeout_ms: int | None = None, args: Sequence[str] = ()) -> AgentStarted: ...
    def agent_prompt(self, target: str, text: str, *, wait: bool = False, until: Sequence[AgentStatus] = (), timeout_ms: int | None = None) -> AgentPrompted: ...
    def agent_wait(self, target: str, *, until: Sequence[AgentStatus] = (), timeout_ms: int) -> AgentInfo: ...
    def agent_read(self, target: str, *, source: ReadSource = "recent", lines: int | None = None) -> str: ...
    def agent_send_keys(self, target: str, *keys: str) -> None: ...
    def agent_rename(self, target: str, name: str | None) -> AgentInfo: ...
    def agent_focus(self, target: str) -> AgentInfo: ...
    def agent_explain(self, target: str) -> AgentExplain: ...


class HerdrCli:
    """Runs the herdr CLI: one method per herdr command, argv exactly as herdr 0.7.5 accepts it."""

    def __init__(
        self,
        binary: str = "herdr",
        *,
        env: Env | None = None,
        session: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        worktree_timeout_s: float = WORKTREE_TIMEOUT_S,
        wait_margin_s: float = WAIT_MARGIN_S,
        runner: Runner = run_process,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        on_call: Callable[[HerdrCall], None] | None = None,
        machine: str | None = None,
        ssh: str | None = None,
    ) -> None:
        if machine is not None and (session is not None or ssh is not None):
            raise ValueError("herdr --machine uses the saved machine's session; give no session and no ssh target with it")
        if machine is not None and (not machine.strip() or machine.startswith("-")):
            raise ValueError(f"herdr refuses the machine selector {machine!r}")
        self.binary = binary
        # Another host's herdr: through the controller's saved machine (`herdr --machine LABEL …`, 0.9.1+), or, for
        # what herdr does not forward (integration status), the host's own herdr over ssh (orchestrator.remote).
        self.machine = machine
        self.ssh = ssh
        self.env_overlay = dict(env or {})
        self.session = session
        self.timeout_s = timeout_s
        self.worktree_timeout_s = worktree_timeout_s
        self.wait_margin_s = wait_margin_s
        self.runner = runner
        self.retry = retry or RetryPolicy()
        self.sleep = sleep
        self.clock = clock
        self.on_call = on_call
        self.calls: list[HerdrCall] = []
        self._features: HerdrFeatures | None = None
        # The plan's policy says the person verified the repository (`[policy] trust_repository`, set by
        # Engine.plan_for): worktree commands then carry --trust-repository where herdr has it (0.9.0+). Decided
        # before any call, never after a refusal: no worktree command is retried.
        self.trust_repository = False

    # --- discovery and preflight (local commands: no server needed) ---

    def version(self) -> HerdrVersion:
        """``herdr --version``."""
        call = self._run(["--version"], retry_reads=True)
        text = call.stdout.strip()
        match = _VERSION.match(text)
        if match is None:
            raise _protocol(call, f"unexpected version line {text!r}")
        return HerdrVersion(text=text, version=match["version"])

    def features(self) -> HerdrFeatures:
        """What this herdr can do, from the running server's version (the client's when none runs); asked once."""
        if self._features is None:
            if self.machine is not None:
                # `herdr --machine` does not forward `status --json`, only `status server` (0.9.1 DELTA "What is
                # forwarded"): another host's server says its own version there.
                server = self.server_status()
                self._features = features_of(server.version or "unknown")
                return self._features
            status = self.status()
            self._features = features_of((status.server.version if status.server.running else None) or status.client.version)
        return self._features

    def help_text(self) -> str:
        """``herdr --help`` (plain ``herdr`` would launch the TUI)."""
        return self._run(["--help"], retry_reads=True).stdout

    def status(self) -> HerdrStatus:
        """``herdr status --json``; works whether or not the server runs."""
        return self._bare(["status", "--json"], HerdrStatus, retry_reads=True)

    def session_list(self) -> SessionList:
        """``herdr session list --json`` (no envelope)."""
        return self._bare(["session", "list", "--json"], SessionList, retry_reads=True)

    def integration_status(self) -> tuple[IntegrationEntry, ...]:
        """``herdr integration status``: one text line per integration target, parsed (CONTRACT §4)."""
        call = self._run(["integration", "status"], retry_reads=True)
        return tuple(_parse_integration_line(line) for line in call.stdout.splitlines() if line.strip())

    def api_schema_methods(self) -> tuple[str, ...]:
        """The socket method names in ``herdr api schema --json``, in schema order."""
        call = self._run(["api", "schema", "--json"], retry_reads=True)
        try:
            variants = json.loads(call.stdout)["schemas"]["request"]["oneOf"]
            methods = tuple(str(variant["properties"]["method"]["const"]) for variant in variants)
        except (ValueError, KeyError, TypeError) as exc:
            raise _protocol(call, f"api schema has no request methods ({exc.__class__.__name__})") from exc
        return methods

    # --- saved machines (0.9.1 DELTA "Multi-machine", 0.9.5 DELTA row 4) ---

    def machine_status(self, selector: str) -> MachineStatus:
        """``herdr machine status SELECTOR --json`` (0.9.2+, local: a fresh, non-interactive check of one saved
        machine); the entry for ``selector`` (by profile ID or label)."""
        call = self._run(["machine", "status", _text_word(selector, "machine selector"), "--json"], retry_reads=True)
        try:
            machines = MachineStatusList.model_validate_json(call.stdout).machines
        except pydantic.ValidationError as exc:
            raise _protocol(call, validation_summary(exc)) from None
        found = next((m for m in machines if selector in (m.id, m.label)), machines[0] if len(machines) == 1 else None)
        if found is None:
            raise _protocol(call, f"machine status lists no machine {selector!r}")
        return found

    def server_status(self) -> ServerStatus:
        """``herdr status server --json``: the server alone (the one `status` form ``--machine`` forwards)."""
        return self._bare(["status", "server", "--json"], ServerStatus, retry_reads=True)

    # --- workspaces (CONTRACT §5) ---

    def workspace_list(self) -> tuple[WorkspaceInfo, ...]:
        """``herdr workspace list`` (never ``--json``: herdr rejects it)."""
        return self._result(["workspace", "list"], WorkspaceListResult, retry_reads=True).workspaces

    def workspace_create(self, *, cwd: PathArg | None = None, label: str | None = None, env: Env | None = None) -> WorkspaceCreated:
        """``herdr workspace create … --no-focus``; use ``.root_pane.pane_id`` to reach its first pane."""
        argv = ["workspace", "create", *_opt("--cwd", cwd), *_opt("--label", label), *_env_flags(env), "--no-focus"]
        return self._result(argv, WorkspaceCreated)

    def workspace_get(self, workspace_id: str) -> WorkspaceInfo:
        """``herdr workspace get <id>``."""
        return self._result(["workspace", "get", workspace_id], WorkspaceInfoResult, retry_reads=True).workspace

    def workspace_close(self, workspace_id: str) -> None:
        """``herdr workspace close <id>``; closing a worktree group's parent closes the whole group."""
        self._result(["workspace", "close", workspace_id], OkResult)

    # --- tabs (CONTRACT §6) ---

    def tab_list(self, *, workspace: str | None = None) -> tuple[TabInfo, ...]:
        """``herdr tab list [--workspace ID]`` (all workspaces without it)."""
        return self._result(["tab", "list", *_opt("--workspace", workspace)], TabListResult, retry_reads=True).tabs

    def tab_create(self, *, workspace: str | None = None, cwd: PathArg | None = None, label: str | None = None, env: Env | None = None) -> TabCreated:
        """``herdr tab create … --no-focus``."""
        argv = ["tab", "create", *_opt("--workspace", workspace), *_opt("--cwd", cwd), *_opt("--label", label), *_env_flags(env), "--no-focus"]
        return self._result(argv, TabCreated)

    def tab_rename(self, tab_id: str, label: str) -> TabInfo:
        """``herdr tab rename <tab_id> <label>`` with the label as one argv word."""
        return self._result(["tab", "rename", tab_id, _text_word(label, "label")], TabInfoResult).tab

    def tab_close(self, tab_id: str) -> None:
        """``herdr tab close <tab_id>``."""
        self._result(["tab", "close", tab_id], OkResult)

    # --- panes (CONTRACT §7) ---

    def pane_current(self, *, pane: str | None = None) -> PaneInfo:
        """``herdr pane current --current`` (the caller's HERDR_PANE_ID) or ``--pane ID``."""
        argv = ["pane", "current", *(["--pane", pane] if pane is not None else ["--current"])]
        return self._result(argv, PaneCurrentResult, retry_reads=True).pane

    def pane_list(self, *, workspace: str | None = None) -> tuple[PaneInfo, ...]:
        """``herdr pane list [--workspace ID]``."""
        return self._result(["pane", "list", *_opt("--workspace", workspace)], PaneListResult, retry_reads=True).panes

    def pane_get(self, pane_id: str) -> PaneInfo:
        """``herdr pane get <pane_id>``."""
        return self._result(["pane", "get", pane_id], PaneInfoResult, retry_reads=True).pane

    def pane_layout(self, pane_id: str) -> PaneLayoutSnapshot:
        """``herdr pane layout --pane ID``; never ``--current``, which means the UI-focused pane here (CONTRACT §13.1)."""
        return self._result(["pane", "layout", "--pane", pane_id], PaneLayoutResult, retry_reads=True).layout

    def pane_split(self, pane_id: str, *, direction: SplitDirection, ratio: float | None = None, cwd: PathArg | None = None, env: Env | None = None) -> PaneInfo:
        """``herdr pane split --pane ID --direction D … --no-focus``; returns the NEW pane."""
        argv = ["pane", "split", "--pane", pane_id, "--direction", direction, *_opt("--ratio", _ratio(ratio)), *_opt("--cwd", cwd), *_env_flags(env), "--no-focus"]
        return self._result(argv, PaneInfoResult).pane

    def pane_move_new_tab(self, pane_id: str, *, workspace: str | None = None, label: str | None = None) -> PaneMoveResult:
        """``herdr pane move <pane> --new-tab [--workspace W] [--label L] --no-focus`` (move focuses by default)."""
        argv = ["pane", "move", pane_id, "--new-tab", *_opt("--workspace", workspace), *_opt("--label", label), "--no-focus"]
        return self._result(argv, PaneMoved).move_result

    def pane_read(self, pane_id: str, *, source: ReadSource = "recent", lines: int | None = None) -> str:
        """``herdr pane read <pane> --source S [--lines N]``: the raw text, ANSI stripped, exactly as printed."""
        return self._run(["pane", "read", pane_id, "--source", source, *_opt("--lines", _uint("--lines", lines, _U32_MAX))], retry_reads=True).stdout

    def pane_send_text(self, pane_id: str, text: str) -> None:
        """``herdr pane send-text <pane> <text>``: bytes unchanged, no Enter."""
        self._run(["pane", "send-text", pane_id, _text_word(text, "text")])

    def pane_send_keys(self, pane_id: str, *keys: str) -> None:
        """``herdr pane send-keys <pane> <key>…`` (herdr checks every key before sending any)."""
        if not keys:
            raise ValueError("pane_send_keys needs at least one key")
        self._run(["pane", "send-keys", pane_id, *(_text_word(key, "key") for key in keys)])

    def pane_run(self, pane_id: str, command: str) -> None:
        """``herdr pane run <pane> <command>``: the text then Enter, in one write."""
        self._run(["pane", "run", pane_id, _text_word(command, "command")])

    def pane_close(self, pane_id: str) -> None:
        """``herdr pane close <pane>``; a worktree group's parent gives HerdrConfirmationRequired and closes nothing."""
        self._result(["pane", "close", pane_id], OkResult)

    def pane_report_agent_session(self, pane_id: str, *, source: str, agent: str, session: AgentSession, resume: Sequence[str]) -> None:
        """``herdr pane report-agent-session <pane> --source S --agent A --agent-session-id|-path V -- RESUME…``
        (0.9.2+): the session herdr holds and the command that resumes it after a restart; never a state."""
        if not resume or resume[0].startswith("-") or "/" in resume[0]:
            raise ValueError("a resume command starts with a plain command name (herdr refuses anything else)")
        flag = "--agent-session-id" if session.kind == "id" else "--agent-session-path"
        self._run(["pane", "report-agent-session", pane_id, "--source", source, "--agent", agent, flag, session.value, "--", *resume])

    def pane_rename(self, pane_id: str, label: str | None) -> PaneInfo:
        """``herdr pane rename <pane> <label>``, or ``--clear`` when label is None."""
        value = "--clear" if label is None else _text_word(label, "label", reserved=("--clear",))
        return self._result(["pane", "rename", pane_id, value], PaneInfoResult).pane

    # --- worktrees (CONTRACT §9) ---

    def _trust(self) -> list[str]:
        """``--trust-repository`` when the plan's policy verified the repository and this herdr takes it (0.9.0+)."""
        return ["--trust-repository"] if self.trust_repository and self.features().trust_repository else []

    def worktree_list(self, *, workspace: str | None = None, cwd: PathArg | None = None) -> WorktreeListResult:
        """``herdr worktree list [--workspace ID | --cwd PATH] [--trust-repository] --json``."""
        argv = ["worktree", "list", *_source(workspace, cwd), *self._trust(), "--json"]
        return self._result(argv, WorktreeListResult, retry_reads=True)

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
        """``herdr worktree create … --no-focus --json``: creates a NEW workspace for the checkout, never a tab."""
        argv = [
            "worktree", "create", *_source(workspace, cwd), *_opt("--branch", branch), *_opt("--base", base),
            *_opt("--path", path), *_opt("--label", label), "--no-focus", *self._trust(), "--json",
        ]  # fmt: skip
        return self._result(argv, WorktreeCreated, timeout=self.worktree_timeout_s)

    def worktree_open(
        self,
        *,
        workspace: str | None = None,
        cwd: PathArg | None = None,
        path: PathArg | None = None,
        branch: str | None = None,
        label: str | None = None,
    ) -> WorktreeOpened:
        """``herdr worktree open (--path P | --branch B) … --no-focus --json``; reuses a workspace already open there."""
        if (path is None) == (branch is None):
            raise ValueError("worktree_open needs exactly one of path or branch")
        argv = ["worktree", "open", *_source(workspace, cwd), *_opt("--path", path), *_opt("--branch", branch), *_opt("--label", label), "--no-focus", *self._trust(), "--json"]
        return self._result(argv, WorktreeOpened, timeout=self.worktree_timeout_s)

    def worktree_remove(self, workspace_id: str, *, force: bool = False) -> WorktreeRemoved:
        """``herdr worktree remove --workspace ID [--force] --json``; the branch is kept."""
        argv = ["worktree", "remove", "--workspace", workspace_id, *(["--force"] if force else []), *self._trust(), "--json"]
        return self._result(argv, WorktreeRemoved, timeout=self.worktree_timeout_s)

    # --- agents (CONTRACT §8) ---

    def agent_list(self) -> tuple[AgentInfo, ...]:
        """``herdr agent list`` (agent panes only; never ``--json``)."""
        return self._result(["agent", "list"], AgentListResult, retry_reads=True).agents

    def agent_get(self, target: str) -> AgentInfo:
        """``herdr agent get <target>`` (a unique agent name or the pane's current id)."""
        return self._result(["agent", "get", target], AgentInfoResult, retry_reads=True).agent

    def agent_start(self, name: str, *, kind: str, pane: str, timeout_ms: int | None = None, args: Sequence[str] = ()) -> AgentStarted:
        """``herdr agent start NAME --kind K --pane P [--timeout MS] [-- args…]``; returns once interactive-ready."""
        argv = ["agent", "start", name, "--kind", kind, "--pane", pane, *_opt("--timeout", _uint("--timeout", timeout_ms, _U64_MAX))]
        if args:
            argv += ["--", *args]
        limit = (timeout_ms or AGENT_START_DEFAULT_MS) / 1000 + self.wait_margin_s
        return self._result(argv, AgentStarted, timeout=limit, retry_busy=True)

    def agent_prompt(self, target: str, text: str, *, wait: bool = False, until: Sequence[AgentStatus] = (), timeout_ms: int | None = None) -> AgentPrompted:
        """``herdr agent prompt <target> <text> [--wait [--until S]… [--timeout MS]]``; exit 0 only means submitted."""
        if not wait and (until or timeout_ms is not None):
            raise ValueError("agent_prompt: until and timeout_ms need wait=True (herdr exits 2 otherwise)")
        if wait and timeout_ms is None:
            raise ValueError("agent_prompt: wait=True needs timeout_ms; herdr would otherwise wait forever")
        argv = ["agent", "prompt", target, _text_word(text, "prompt text")]
        limit = None
        if wait:
            argv += ["--wait", *_until_flags(until), "--timeout", str(_uint("--timeout", timeout_ms, _U64_MAX))]
            limit = (timeout_ms or 0) / 1000 + self.wait_margin_s
        return self._result(argv, AgentPrompted, timeout=limit)

    def agent_wait(self, target: str, *, until: Sequence[AgentStatus] = (), timeout_ms: int) -> AgentInfo:
        """``herdr agent wait <target> [--until S]… --timeout MS``; HerdrWaitExpired is a check-in, not a verdict."""
        argv = ["agent", "wait", target, *_until_flags(until), "--timeout", str(_uint("--timeout", timeout_ms, _U64_MAX))]
        return self._result(argv, AgentInfoResult, timeout=timeout_ms / 1000 + self.wait_margin_s).agent

    def agent_read(self, target: str, *, source: ReadSource = "recent", lines: int | None = None) -> str:
        """``herdr agent read <target> --source S [--lines N]``: the raw text exactly as printed."""
        return self._run(["agent", "read", target, "--source", source, *_opt("--lines", _uint("--lines", lines, _U32_MAX))], retry_reads=True).stdout

    def agent_send_keys(self, target: str, *keys: str) -> None:
        """``herdr agent send-keys <target> <key>…`` (prints ``{"type":"ok"}``, unlike pane send-keys)."""
        if not keys:
            raise ValueError("agent_send_keys needs at least one key")
        self._result(["agent", "send-keys", target, *(_text_word(key, "key") for key in keys)], OkResult)

    def agent_rename(self, target: str, name: str | None) -> AgentInfo:
        """``herdr agent rename <target> <name>``, or ``--clear`` when name is None."""
        value = "--clear" if name is None else _text_word(name, "name", reserved=("--clear",))
        return self._result(["agent", "rename", target, value], AgentInfoResult).agent

    def agent_focus(self, target: str) -> AgentInfo:
        """``herdr agent focus <target>``: moves the user's view and marks the tab seen."""
        return self._result(["agent", "focus", target], AgentInfoResult).agent

    def agent_explain(self, target: str) -> AgentExplain:
        """``herdr agent explain <target> --json`` (the bare explain object, no envelope)."""
        return self._bare(["agent", "explain", target, "--json"], AgentExplain, retry_reads=True)

    # --- running and parsing ---

    def _result(
        self,
        args: list[str],
        expected: type[R],
        *,
        timeout: float | None = None,
        retry_reads: bool = False,
        retry_busy: bool = False,
    ) -> R:
        """Run a socket command and return its ``result`` if it has the expected ``type``."""
        call = self._run(args, timeout=timeout, retry_reads=retry_reads, retry_busy=retry_busy)
        try:
            result = SuccessEnvelope.model_validate_json(call.stdout).result
        except pydantic.ValidationError as exc:
            raise _protocol(call, validation_summary(exc)) from None
        if not isinstance(result, expected):
            raise _protocol(call, f"expected a {expected.__name__} result, got type {result.type!r}")
        return result

    def _bare(self, args: list[str], model: type[R], *, retry_reads: bool = False) -> R:
        """Run a command whose stdout is one bare JSON object (no envelope)."""
        call = self._run(args, retry_reads=retry_reads)
        try:
            return model.model_validate_json(call.stdout)
        except pydantic.ValidationError as exc:
            raise _protocol(call, validation_summary(exc)) from None

    def _run(self, args: list[str], *, timeout: float | None = None, retry_reads: bool = False, retry_busy: bool = False) -> HerdrCall:
        """Run herdr with retries where the call is safe to repeat; return the successful call or raise."""
        argv = self._argv(args)
        limit = self.timeout_s if timeout is None else timeout
        if retry_reads:
            # A read is safe to repeat: an unreachable server may be starting, and a read whose herdr process was
            # killed (the OOM killer, a crash) says nothing about herdr itself. A read that ran to its time limit
            # is not repeated: herdr is hung, and waiting that long again and again helps nobody.
            retrying = self._retrying(self.retry.read_attempts, self.retry.read_wait_s, _worth_reading_again)
        elif retry_busy:
            retrying = self._retrying(self.retry.busy_attempts, self.retry.busy_wait_s, HerdrPaneBusy)
        else:
            return self._once(argv, limit)
        return retrying(self._once, argv, limit)

    def _retrying(self, attempts: int, wait_s: float, error: type[HerdrFailure] | Callable[[BaseException], bool]) -> tenacity.Retrying:
        retry = tenacity.retry_if_exception_type(error) if isinstance(error, type) else tenacity.retry_if_exception(error)
        return tenacity.Retrying(
            stop=tenacity.stop_after_attempt(attempts),
            wait=tenacity.wait_fixed(wait_s),
            retry=retry,
            sleep=self.sleep,
            reraise=True,
        )

    def _argv(self, args: list[str]) -> list[str]:
        # Before any subcommand parser runs, herdr strips `--session X` / `--session=X` (src/session.rs:54-78) and
        # `--remote X`, `--remote=X`, `--remote-keybindings X`, `--handoff` (src/remote.rs:39-119) from anywhere
        # before `--`. A free-text word shaped like one would silently change the session, move to the end of the
        # argv or turn the call into a remote launch; refuse it instead.
        head = args[: args.index("--")] if "--" in args else args
        for word in head:
            if word == "--session" or word.startswith("--session="):
                raise ValueError(f"herdr would take the argv word {word!r} as a session flag")
            if word in _REMOTE_FLAGS or word.startswith(_REMOTE_FLAG_PREFIXES):
                raise ValueError(f"herdr would take the argv word {word!r} as a remote-launch flag")
        # src/cli/spec.rs:64-99: `--help`/`-h` right after the subcommand path prints clap's help and exits 0,
        # whatever the command; only orch's own `herdr --help` (index 0) wants that.
        first_help = next((i for i, word in enumerate(args) if word in ("--help", "-h")), None)
        if first_help in (1, 2) and "--" not in args[:first_help]:
            raise ValueError(f"herdr would print help instead of running: {args[first_help]!r} follows {' '.join(args[:first_help])!r}")
        if self.machine is not None:
            command = " ".join(args[:2])
            if not machine_forwards(args):
                # herdr exits 2 for it ("not an API-backed machine command"); a call like this is orch's bug.
                raise ValueError(f"herdr --machine does not forward `{command}`")
            return [self.binary, "--machine", self.machine, *args]
        session = ["--session", self.session] if self.session else []
        if self.ssh is not None:
            return ssh_argv(self.ssh, [self.binary, *session, *args])
        return [self.binary, *session, *args]

    def _once(self, argv: list[str], timeout: float) -> HerdrCall:
        """One herdr process: run, record, and map a failure to a typed error."""
        env = {**os.environ, **self.env_overlay}
        started = self.clock()
        try:
            # The crash matrix may stop orch around this call, or lose its answer (a herdr process dead of SIGKILL).
            proc = crash_seam.around(
                argv, lambda: self.runner(argv, env=env, timeout=timeout), lambda: subprocess.CompletedProcess(argv, -signal.SIGKILL, "", "")
            )
        except (FileNotFoundError, PermissionError, NotADirectoryError) as exc:
            call = self._record(argv, None, "", str(exc), started)
            raise HerdrMissing(
                f"{call.command}: cannot execute {self.binary!r} ({exc.strerror or exc})",
                call=call,
                hint=INSTALL_HINT,
            ) from None
        except subprocess.TimeoutExpired as exc:
            call = self._record(argv, None, _text(exc.stdout), _text(exc.stderr), started)
            raise HerdrTimeout(
                f"{call.command}: no answer within {timeout:g}s; killed",
                call=call,
                hint="a mutating call may still have taken effect; read herdr's state back before repeating it",
            ) from None
        call = self._record(argv, proc.returncode, proc.stdout or "", proc.stderr or "", started)
        if call.returncode is not None and call.returncode < 0:
            # Killed by a signal (not by herdr's own error path): the server may or may not have acted on it.
            raise HerdrCallLost(
                f"{call.command}: the herdr process died of signal {-call.returncode}; its outcome is unknown",
                call=call,
                hint="a mutating call may still have taken effect; read herdr's state back before repeating it",
            )
        if call.returncode != 0:
            raise error_for(call)
        return call

    def _record(self, argv: list[str], returncode: int | None, stdout: str, stderr: str, started: float) -> HerdrCall:
        call = HerdrCall(tuple(argv), returncode, stdout, stderr, max(0.0, self.clock() - started))
        self.calls.append(call)
        if self.on_call is not None:
            self.on_call(call)
        return call


def _worth_reading_again(exc: BaseException) -> bool:
    """A read is tried again when the server was unreachable (it may be starting) or its process was killed, never
    when it ran to its time limit (a hung herdr: that wait again helps nobody)."""
    if isinstance(exc, HerdrCallLost):
        return True
    return isinstance(exc, HerdrUnavailable) and not isinstance(exc, HerdrTimeout)


# What `herdr --machine` forwards to a saved machine (0.9.1 DELTA "What is forwarded"); everything else exits 2.
_MACHINE_FORWARDED: dict[str, tuple[str, ...] | None] = {
    "workspace": None, "worktree": None, "tab": None, "pane": None, "notification": None, "api": ("snapshot",),
    "status": ("server",), "plugin": ("link", "unlink", "enable", "disable", "list", "action", "log", "logs", "pane"),
    "server": ("stop", "reload-config", "agent-manifests", "reload-agent-manifests"),
}  # fmt: skip
# `herdr --machine` from 0.9.1; `herdr machine status` from 0.9.2 (0.9.5 DELTA row 4).
MACHINE_VERSION = (0, 9, 1)
MACHINE_STATUS_VERSION = (0, 9, 2)


def machine_forwards(args: Sequence[str]) -> bool:
    """Whether ``herdr --machine X <args>`` is forwarded: a pane id of the caller means nothing on another server, so
    `pane current --current` is refused too (0.9.1 DELTA, "Local context is dropped")."""
    command, sub = (list(args) + ["", ""])[:2]
    if command == "agent":
        return sub != "attach" and not (sub == "explain" and any(a == "--file" or a.startswith("--file=") for a in args[2:]))
    if command == "pane" and sub == "current" and "--current" in args:
        return False
    subs = _MACHINE_FORWARDED.get(command, ())
    return command in _MACHINE_FORWARDED and (subs is None or sub in subs)


def parse_version(text: str) -> tuple[int, int, int] | None:
    """``0.8.2`` (or ``0.8.2-preview.x``) as a tuple; None when it is not three numbers."""
    match = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)(?:[-+].*)?", text.strip())
    return (int(match[1]), int(match[2]), int(match[3])) if match else None


def version_support(version: str) -> VersionSupport:
    """Whether orch is tested against this herdr version, refuses it (older than 0.7.5), or has not seen it."""
    parsed = parse_version(version)
    if parsed is None:
        return "unparsed"
    if parsed < MINIMUM_VERSION:
        return "older"
    if parsed in ((0, 7, 5), (0, 8, 2)) or (0, 9, 0) <= parsed <= NEWEST_TESTED:
        return "tested"
    return "untested"


class RecordedCall(Exception):
    """Raised by ``record_call`` with the argv HerdrCli built: nothing is ever run."""

    def __init__(self, argv: Sequence[str]) -> None:
        super().__init__()
        self.argv = tuple(argv)


def record_call(argv: Sequence[str], *, env: Env, timeout: float) -> subprocess.CompletedProcess[str]:
    """A runner that runs nothing: it raises ``RecordedCall`` with the argv (``call_argv`` catches it)."""
    raise RecordedCall(argv)


def call_argv(cli: HerdrCli, call: str, args: Sequence[object] = (), kwargs: Mapping[str, object] | None = None) -> tuple[str, ...]:
    """The whole argv ``cli.<call>(*args, **kwargs)`` runs (``herdr …``, or ``ssh … -- 'herdr …'`` for a host's herdr);
    ``cli`` must run through ``record_call``, so nothing runs."""
    try:
        getattr(cli, call)(*args, **(kwargs or {}))
    except RecordedCall as recorded:
        return recorded.argv
    raise AssertionError(f"HerdrCli.{call} ran no herdr command")


def argv_of(
    call: str, args: Sequence[object] = (), kwargs: Mapping[str, object] | None = None, *, features: HerdrFeatures | None = None, trust_repository: bool = False
) -> tuple[str, ...]:
    """The herdr argv (binary left out) ``HerdrCli.<call>(*args, **kwargs)`` would run, built by HerdrCli itself; nothing runs.

    `orch plan check --commands` lists a run's commands with it and the unit tests' fake herdr records its calls with it,
    so neither can drift from what orch sends. ``features`` stands for the herdr the call is for (the flags that depend
    on its release), ``trust_repository`` for the plan's policy.
    """
    cli = HerdrCli("herdr", runner=record_call, sleep=lambda _s: None)
    cli._features, cli.trust_repository = features, trust_repository
    return call_argv(cli, call, args, kwargs)[1:]


def features_of(version: str) -> HerdrFeatures:
    """What a herdr of this (server) version can do; the one place orch maps versions to behaviour."""
    parsed = parse_version(version)
    return HerdrFeatures(
        version=version,
        support=version_support(version),
        # An unparsable (future) version is assumed to keep what 0.8.2 fixed.
        shift_tab=parsed is None or parsed >= SHIFT_TAB_VERSION,
        # Unknown: assume the late Enter (waiting it out costs only its 300 ms).
        prompt_enter_delay_s=LATE_ENTER_S if parsed is None or LATE_ENTER_VERSIONS[0] <= parsed < LATE_ENTER_VERSIONS[1] else 0.0,
        # Unknown: assumed too; orch judges turn completion by the counter only when herdr actually sends it.
        completion_seq=parsed is None or parsed >= COMPLETION_SEQ_VERSION,
        # Unknown: not assumed, since an older herdr would refuse the whole worktree command.
        trust_repository=parsed is not None and parsed >= TRUST_REPOSITORY_VERSION,
        resume_commands=parsed is not None and parsed >= COMPLETION_SEQ_VERSION,
    )


def echo_line(call: HerdrCall) -> str:
    """One line per herdr call for ``--verbose`` echoing: the argv (newlines escaped), exit code and duration."""
    argv = shlex.join(call.argv).replace("\n", "\\n")
    outcome = "killed or not run" if call.returncode is None else f"exit {call.returncode}"
    return f"herdr> {argv}  [{outcome}, {call.seconds:.2f}s]"


def error_for(call: HerdrCall) -> HerdrFailure:
    """Map a failed herdr call to its typed error (CONTRACT §0): the one place exit codes are interpreted."""
    stderr_lines = [line for line in call.stderr.splitlines() if line.strip()]
    last = stderr_lines[-1].strip() if stderr_lines else ""
    if call.returncode == SSH_FAILED and call.argv and os.path.basename(call.argv[0]) == "ssh":
        detail = one_line(call.stderr) or "no output"
        return HostUnreachable(f"{call.command}: ssh failed: {detail}", call=call, hint="orch needs `ssh -o BatchMode=yes TARGET true` to work without a prompt")
    if _machine_link_failed(call, last):
        # `herdr --machine` never retries and never falls back to local: the saved machine could not be reached, or
        # the link dropped mid-call, so a mutation's outcome is unknown (0.9.1 DELTA "Transport"); settled by read-back.
        label = call.argv[2] if len(call.argv) > 2 else "?"
        return HostUnreachable(f"{call.command}: {one_line(last.removeprefix('error: '))}", call=call,
                               hint=f"`herdr machine status {label}` says whether herdr can reach it")
    if call.returncode == 2:
        detail = one_line(call.stderr) or "usage error"
        return HerdrUsageError(f"{call.command}: herdr rejected orch's arguments: {detail}", call=call, hint=_BUG_HINT)
    if call.returncode == 1:
        body = _error_body(last)
        if body is not None:
            cls = HERDR_ERROR_BY_CODE.get(body.code, HerdrCommandError)
            message = one_line(body.message)
            if body.code == "server_not_running":
                # 0.8.x's JSON form of the no-server case: the same error, words and hint as 0.7.5's `Error: Os`.
                return HerdrUnavailable(f"{call.command}: herdr server is not running ({body.code}: {message})", call=call, code=body.code, herdr_message=body.message, hint=_START_HINT)
            if cls is HerdrAgentBlocked:
                return HerdrAgentBlocked(f"{call.command}: not sent: the agent is at a dialog ({body.code}: {message})", call=call, code=body.code, herdr_message=body.message, hint="answer the dialog in the agent's pane, then send again")
            if body.code == "protocol_mismatch":
                # The CLI and the running server are different releases that cannot talk (0.9 DELTA rows 11-12):
                # herdr's message says which to change; not a bug in orch.
                return HerdrProtocolError(f"{call.command}: the herdr CLI and server do not fit ({body.code}: {message})", call=call, code=body.code, herdr_message=body.message, hint=_MISMATCH_HINT)
            hint = _BUG_HINT if cls is HerdrProtocolError else None
            return cls(f"{call.command}: {body.code}: {message}", call=call, code=body.code, herdr_message=body.message, hint=hint)
        first = stderr_lines[0].strip() if stderr_lines else ""
        os_error = _OS_ERROR.match(first)
        if os_error is not None:
            kind = os_error["kind"]
            reason = "herdr server is not running" if kind in ("NotFound", "ConnectionRefused") else f"cannot reach the herdr server ({kind})"
            return HerdrUnavailable(f"{call.command}: {reason}", call=call, hint=_START_HINT)
        if _CUSTOM_ERROR.match(first):
            return HerdrUsageError(f"{call.command}: herdr rejected a value orch passed: {one_line(first)}", call=call, hint=_BUG_HINT)
    detail = one_line(call.stderr) or "no output"
    return HerdrProtocolError(f"{call.command}: unexpected exit {call.returncode}: {detail}", call=call, hint=_BUG_HINT)


_BUG_HINT = "this is a bug in orch or an incompatible herdr; the full herdr call is in the log"
_MISMATCH_HINT = "`herdr status` shows both versions: upgrade the herdr CLI, or restart the server with it (`herdr server stop`, then `herdr`)"
_START_HINT = "start herdr (or check --session / HERDR_SESSION / HERDR_SOCKET_PATH)"
_REMOTE_FLAGS = ("--remote", "--remote-keybindings", "--handoff")
_REMOTE_FLAG_PREFIXES = ("--remote=", "--remote-keybindings=")
_U32_MAX = 2**32 - 1
_U64_MAX = 2**64 - 1


def _machine_link_failed(call: HerdrCall, last: str) -> bool:
    """A `herdr --machine LABEL …` call that failed reaching the saved machine (herdr's `machine 'L' (session S): …`
    line), not one the remote server answered with its own JSON error."""
    return (call.returncode == 1 and len(call.argv) > 2 and call.argv[1] == "--machine"
            and last.startswith("error: machine '") and _error_body(last) is None)


def _error_body(line: str) -> ErrorBody | None:
    if not line.startswith("{"):
        return None
    try:
        return ErrorEnvelope.model_validate_json(line).error
    except pydantic.ValidationError:
        return None


def _protocol(call: HerdrCall, detail: str) -> HerdrProtocolError:
    return HerdrProtocolError(f"{call.command}: unexpected output: {detail}", call=call, hint=_BUG_HINT)


def validation_summary(exc: pydantic.ValidationError) -> str:
    """One line naming the first problem, so a pydantic error never crosses the boundary (nor leaves the engine:
    orchestrator.effects.from_json)."""
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "(root)"
    more = f" (+{exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{where}: {first['msg']}{more}"


def _parse_integration_line(line: str) -> IntegrationEntry:
    text = line.rstrip()
    match = _INTEGRATION_LINE.match(text)
    if match is None:
        # A state this orch does not know (herdr adds them: 0.8.2's `needs repair`): keep the line to quote it; the
        # preflight judges only the kinds the plan uses.
        other = _INTEGRATION_ANY.match(text)
        target = other["target"] if other else text.strip()
        return IntegrationEntry(target=target, state="unknown", path=(other["path"] or "") if other else "", line=text.strip())
    target, path = match["target"], match["path"]
    if match["not_installed"]:
        return IntegrationEntry(target=target, state="not_installed", path=path)
    if match["current"] or match["current_legacy"]:
        version = match["current"]
        return IntegrationEntry(target=target, state="current", installed_version=int(version) if version else None, legacy=version is None, path=path)
    if match["repair"] or match["repair_legacy"]:
        version = match["repair"]
        return IntegrationEntry(target=target, state="needs_repair", installed_version=int(version) if version else None, legacy=version is None, path=path)
    version = match["outdated"]
    return IntegrationEntry(
        target=target,
        state="outdated",
        installed_version=int(version) if version else None,
        legacy=version is None,
        expected_version=int(match["expected"]),
        path=path,
    )


def _text(data: str | bytes | None) -> str:
    # TimeoutExpired carries bytes even in text mode on some Python paths.
    if data is None:
        return ""
    return data.decode("utf-8", "replace") if isinstance(data, bytes) else data


def _opt(flag: str, value: str | int | float | PathArg | None) -> list[str]:
    if value is None:
        return []
    return [flag, os.fspath(value) if isinstance(value, os.PathLike) else str(value)]


def _uint(flag: str, value: int | None, maximum: int) -> int | None:
    """A count herdr parses as an unsigned integer (src/cli.rs:857-867: u32 for --lines, u64 for --timeout)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= maximum:
        raise ValueError(f"{flag} must be an integer from 0 to {maximum}, not {value!r} (herdr rejects it)")
    return value


def _ratio(value: float | None) -> float | None:
    """herdr parses --ratio as a finite f32 (src/cli/pane.rs:567-579) and exits 2 otherwise."""
    if value is not None and not math.isfinite(value):
        raise ValueError(f"--ratio must be a finite number, not {value!r} (herdr rejects it)")
    return value


def _env_flags(env: Env | None) -> list[str]:
    flags: list[str] = []
    for key, value in (env or {}).items():
        if not key or "=" in key or "\0" in key:
            raise ValueError(f"invalid env key {key!r}")
        flags += ["--env", f"{key}={value}"]
    return flags


def _until_flags(until: Iterable[AgentStatus]) -> list[str]:
    return [word for status in until for word in ("--until", status)]


def _source(workspace: str | None, cwd: PathArg | None) -> list[str]:
    if workspace is not None and cwd is not None:
        raise ValueError("give workspace or cwd, not both (herdr exits 2)")
    return [*_opt("--workspace", workspace), *_opt("--cwd", cwd)]


def _text_word(text: str, what: str, *, reserved: tuple[str, ...] = ()) -> str:
    """Check a free-text argv word herdr would read as something else."""
    if text in reserved:
        raise ValueError(f"{what} {text!r} would be read as a herdr flag")
    return text
