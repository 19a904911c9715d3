"""pydantic models of herdr 0.7.5's CLI output (CONTRACT.md §2-§9): tolerant readers, parsed only by orchestrator.herdr."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

AgentStatus = Literal["idle", "working", "blocked", "done", "unknown"]
# An agent whose turn is over (herdr's idle or done): only then may orch type into it, ask it for a result, or exit it.
AT_REST: tuple[AgentStatus, ...] = ("idle", "done")
SplitDirection = Literal["right", "down"]
ReadSource = Literal["visible", "recent", "recent-unwrapped", "detection"]


class Wire(BaseModel):
    """Base of every herdr wire model: immutable, and unknown fields are ignored (herdr adds fields freely)."""

    model_config = ConfigDict(frozen=True, extra="ignore")


# --- core objects (CONTRACT §2) ---


class WorkspaceWorktree(Wire):
    """The git worktree a workspace is rooted in."""

    repo_key: str
    repo_name: str
    repo_root: str
    checkout_path: str
    is_linked_worktree: bool


class WorkspaceInfo(Wire):
    """A workspace; ``number`` is its 1-based position, ``label`` need not be unique."""

    workspace_id: str
    number: int
    label: str
    focused: bool
    pane_count: int
    tab_count: int
    active_tab_id: str
    agent_status: AgentStatus
    worktree: WorkspaceWorktree | None = None


class TabInfo(Wire):
    """A tab; ``label`` defaults to its position as a string."""

    tab_id: str
    workspace_id: str
    number: int
    label: str
    focused: bool
    pane_count: int
    agent_status: AgentStatus


class PaneScroll(Wire):
    """A pane's scrollback position."""

    offset_from_bottom: int
    max_offset_from_bottom: int
    viewport_rows: int


class AgentSession(Wire):
    """The agent session reference a hook reported for a pane."""

    source: str
    agent: str
    kind: Literal["id", "path"]
    value: str


class PaneInfo(Wire):
    """A pane; a plain shell has no ``agent`` and ``agent_status`` "unknown"."""

    pane_id: str
    terminal_id: str
    workspace_id: str
    tab_id: str
    focused: bool
    agent_status: AgentStatus
    revision: int
    cwd: str | None = None
    foreground_cwd: str | None = None
    label: str | None = None
    agent: str | None = None
    title: str | None = None
    display_agent: str | None = None
    agent_session: AgentSession | None = None
    scroll: PaneScroll | None = None
    # herdr 0.9.2+ (../herdr-0.9.5/DELTA.md row 2): why the pane could not be restored after a server restart.
    restore_error: str | None = None


class AgentInfo(Wire):
    """An agent pane; ``state_change_seq`` moves on every underlying state change (idle<->done flips excluded)."""

    terminal_id: str
    agent_status: AgentStatus
    workspace_id: str
    tab_id: str
    pane_id: str
    focused: bool
    revision: int
    state_change_seq: int
    name: str | None = None
    agent: str | None = None
    # herdr omits these three unless true.
    launch_pending: bool = False
    interactive_ready: bool = False
    screen_detection_skipped: bool = False
    cwd: str | None = None
    foreground_cwd: str | None = None
    title: str | None = None
    display_agent: str | None = None
    agent_session: AgentSession | None = None
    # herdr 0.9.2+ (../herdr-0.9.5/DELTA.md row 1): this agent's count of finished turns; None before 0.9.2. A turn
    # finished since a baseline only when this moved past it (an idle<->done flip never moves it).
    completion_seq: int | None = None


class Rect(Wire):
    """A cell rectangle in a tab's layout."""

    x: int
    y: int
    width: int
    height: int


class LayoutPane(Wire):
    """One pane's place in a layout snapshot."""

    pane_id: str
    focused: bool
    rect: Rect


class LayoutSplit(Wire):
    """One split node in a layout snapshot."""

    id: str
    direction: SplitDirection
    ratio: float
    rect: Rect


class PaneLayoutSnapshot(Wire):
    """The geometry of one tab: which panes, where, and how it is split."""

    workspace_id: str
    tab_id: str
    zoomed: bool
    area: Rect
    focused_pane_id: str
    panes: tuple[LayoutPane, ...]
    splits: tuple[LayoutSplit, ...]


class WorktreeInfo(Wire):
    """A git worktree of a repo; ``label`` is the repo name, not a workspace label."""

    path: str
    is_bare: bool
    is_detached: bool
    is_prunable: bool
    is_linked_worktree: bool
    label: str
    branch: str | None = None
    open_workspace_id: str | None = None


class WorktreeSource(Wire):
    """The repo a worktree operation resolved its source to."""

    repo_key: str
    repo_name: str
    repo_root: str
    source_checkout_path: str
    source_workspace_id: str | None = None


class PaneMoveResult(Wire):
    """What ``pane move`` did; a cross-workspace move gives the pane a new id."""

    changed: bool
    reason: Literal["same_tab", "zoomed_tab"] | None = None
    previous_pane_id: str
    previous_workspace_id: str
    previous_tab_id: str
    pane: PaneInfo
    source_layout: PaneLayoutSnapshot | None = None
    target_layout: PaneLayoutSnapshot
    created_workspace: WorkspaceInfo | None = None
    created_tab: TabInfo | None = None
    closed_workspace_id: str | None = None
    closed_tab_id: str | None = None
    focused_pane_id: str


# --- results, discriminated on herdr's ``type`` tag (CONTRACT §14.2) ---


class OkResult(Wire):
    """A bare acknowledgement (close, agent send-keys)."""

    type: Literal["ok"]


class WorkspaceListResult(Wire):
    """``workspace list``."""

    type: Literal["workspace_list"]
    workspaces: tuple[WorkspaceInfo, ...]


class WorkspaceCreated(Wire):
    """``workspace create``: the workspace plus its first tab and root pane."""

    type: Literal["workspace_created"]
    workspace: WorkspaceInfo
    tab: TabInfo
    root_pane: PaneInfo


class WorkspaceInfoResult(Wire):
    """``workspace get|rename|focus``."""

    type: Literal["workspace_info"]
    workspace: WorkspaceInfo


class TabListResult(Wire):
    """``tab list``."""

    type: Literal["tab_list"]
    tabs: tuple[TabInfo, ...]


class TabCreated(Wire):
    """``tab create``: the tab and its root pane."""

    type: Literal["tab_created"]
    tab: TabInfo
    root_pane: PaneInfo


class TabInfoResult(Wire):
    """``tab get|rename|focus``."""

    type: Literal["tab_info"]
    tab: TabInfo


class PaneListResult(Wire):
    """``pane list``."""

    type: Literal["pane_list"]
    panes: tuple[PaneInfo, ...]


class PaneInfoResult(Wire):
    """``pane get|split|rename`` (split returns the new pane)."""

    type: Literal["pane_info"]
    pane: PaneInfo


class PaneCurrentResult(Wire):
    """``pane current``."""

    type: Literal["pane_current"]
    pane: PaneInfo


class PaneLayoutResult(Wire):
    """``pane layout``."""

    type: Literal["pane_layout"]
    layout: PaneLayoutSnapshot


class PaneMoved(Wire):
    """``pane move``."""

    type: Literal["pane_move"]
    move_result: PaneMoveResult


class AgentListResult(Wire):
    """``agent list`` (agent panes only)."""

    type: Literal["agent_list"]
    agents: tuple[AgentInfo, ...]


class AgentInfoResult(Wire):
    """``agent get|wait|rename|focus``."""

    type: Literal["agent_info"]
    agent: AgentInfo


class AgentStarted(Wire):
    """``agent start``: the agent once interactive-ready, and the argv typed into the shell."""

    type: Literal["agent_started"]
    agent: AgentInfo
    argv: tuple[str, ...]


class AgentPrompted(Wire):
    """``agent prompt``: submitted (and, with ``--wait``, settled); never proof the agent acted on it."""

    type: Literal["agent_prompted"]
    agent: AgentInfo


class WorktreeListResult(Wire):
    """``worktree list``: the resolved source repo and its worktrees."""

    type: Literal["worktree_list"]
    source: WorktreeSource
    worktrees: tuple[WorktreeInfo, ...]


class WorktreeCreated(Wire):
    """``worktree create``: a NEW workspace rooted at the checkout, with its tab and root pane."""

    type: Literal["worktree_created"]
    workspace: WorkspaceInfo
    tab: TabInfo
    # Optional: a create response without a root pane means "there was nowhere to start it" (never substitute one).
    root_pane: PaneInfo | None = None
    worktree: WorktreeInfo


class WorktreeOpened(Wire):
    """``worktree open``: the workspace for an existing checkout (``already_open`` when it was reused)."""

    type: Literal["worktree_opened"]
    workspace: WorkspaceInfo
    tab: TabInfo
    # Optional: a create response without a root pane means "there was nowhere to start it" (never substitute one).
    root_pane: PaneInfo | None = None
    worktree: WorktreeInfo
    already_open: bool = False


class WorktreeRemoved(Wire):
    """``worktree remove``: the checkout is gone and its workspace closed; the branch is kept."""

    type: Literal["worktree_removed"]
    workspace_id: str
    path: str
    forced: bool


HerdrResult = Annotated[
    OkResult
    | WorkspaceListResult
    | WorkspaceCreated
    | WorkspaceInfoResult
    | TabListResult
    | TabCreated
    | TabInfoResult
    | PaneListResult
    | PaneInfoResult
    | PaneCurrentResult
    | PaneLayoutResult
    | PaneMoved
    | AgentListResult
    | AgentInfoResult
    | AgentStarted
    | AgentPrompted
    | WorktreeListResult
    | WorktreeCreated
    | WorktreeOpened
    | WorktreeRemoved,
    Field(discriminator="type"),
]


class SuccessEnvelope(Wire):
    """herdr's stdout on exit 0 for socket commands: ``{"id":…,"result":{"type":…,…}}``."""

    id: str
    result: HerdrResult


class ErrorBody(Wire):
    """herdr's error code and message."""

    code: str
    message: str


class ErrorEnvelope(Wire):
    """herdr's stderr on exit 1 for server errors: ``{"id":…,"error":{"code":…,"message":…}}``."""

    id: str
    error: ErrorBody


# --- local commands without an envelope (CONTRACT §4, §8) ---


class ServerCapabilities(Wire):
    """What the running server supports."""

    live_handoff: bool
    detached_server_daemon: bool


class ClientStatus(Wire):
    """The CLI binary's own version and protocol."""

    version: str
    channel: str
    protocol: int
    binary: str
    session: str | None = None


class ServerStatus(Wire):
    """The server as the CLI sees it; everything but ``status``/``running``/``socket`` is null when it is down."""

    status: Literal["running", "not_running"]
    running: bool
    version: str | None = None
    protocol: int | None = None
    capabilities: ServerCapabilities | None = None
    compatible: bool | None = None
    socket: str
    session: str | None = None
    restart_needed: bool | None = None


class UpdateStatus(Wire):
    """Whether the server runs an older build than the CLI."""

    restart_needed: bool | None = None


class HerdrStatus(Wire):
    """``status --json``: works whether or not the server runs."""

    client: ClientStatus
    server: ServerStatus
    update: UpdateStatus


class MachineStatus(Wire):
    """One saved machine in ``herdr machine status --json`` (0.9.2+). herdr documents no schema for it: orch reads
    only these fields, tolerantly, and judges a machine by ``reachable`` alone."""

    id: str | None = None
    label: str | None = None
    reachable: bool | None = None
    error: str | None = None


class MachineStatusList(Wire):
    """``herdr machine status [<selector>] --json``."""

    machines: tuple[MachineStatus, ...] = ()


class SessionInfo(Wire):
    """One herdr session (the default one first)."""

    name: str
    default: bool
    running: bool
    socket_path: str
    session_dir: str


class SessionList(Wire):
    """``session list --json`` (no envelope)."""

    sessions: tuple[SessionInfo, ...]


class IntegrationEntry(Wire):
    """One line of ``integration status``; ``installed_version`` is None when not installed, legacy or unknown.

    ``needs_repair`` is herdr 0.8.2's ``needs repair (vN)``; ``unknown`` is any state this orch does not know yet
    (a newer herdr), kept with its whole ``line`` so it can be quoted instead of failing the parse.
    """

    target: str
    state: Literal["not_installed", "current", "outdated", "needs_repair", "unknown"]
    installed_version: int | None = None
    legacy: bool = False
    expected_version: int | None = None
    path: str
    line: str = ""

    @property
    def is_usable(self) -> bool:
        """True when the integration is installed and current, so lifecycle detection is authoritative."""
        return self.state == "current"


class MatchedRule(Wire):
    """The detection rule that decided an agent's state."""

    id: str
    priority: int
    region: str
    state: str


class AgentExplain(Wire):
    """``agent explain --json`` (no envelope): why herdr thinks the agent is in its state."""

    agent: str | None = None
    state: str
    manifest_source: str | None = None
    manifest_version: str | None = None
    matched_rule: MatchedRule | None = None
    visible_idle: bool = False
    visible_blocker: bool = False
    visible_working: bool = False
    screen_detection_skipped: bool = False
    skip_state_update: bool = False
    skipped_update_reason: str | None = None
    fallback_reason: str | None = None
    warning: str | None = None
    evaluated_rules: tuple[dict[str, Any], ...] = ()


class HerdrVersion(Wire):
    """``herdr --version``: ``herdr 0.7.5`` (preview builds add ``-preview.<id>``)."""

    text: str
    version: str


VersionSupport = Literal["tested", "untested", "older", "unparsed"]


class HerdrFeatures(Wire):
    """What the herdr orch talks to can do: decided in orchestrator.herdr from the server's version, never by callers.

    The engine asks these questions instead of comparing version strings (../herdr-0.8.2/DELTA.md, ../herdr-0.9.1/DELTA.md).
    """

    version: str  # the server's version when it runs, else the client's
    support: VersionSupport
    # `send-keys shift+tab` reaches the agent as Shift+Tab (0.8.2 DELTA row 7; 0.7.5 sends a plain Tab).
    shift_tab: bool
    # How long after `agent prompt` answers its Enter may still be unwritten (0.8.x: 300 ms, 0.8.2 DELTA row 5).
    prompt_enter_delay_s: float = 0.0
    # Agent info carries `completion_seq`, the count of finished turns (0.9.2+, ../herdr-0.9.5/DELTA.md row 1).
    completion_seq: bool = False
    # Worktree commands take `--trust-repository` (0.9.0+, ../herdr-0.9.1/DELTA.md row 6).
    trust_repository: bool = False
    # `pane report-agent-session … -- RESUME_ARG…` records a resume command (0.9.2+, ../herdr-0.9.5/DELTA.md row 6).
    resume_commands: bool = False
