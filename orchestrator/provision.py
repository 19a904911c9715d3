"""Provisioning (spec §3): a worktree tab or sibling pane per worker, read back, then its agent started and ready.

Isolated workers (first on a branch): reuse before create, fetch gate, `worktree create` with the one stored label,
materialize the tab in the repo workspace, read back, setup. Siblings split their branch owner's pane. Every herdr
side effect goes through ``engine.once``; every state change through ``ledger.transition``. Independent workers run
concurrently (``defaults.concurrency``); a sibling waits for its branch owner.
"""

from __future__ import annotations

import os
import threading
from pathlib import PurePosixPath
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from graphlib import TopologicalSorter
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict
from tabulate import tabulate

from orchestrator import fetch, git, remote
from orchestrator.agents import facts, plan_mode_problem
from orchestrator.checks import CheckRun, run_command, run_command_on
from orchestrator.dialogs import READY_TIMEOUT_FLOOR_S, DialogStop, NotReady, answer_trust_dialog, await_ready_sign
from orchestrator.effects import from_json
from orchestrator.engine import CannotTell, Done, Engine, InFlightEffect, NotDone, Settlement
from orchestrator.errors import (
    HerdrAgentNotReady,
    HerdrError,
    HerdrNameTaken,
    HerdrNotFound,
    HerdrPaneBusy,
    HerdrProtocolError,
    HerdrUnavailable,
    HerdrWaitExpired,
    HerdrWorktreeCreateFailed,
    HostUnreachable,
    OrchError,
    one_line,
)
from orchestrator import held as holds
from orchestrator.hints import TEXT, orch_command
from orchestrator.layout import quote
from orchestrator.herdr_models import AgentInfo, PaneInfo, PaneLayoutSnapshot, SplitDirection, TabInfo, WorktreeInfo
from orchestrator.plan import ResolvedPlan, ResolvedWorker
from orchestrator.report import MOVED_OUT
from orchestrator.schedule import admit, render_schedule
from registry.facts import BaseMoved, FactKind, HostWorkspace, WorktreesFolder, cause_of, read_facts
from registry import Effect, Run, Worker, WorkerState
from registry.kinds import CONTROLLER_HOST
from registry.machine import NOT_ADMITTED

if TYPE_CHECKING:
    from orchestrator.herdr import Herdr

# held: its host did not answer (orchestrator.held); it starts at a later check-in once the host answers.
OutcomeState = Literal["ready", "failed", "provisioning", "queued", "skipped", "held"]

T = TypeVar("T")

# The base ref found moved since preflight pinned it (orchestrator.report FactKind.BASE_MOVED reads it, same detail keys).

# A right split halves the width; below this many columns per half a worker's TUI gets cramped, so split down.
MIN_SPLIT_COLUMNS = 80


class WorkerOutcome(BaseModel):
    """What provisioning did for one worker; ``reused``/``created`` name the herdr and git objects."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    task: str
    name: str
    kind: str
    placement: Literal["worktree", "sibling"]
    state: OutcomeState
    already: bool = False  # the worker was past provisioning before this call: nothing was done
    pane_id: str | None = None
    tab_label: str | None = None
    worktree_path: str | None = None
    branch: str
    base_sha: str | None = None
    reused: tuple[str, ...] = ()
    created: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    error: str | None = None


class ProvisionResult(BaseModel):
    """`orch provision`: one outcome per plan worker, in plan order."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str
    workspace_id: str
    workers: tuple[WorkerOutcome, ...]
    schedule: tuple[str, ...] = ()  # the scheduler's lines: who started, who waits (and why), who was skipped

    @property
    def ok(self) -> bool:
        """True when every worker is ready, or waits queued for a slot or a predecessor, or held for its host (the run
        goes on: a later check-in starts it once the host answers)."""
        return all(w.state in ("ready", "queued", "held") for w in self.workers)


# --- effect results kept in the ledger (our own shapes: what later steps and a resumed run need) ---
# Plain frozen dataclasses, stored and read back through orchestrator.effects.to_json/from_json.


@dataclass(frozen=True, kw_only=True)
class Checkout:
    """A checkout herdr opened in a workspace of its own (``worktree create`` or ``worktree open``)."""

    path: str
    branch: str | None
    workspace_id: str | None
    root_pane_id: str | None
    already_open: bool = False


@dataclass(frozen=True, kw_only=True)
class Moved:
    """``pane move --new-tab``: the pane's new id and tab, and the side-effect workspace herdr closed, if any."""

    pane_id: str
    tab_id: str
    workspace_id: str
    closed_workspace_id: str | None = None


@dataclass(frozen=True, kw_only=True)
class Closed:
    """A workspace closed by ``workspace close``."""

    workspace_id: str


@dataclass(frozen=True, kw_only=True)
class Renamed:
    """A tab label mended by ``tab rename``."""

    tab_id: str
    label: str


@dataclass(frozen=True, kw_only=True)
class Split:
    """A sibling pane made by ``pane split``."""

    pane_id: str
    tab_id: str
    workspace_id: str
    direction: SplitDirection | None = None  # None: settled by read-back (the direction is not observable)


@dataclass(frozen=True, kw_only=True)
class Started:
    """An agent herdr reported interactive-ready."""

    name: str
    pane_id: str
    agent_status: str
    interactive_ready: bool
    reused: bool = False


@dataclass(frozen=True, kw_only=True)
class SetupRun:
    """The plan's setup commands run in a fresh checkout; ``failed`` names the first one that failed."""

    runs: tuple[CheckRun, ...]
    failed: str | None = None


@dataclass(frozen=True, kw_only=True)
class BaseSent:
    """The commit a dependant on another host starts from, held by orch's ref in that host's checkout (read back there)."""

    sha: str
    ref: str


class _Fail(Exception):
    """This worker cannot go on; the message is the worker's one clear reason."""

    def __init__(self, step: str, message: str) -> None:
        super().__init__(message)
        self.step = step
        self.message = message


class _Blocked(Exception):
    """The agent started but waits at a dialog: the worker stays in provisioning so a re-run picks up the named agent."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


# A shell's "not found" for the typed agent command: bash/dash/sh (`x: command not found`, `x: not found`), zsh
# (`command not found: x`), fish (`Unknown command: x`).
_NOT_FOUND = ("{exe}: command not found", "{exe}: not found", "command not found: {exe}", "Unknown command: {exe}")


def _last_lines(text: str, count: int = 4) -> str:
    """The pane's last non-empty lines, quoted as one line (worker text never reaches a terminal raw)."""
    return " / ".join(quote(line.strip()) for line in [ln for ln in text.splitlines() if ln.strip()][-count:]) or "nothing"


def _screen(herdr: Herdr, pane_id: str) -> str:
    try:
        return herdr.pane_read(pane_id, source="recent", lines=40)
    except HerdrError:
        return ""


def _blocked(name: str, pane_id: str, screen: str, run_id: str) -> _Blocked:
    return _Blocked(
        f"{name} is blocked at start-up, at a dialog in pane {pane_id} (its screen: {_last_lines(screen)}); answer it there, "
        f"then run `orch provision --run {run_id}` again: it picks up the named agent"
    )


# --- the shared reads of one provisioning round ---


@dataclass(frozen=True)
class Snapshot:
    """``worktree list``, ``tab list``, ``pane list`` (repo workspace) and ``agent list``, read once per round."""

    worktrees: tuple[WorktreeInfo, ...]
    tabs: tuple[TabInfo, ...]
    panes: tuple[PaneInfo, ...]
    agents: tuple[AgentInfo, ...]

    def worktree_for(self, branch: str) -> WorktreeInfo | None:
        """The usable checkout of ``branch`` (bare or prunable entries cannot hold a worker)."""
        return _worktree_for(self.worktrees, branch)

    def agent_named(self, name: str) -> AgentInfo | None:
        """The agent with this name, if any."""
        return next((a for a in self.agents if a.name == name), None)


def _worktree_for(worktrees: tuple[WorktreeInfo, ...], branch: str) -> WorktreeInfo | None:
    return next((w for w in worktrees if w.branch == branch and not w.is_bare and not w.is_prunable), None)


def _same_path(a: str | os.PathLike[str] | None, b: str | os.PathLike[str] | None) -> bool:
    return a is not None and b is not None and os.path.realpath(a) == os.path.realpath(b)


# --- read-back settlement of provisioning's effects (orchestrator.effects names these) ---


def _record_created(engine: Engine, run: Run, task: str | None, **created: str | None) -> None:
    """Add ids to the worker's created_* lists (what retire closes and the report lists), once each."""
    if task is None:
        return
    worker = engine.ledger.get_worker(run.run_id, task)
    changes: dict[str, Any] = {}
    for name, value in created.items():
        have = getattr(worker, name)
        if value is not None and value not in have:
            changes[name] = (*have, value)
    if changes:
        engine.ledger.update_worker(run.run_id, task, cause={"phase": "provision", "settled": "read-back"}, **changes)


def settle_worktree_create(engine: Engine, run: Run, effect: Effect) -> Settlement[Checkout]:
    """Done if the branch is checked out at the Layout Contract path; not done if it is checked out nowhere."""
    req, herdr = effect.request, engine.effect_herdr(effect)
    # On the controller, the run's repo workspace names the repository; on another host, its checkout (`--cwd`).
    source = {"workspace": req["workspace"]} if "workspace" in req else {"cwd": req["cwd"]}
    listed = herdr.worktree_list(**source).worktrees
    found = _worktree_for(listed, req["branch"])
    if found is None:
        return NotDone(f"`worktree list` shows no checkout of {req['branch']}")
    if not _same_path(found.path, req["path"]):
        return CannotTell(
            f"{req['branch']} is checked out at {found.path}, not at {req['path']}: did orch create that checkout?",
            f"remove or move that checkout, then `orch resume {run.run_id}`",
        )
    side = found.open_workspace_id if found.open_workspace_id != req.get("workspace") else None
    root = None
    if side is not None:
        panes = [p for p in herdr.pane_list(workspace=side) if _same_path(p.cwd, found.path)]
        root = panes[0].pane_id if panes else None
    _record_created(engine, run, effect.task_label, created_worktree_paths=found.path, created_workspace_ids=side)
    how = f"`worktree list` shows {req['branch']} at {found.path}" + (f", open in workspace {side}" if side else "")
    return Done(Checkout(path=found.path, branch=found.branch, workspace_id=found.open_workspace_id, root_pane_id=root), how)


def settle_worktree_open(engine: Engine, run: Run, effect: Effect) -> Settlement[Checkout]:
    """Done if a workspace holds the checkout open; else not done."""
    req, herdr = effect.request, engine.effect_herdr(effect)
    source = {"workspace": req["workspace"]} if "workspace" in req else {"cwd": req["cwd"]}
    found = next((w for w in herdr.worktree_list(**source).worktrees if _same_path(w.path, req["path"])), None)
    if found is None or found.open_workspace_id is None:
        return NotDone(f"no workspace holds {req['path']} open")
    panes = [p for p in herdr.pane_list(workspace=found.open_workspace_id) if _same_path(p.cwd, found.path)]
    if not panes:
        return NotDone(f"workspace {found.open_workspace_id} has no pane in {req['path']}")
    _record_created(engine, run, effect.task_label, created_workspace_ids=found.open_workspace_id)
    checkout = Checkout(path=found.path, branch=found.branch, workspace_id=found.open_workspace_id, root_pane_id=panes[0].pane_id)
    return Done(checkout, f"workspace {found.open_workspace_id} holds {found.path} open")


def settle_pane_move(engine: Engine, run: Run, effect: Effect) -> Settlement[Moved]:
    """Done if the pane (its pre-move id stays an alias, CONTRACT §1) is in the repo workspace; else not done."""
    req = effect.request
    info = engine.effect_herdr(effect).pane_get(req["pane"])  # gone altogether: HerdrNotFound fails the worker with that reason
    if info.workspace_id != req["workspace"]:
        return NotDone(f"pane {req['pane']} is still in workspace {info.workspace_id}")
    worker = engine.ledger.get_worker(run.run_id, effect.task_label) if effect.task_label else None
    if worker is not None and req.get("from") in worker.created_workspace_ids:
        _record_created(engine, run, effect.task_label, created_pane_ids=info.pane_id)
    return Done(Moved(pane_id=info.pane_id, tab_id=info.tab_id, workspace_id=info.workspace_id), f"`pane get {req['pane']}` is {info.pane_id} in workspace {info.workspace_id}")


def settle_workspace_close(engine: Engine, run: Run, effect: Effect) -> Settlement[Closed]:
    """Done if the workspace is gone; else not done."""
    ws = effect.request["workspace"]
    try:
        engine.effect_herdr(effect).workspace_get(ws)
    except HerdrNotFound:
        return Done(Closed(workspace_id=ws), f"`workspace get {ws}` says not found")
    return NotDone(f"workspace {ws} is still open")


def settle_tab_rename(engine: Engine, run: Run, effect: Effect) -> Settlement[Any]:
    """Done if the tab carries the label; not done if it carries another or is gone (its phase finds its tab again)."""
    req = effect.request
    tab_id = req.get("tab") or req.get("tab_id")
    tab = next((t for t in engine.effect_herdr(effect).tab_list() if t.tab_id == tab_id), None)
    if tab is None:
        return NotDone(f"tab {tab_id} is gone")
    if tab.label != req["label"]:
        return NotDone(f"tab {tab_id} is labelled {tab.label!r}")
    how = f"tab {tab_id} is labelled {tab.label!r}"
    return Done(tab if effect.task_label is None else Renamed(tab_id=tab.tab_id, label=tab.label), how)


def settle_setup(engine: Engine, run: Run, effect: Effect) -> Settlement[SetupRun]:
    """Setup is never re-run by guess: not done only while the checkout is exactly as created (on its host)."""
    cwd, host = effect.request["cwd"], effect.request.get("host")
    ssh = str(engine.host_config(run.run_id, host).ssh) if host else None
    if not git.status_porcelain(cwd, on=ssh):
        return NotDone(f"{cwd} has no changes: the setup commands left no trace")
    return CannotTell(
        f"the setup of {effect.task_label} was cut short and {cwd} has changes: did setup finish?",
        f"run the plan's setup in {cwd} by hand, or give the worker up with `{orch_command('retire', '--run', effect.run_id, '--abandon', effect.task_label or 'TASK', '--reason', TEXT)}`",
    )


def settle_base_push(engine: Engine, run: Run, effect: Effect) -> Settlement[BaseSent]:
    """Done if orch's ref in the host's checkout names exactly the commit sent (git over ssh); else not done. A host
    that does not answer raises HostUnreachable: the effect stays in flight, read back again later."""
    req = effect.request
    ssh = str(engine.host_config(run.run_id, str(req["host"])).ssh)
    held = git.rev_parse(req["checkout"], req["ref"], on=ssh)
    where = f"{req['ref']} in {req['checkout']} on host {req['host']}"
    if held is None or held != req["sha"]:
        return NotDone(f"{where} is {held[:12] if held else 'absent'}, not {req['sha'][:12]}")
    return Done(BaseSent(sha=held, ref=req["ref"]), f"{where} is {held[:12]}")


def settle_pane_split(engine: Engine, run: Run, effect: Effect) -> Settlement[Split]:
    """Done if a pane in the owner's tab has the checkout as cwd and belongs to no other worker; else not done."""
    req, herdr = effect.request, engine.effect_herdr(effect)
    owner = herdr.pane_get(req["pane"])
    host = str(req.get("host") or CONTROLLER_HOST)
    # Pane ids of workers on this host only: another host's herdr numbers its panes from w1 too.
    taken = {w.pane_id for w in engine.ledger.list_workers(run.run_id) if w.host == host} | {req["pane"], owner.pane_id}
    found = [p for p in herdr.pane_list(workspace=owner.workspace_id) if p.tab_id == owner.tab_id and p.pane_id not in taken and _same_path(p.cwd, req["cwd"])]
    if not found:
        return NotDone(f"tab {owner.tab_id} has no pane in {req['cwd']} besides the owner's")
    pane = found[-1]
    _record_created(engine, run, effect.task_label, created_pane_ids=pane.pane_id)
    return Done(Split(pane_id=pane.pane_id, tab_id=pane.tab_id, workspace_id=pane.workspace_id), f"pane {pane.pane_id} in tab {owner.tab_id} is in {req['cwd']} and no worker's")


def settle_agent_start(engine: Engine, run: Run, effect: Effect) -> Settlement[Started]:
    """Done if the named agent runs in the pane; not done if no agent has the name."""
    req = effect.request
    try:
        agent = engine.effect_herdr(effect).agent_get(req["name"])
    except HerdrNotFound:
        return NotDone(f"no agent is named {req['name']}")
    if agent.pane_id != req["pane"]:
        return CannotTell(
            f"agent {req['name']} runs in pane {agent.pane_id}, not in the worker's pane {req['pane']}: which one is the worker?",
            f"close the other agent, then `orch resume {run.run_id}`",
        )
    started = Started(name=req["name"], pane_id=agent.pane_id, agent_status=agent.agent_status, interactive_ready=agent.interactive_ready)
    return Done(started, f"`agent get {req['name']}` is in pane {agent.pane_id} ({agent.agent_status})")


def choose_direction(layout: PaneLayoutSnapshot, pane_id: str) -> SplitDirection:
    """Split ``right`` only when the pane is wide: both halves keep MIN_SPLIT_COLUMNS columns and the pane is at
    least twice as many columns as rows (a cell is about twice as tall as wide, so anything less looks tall).
    Otherwise ``down``."""
    rect = next((p.rect for p in layout.panes if p.pane_id == pane_id), layout.area)
    wide = rect.width // 2 >= MIN_SPLIT_COLUMNS and rect.width >= 2 * rect.height
    return "right" if wide else "down"


# --- one worker's job ---


@dataclass
class _Job:
    planned: ResolvedWorker
    owner: str  # the task whose checkout this worker uses (itself for an isolated worker)
    reused: list[str] = field(default_factory=list)
    created: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    error: str | None = None  # why the worker is left in provisioning (an in-flight effect)
    stopped: bool = False
    held: bool = False  # its host did not answer: held for a later check-in (orchestrator.held)

    @property
    def task(self) -> str:
        return self.planned.task


class SharedRead(Generic[T]):
    """One read serving every concurrent caller it can: a caller is answered only by a read that *began after it
    asked*, so whatever the caller changed before asking is in what it sees. Callers arriving while a read runs
    share the next one; a failed read fails each caller it served."""

    def __init__(self, read: Callable[[], T]) -> None:
        self._read = read
        self._cond = threading.Condition()
        self._started = 0  # reads begun so far (their sequence numbers)
        self._running = False
        self._finished = 0  # the sequence number of the last finished read
        self._result: T | None = None
        self._error: Exception | None = None
        self.reads = 0
        self.waiting = 0

    def wait_for_waiting(self, count: int, timeout: float = 10.0) -> bool:
        """True once ``count`` callers wait for a later read (for tests and diagnostics)."""
        with self._cond:
            return self._cond.wait_for(lambda: self.waiting >= count, timeout=timeout)

    def get(self) -> T:
        """A result read after this call began."""
        with self._cond:
            wanted = self._started + 1
            while self._finished < wanted:
                if not self._running:
                    self._running, self._started = True, self._started + 1
                    mine = self._started
                    break
                self.waiting += 1
                self._cond.notify_all()  # lets an observer (a test) see who waits
                self._cond.wait()
                self.waiting -= 1
            else:
                return self._answer()
        result: T | None = None
        error: Exception | None = None
        try:
            result = self._read()
        except Exception as exc:
            error = exc
        with self._cond:
            self._running, self._finished, self._result, self._error = False, mine, result, error
            self.reads += 1
            self._cond.notify_all()
            return self._answer()

    def _answer(self) -> T:
        if self._error is not None:
            raise self._error
        return self._result  # type: ignore[return-value]


@dataclass
class _Round:
    engine: Engine
    run: Run
    plan: ResolvedPlan
    snapshot: Snapshot
    tabs: SharedRead[tuple[TabInfo, ...]]
    _fetch_lock: threading.Lock = field(default_factory=threading.Lock)
    _moved_lock: threading.Lock = field(default_factory=threading.Lock)
    _base: tuple[str | None, str | None, str] | None = None  # (remote, error, note)
    # The same reads of every other host with a worker to provision (worktrees of its checkout, all its tabs,
    # panes and agents), by host name; ids in one mean nothing to another.
    hosts: dict[str, Snapshot] = field(default_factory=dict)
    # Hosts that did not answer this round (host -> the exception): their workers are held, not tried again this round.
    gone: dict[str, HostUnreachable] = field(default_factory=dict)
    _gone_lock: threading.Lock = field(default_factory=threading.Lock)

    def herdr(self, job: _Job) -> Herdr:
        """The herdr boundary of the host the worker runs on."""
        return self.engine.herdr_at(self.run.run_id, job.planned.host)

    def snap(self, job: _Job) -> Snapshot:
        """This round's reads of the worker's host."""
        return self.snapshot if job.planned.host == CONTROLLER_HOST else self.hosts[job.planned.host]

    @property
    def ws(self) -> str:
        assert self.run.workspace_id is not None
        return self.run.workspace_id

    @property
    def repo_path(self) -> str:
        return self.run.repo_path or str(self.plan.repo.checkout)

    def worker(self, task: str) -> Worker:
        return self.engine.ledger.get_worker(self.run.run_id, task)

    def update(self, job: _Job, **changes: Any) -> Worker:
        return self.engine.ledger.update_worker(self.run.run_id, job.task, cause={"phase": "provision"}, **changes)

    def once(self, job: _Job, kind: str, suffix: str, request: dict[str, Any], act: Callable[[], Any], model: type[Any]) -> Any:
        # In-flight effects are settled by orchestrator.effects' read-back for their kind (the functions above); a
        # worker on another host says so in every request, so read-back asks that host's herdr.
        request = {**request, **self.engine.on_host(job.planned.host)}
        return self.engine.once(self.run.run_id, job.task, kind, self.engine.start_key(self.run.run_id, job.task, suffix), request, act, model=model)

    # -- the fetch gate --

    def fetch_gate(self, job: _Job) -> str:
        """Fetch the base (once per round) and the target branch, then return the base SHA."""
        base = self.plan.plan.base
        repo = self.repo_path
        with self._fetch_lock:  # concurrent fetches in one repository fight over FETCH_HEAD and ref locks
            if self._base is None:
                self._base = self._fetch_base(repo, base)
            remote, error, note = self._base
            if error is not None:
                raise _Fail("fetch", error)
            if note:
                job.notes.append(note)
            if remote is not None:
                branch = job.planned.worktree.branch
                result = git.fetch_branch(repo, remote, branch)
                if result.returncode == 0:
                    job.notes.append(f"fetched {remote} {branch}")
                elif not git.missing_remote_ref(result.stderr):
                    raise _Fail("fetch", _fetch_error(result, remote, branch))
        sha = self._pinned(job, repo, base)
        return self.dependant_base(job) or sha

    def dependant_base(self, job: _Job) -> str | None:
        """The commit a dependant starts from: the integration branch as the controller has it (its predecessors'
        accepted work), or, once this run made its checkout, the commit that checkout was made from (a worker started
        again keeps its start while the integration branch moves on). None: no `after`, or a plan that does not integrate."""
        into = self.plan.plan.integration
        if not (job.planned.after and into.enabled and into.branch):
            return None
        made = _confirmed(self, job, "worktree_create")
        if made is not None and isinstance(made.request.get("base"), str):
            return str(made.request["base"])
        # A dependant starts from the integration branch, which holds its predecessors' accepted work.
        tip = git.rev_parse(self.repo_path, f"refs/heads/{into.branch}")
        if tip is None:
            raise _Fail("fetch", f"integration branch {into.branch} names no commit in {self.repo_path}; its predecessors were recorded as integrated")
        job.notes.append(f"starts from {into.branch} at {tip[:12]} (after {', '.join(job.planned.after)})")
        return tip

    def _pinned(self, job: _Job, repo: str, base: str) -> str:
        """The commit preflight pinned for the base, never the ref resolved again: a base moved since is noticed.

        A force-pushed ``origin/main`` would otherwise put later workers on a history the earlier ones do not share,
        and integration would then refuse to merge unrelated histories. The move is journalled (FactKind.BASE_MOVED) for
        the report, once per commit the base was found at.
        """
        now = git.rev_parse(repo, base)
        pinned = self.run.base_sha
        if pinned is None:  # a run recorded before preflight pinned its base: the ref is all there is
            if now is None:
                raise _Fail("fetch", f"base {base} names no commit in {repo}")
            return now
        if git.rev_parse(repo, pinned) is None:
            raise _Fail("fetch", f"the base commit {pinned[:12]} pinned at preflight ({base}) is no longer in {repo}; orch never starts a worker on another base")
        if now != pinned:
            how = "deleted" if now is None else "fast-forward" if git.is_ancestor(repo, pinned, now) else "rewritten"
            job.notes.append(f"base {base} moved since preflight ({how}: now {now[:12] if now else 'nothing'}); starts from the pinned {pinned[:12]}")
            with self._moved_lock:
                seen = {fact.get("now") for fact in read_facts(self.engine.ledger.events(self.run.run_id), BaseMoved)}
                if now not in seen:
                    detail = BaseMoved(base=base, pinned=pinned, now=now, how=how, noticed_by=job.task)
                    self.engine.ledger.record_fact(self.run.run_id, FactKind.BASE_MOVED, detail=detail)
        return pinned

    def _fetch_base(self, repo: str, base: str) -> tuple[str | None, str | None, str]:
        names = git.remotes(repo)
        if not names:
            return None, None, "no remote: fetch skipped"
        tracking = base if any(base.startswith(f"{r}/") for r in names) else git.upstream_of(repo, base)
        if tracking is None:
            return None, None, f"base {base} tracks no remote: fetch skipped"
        remote = max((r for r in names if tracking.startswith(f"{r}/")), key=len)
        branch = tracking[len(remote) + 1 :]
        result = git.fetch_branch(repo, remote, branch)
        if result.returncode != 0:
            return remote, _fetch_error(result, remote, branch), ""
        return remote, None, f"fetched {remote} {branch}"


def _fetch_error(result: git.GitResult, remote: str, branch: str) -> str:
    what = "an authentication failure" if git.is_auth_failure(result.stderr) else f"exit {result.returncode}"
    detail = result.stderr.strip() or result.stdout.strip() or "(no output)"
    return f"fetch gate: git fetch {remote} {branch} failed with {what}; nothing was created (never provision on a stale checkout): {detail}"


# --- isolated workers ---


def _provision_checkout(rnd: _Round, job: _Job) -> None:
    """Steps 1-6 for the first worker on a branch: ends with its pane recorded on the worker row."""
    herdr, layout = rnd.engine.herdr, job.planned.worktree
    path = str(layout.path)
    found = rnd.snapshot.worktree_for(layout.branch)
    if found is not None and not _same_path(found.path, path):
        raise _Fail("reuse", f"branch {layout.branch} is already checked out at {found.path}, not at the Layout Contract path {path}; orch never uses another path")
    base_sha = rnd.fetch_gate(job)
    rnd.update(job, branch=layout.branch, worktree_path=path, tab_label=layout.label, base_sha=base_sha)

    created_by_run = _confirmed(rnd, job, "worktree_create") is not None
    if found is not None:
        _settle_in_flight_create(rnd, job, found)
        created_by_run = _confirmed(rnd, job, "worktree_create") is not None
        _starts_from(rnd, layout.branch, base_sha, f"the checkout {found.path} of {layout.branch}", then="no agent was started in it")
        pane, side = _reuse_checkout(rnd, job, found)
    else:
        # herdr checks an existing local branch out as it is (`--base` is ignored then): it must hold the base already.
        if git.branch_exists(rnd.repo_path, layout.branch):
            _starts_from(rnd, layout.branch, base_sha, f"the existing branch {layout.branch}", then="nothing was created")
        try:
            checkout = _create(rnd, job, base_sha)
        except HerdrWorktreeCreateFailed as exc:
            message = exc.herdr_message or exc.message
            if "already exists" not in message:
                raise _Fail("create", f"worktree create failed: {message}") from None
            # git says the checkout exists: take it if it is this branch's, never try another name.
            again = _worktree_for(herdr.worktree_list(workspace=rnd.ws).worktrees, layout.branch)
            if again is None or not _same_path(again.path, path):
                raise _Fail("create", f"worktree create failed: {message}; {path} is not a checkout of {layout.branch}, and orch never retries with another name") from None
            job.notes.append("worktree create said already exists: reusing the checkout")
            pane, side = _reuse_checkout(rnd, job, again)
        else:
            created_by_run = True
            job.created.append("worktree")
            rnd.update(job, created_worktree_paths=_add(rnd.worker(job.task).created_worktree_paths, path))
            if checkout.workspace_id:
                rnd.update(job, created_workspace_ids=_add(rnd.worker(job.task).created_workspace_ids, checkout.workspace_id))
            # Proven by read-back, not by what was asked: the new checkout's branch holds the pinned base.
            _starts_from(rnd, layout.branch, base_sha, f"the new checkout {path} of {layout.branch}", then="the checkout is kept and no agent was started in it")
            if checkout.root_pane_id is None:
                raise _Fail(
                    "create",
                    f"worktree create made {path} (workspace {checkout.workspace_id}) but its response has no root_pane: there was nowhere to start "
                    "the agent; open that workspace and re-run (orch never substitutes a pane)",
                )
            pane, side = checkout.root_pane_id, checkout.workspace_id

    pane_id, tab_id = _materialize(rnd, job, pane, side)
    rnd.update(job, pane_id=pane_id, tab_id=tab_id, workspace_id=rnd.ws)
    _read_back(rnd, job, tab_id)
    if created_by_run and job.planned.worker.setup:
        _setup(rnd, job, path)


def _starts_from(rnd: _Round, branch: str, base_sha: str, what: str, *, then: str) -> None:
    """Fail the worker closed when ``branch`` does not hold ``base_sha`` (the pinned base, or its integration tip)."""
    head = git.rev_parse(rnd.repo_path, f"refs/heads/{branch}")
    if head is not None and git.is_ancestor(rnd.repo_path, base_sha, head):
        return
    at = f"at {head[:12]}" if head else "with no commit"
    raise _Fail("create", f"{what} is {at}, which does not descend from the base {base_sha[:12]} this run starts every worker from; {then}")


def _add(values: tuple[str, ...], value: str) -> tuple[str, ...]:
    return values if value in values else (*values, value)


def _confirmed(rnd: _Round, job: _Job, kind: str) -> Any:
    return next((e for e in rnd.engine.ledger.list_effects(rnd.run.run_id, task_label=job.task) if e.kind == kind and e.status == "confirmed"), None)


def _settle_in_flight_create(rnd: _Round, job: _Job, found: WorktreeInfo) -> None:
    """A create an earlier process left in flight is settled by read-back (the checkout exists: it is the run's)."""
    for effect in rnd.engine.ledger.in_flight(rnd.run.run_id):
        if effect.task_label == job.task and effect.kind == "worktree_create":
            rnd.engine.settle_effect(rnd.run, effect)


def _create(rnd: _Round, job: _Job, base_sha: str) -> Checkout:
    herdr, layout = rnd.engine.herdr, job.planned.worktree
    request = {"workspace": rnd.ws, "branch": layout.branch, "base": base_sha, "path": str(layout.path), "label": layout.label}

    def act() -> Checkout:
        made = herdr.worktree_create(workspace=rnd.ws, branch=layout.branch, base=base_sha, path=layout.path, label=layout.label)
        root = made.root_pane.pane_id if made.root_pane else None
        return Checkout(path=made.worktree.path, branch=made.worktree.branch, workspace_id=made.workspace.workspace_id, root_pane_id=root)

    result: Checkout = rnd.once(job, "worktree_create", "worktree_create", request, act, Checkout)
    return result


def _reuse_checkout(rnd: _Round, job: _Job, found: WorktreeInfo) -> tuple[str, str | None]:
    """The pane to use for an existing checkout: a pane already in the repo workspace, one in its own workspace,
    or the root pane of ``worktree open``. Returns (pane id, side-effect workspace or None)."""
    herdr, layout, snap = rnd.engine.herdr, job.planned.worktree, rnd.snapshot
    job.reused.append("worktree")
    in_repo = [p for p in snap.panes if p.workspace_id == rnd.ws and _same_path(p.cwd, found.path)]
    recorded = rnd.worker(job.task).pane_id
    labelled = {t.tab_id for t in snap.tabs if t.label == layout.label}
    pick = next((p for p in in_repo if p.pane_id == recorded), None) or next((p for p in in_repo if p.tab_id in labelled), None) or next(iter(in_repo), None)
    if pick is not None:
        job.reused.append("tab")
        return pick.pane_id, None
    if found.open_workspace_id and found.open_workspace_id != rnd.ws:
        panes = [p for p in herdr.pane_list(workspace=found.open_workspace_id) if _same_path(p.cwd, found.path)]
        if panes:
            job.reused.append(f"workspace {found.open_workspace_id}")
            return panes[0].pane_id, found.open_workspace_id
    return _open_checkout(rnd, job, herdr, found.path, {"workspace": rnd.ws})


def _open_checkout(rnd: _Round, job: _Job, herdr: Herdr, path: str, at: dict[str, str], where: str = "") -> tuple[str, str]:
    """`worktree open` of an existing checkout (``at``: in the repo workspace here, ``cwd`` its checkout on another
    host): its root pane and workspace, which the run created (and retire closes) unless it was open already."""
    label = job.planned.worktree.label

    def act() -> Checkout:
        opened = herdr.worktree_open(**at, path=path, label=label)
        return Checkout(path=opened.worktree.path, branch=opened.worktree.branch, workspace_id=opened.workspace.workspace_id, root_pane_id=opened.root_pane.pane_id if opened.root_pane else None, already_open=opened.already_open)

    opened: Checkout = rnd.once(job, "worktree_open", "worktree_open", {**at, "path": path, "label": label}, act, Checkout)
    if opened.root_pane_id is None or opened.workspace_id is None:
        raise _Fail("reuse", f"worktree open gave no pane for {path}{where}: there was nowhere to start the agent")
    if not opened.already_open:
        job.created.append("workspace")
        rnd.update(job, created_workspace_ids=_add(rnd.worker(job.task).created_workspace_ids, opened.workspace_id))
    return opened.root_pane_id, opened.workspace_id


def _materialize(rnd: _Round, job: _Job, pane: str, side: str | None) -> tuple[str, str]:
    """Move the checkout's pane into the repo workspace as a tab labelled $label; close the emptied side workspace."""
    herdr, label = rnd.engine.herdr, job.planned.worktree.label
    if side is None or side == rnd.ws:
        info = herdr.pane_get(pane)
        return info.pane_id, info.tab_id

    def act() -> Moved:
        moved = herdr.pane_move_new_tab(pane, workspace=rnd.ws, label=label)
        return Moved(pane_id=moved.pane.pane_id, tab_id=moved.pane.tab_id, workspace_id=moved.pane.workspace_id, closed_workspace_id=moved.closed_workspace_id)

    moved: Moved = rnd.once(job, "pane_move", f"pane_move:{pane}", {"pane": pane, "from": side, "workspace": rnd.ws, "label": label}, act, Moved)
    job.created.append("tab")
    if side in rnd.worker(job.task).created_workspace_ids:
        rnd.update(job, created_pane_ids=_add(rnd.worker(job.task).created_pane_ids, moved.pane_id))
    if moved.closed_workspace_id == side:
        job.notes.append(f"workspace {side} closed ({MOVED_OUT})")
        return moved.pane_id, moved.tab_id
    try:
        left = herdr.pane_list(workspace=side)
    except HerdrNotFound:
        job.notes.append(f"workspace {side} is already gone")
        return moved.pane_id, moved.tab_id
    if left:
        job.notes.append(f"workspace {side} still has {len(left)} pane(s): left open")
        return moved.pane_id, moved.tab_id

    def close() -> Closed:
        herdr.workspace_close(side)
        return Closed(workspace_id=side)

    rnd.once(job, "workspace_close", f"workspace_close:{side}", {"workspace": side}, close, Closed)
    job.notes.append(f"closed the emptied workspace {side}")
    return moved.pane_id, moved.tab_id


def _read_back(rnd: _Round, job: _Job, tab_id: str, *, herdr: Herdr | None = None, workspace: str | None = None, ssh: str | None = None) -> None:
    """The mandatory gate: tab label exactly $label (mended once by rename), branch and toplevel of the checkout.

    On the controller (``ssh`` None) the tab list is the round's shared one and the checkout is read here; on another
    host, its ``herdr`` lists ``workspace``'s tabs and git reads the checkout over ``ssh``.
    """
    layout = job.planned.worktree
    where = "" if ssh is None else f" on host {job.planned.host}"
    if herdr is None:
        herdr, workspace = rnd.engine.herdr, rnd.ws
    for attempt in (1, 2):
        # On the controller, shared with workers reading back at the same time; always a list begun after this
        # worker's move or rename.
        tabs = rnd.tabs.get() if ssh is None else herdr.tab_list(workspace=workspace)
        tab = next((t for t in tabs if t.tab_id == tab_id), None)
        if tab is None:
            raise _Fail("read-back", f"tab {tab_id} is not in workspace {workspace}{where}")
        if tab.label == layout.label:
            break
        if attempt == 2:
            raise _Fail("read-back", f"tab {tab_id}{where} is labelled {tab.label!r} after a rename to {layout.label!r}")
        observed = tab.label

        def rename(herdr: Herdr = herdr) -> Renamed:
            renamed = herdr.tab_rename(tab_id, layout.label)
            return Renamed(tab_id=renamed.tab_id, label=renamed.label)

        rnd.once(job, "tab_rename", f"tab_rename:{tab_id}", {"tab": tab_id, "label": layout.label}, rename, Renamed)
        job.notes.append(f"tab label {observed!r} mended to {layout.label!r}")
    path = str(layout.path)
    try:
        branch, top = git.current_branch(path, on=ssh), git.toplevel(path, on=ssh)
    except git.GitError as exc:
        raise _Fail("read-back", f"cannot read the checkout {path}{where}: {exc.message}") from None
    if branch != layout.branch:
        raise _Fail("read-back", f"{path}{where} is on branch {branch}, not {layout.branch}; no agent started there")
    # Another host's paths cannot be resolved here: they are compared as that host's git prints them.
    same = _same_path(top, path) if ssh is None else top.rstrip("/") == path.rstrip("/")
    if not same:
        raise _Fail("read-back", f"{path}{where} belongs to the checkout {top}, not its own worktree; no agent started there")


def _setup(rnd: _Round, job: _Job, path: str, *, ssh: str | None = None) -> None:
    """The plan's setup commands, in the fresh checkout (on its host: ``ssh``), before the agent starts; replayed,
    never re-run."""
    commands = job.planned.worker.setup

    def act() -> SetupRun:
        runs: list[CheckRun] = []
        for command in commands:
            run = run_command(command, cwd=layout_path) if ssh is None else run_command_on(command, ssh=ssh, cwd=path)
            runs.append(run)
            if not run.passed:
                return SetupRun(runs=tuple(runs), failed=command)
        return SetupRun(runs=tuple(runs))

    layout_path = job.planned.worktree.path
    key = rnd.engine.start_key(rnd.run.run_id, job.task, "setup")
    ran = next((e for e in rnd.engine.ledger.list_effects(rnd.run.run_id, task_label=job.task) if e.kind == "setup" and e.status == "confirmed" and e.key != key), None)
    if ran is not None and from_json(SetupRun, ran.response or {}).failed is None:
        # A worker started again (herdr lost its first pane): the checkout is the same one its setup already ran in.
        job.notes.append("setup: ran at its first start, not run again")
        return
    done: SetupRun = rnd.once(job, "setup", "setup", {"commands": list(commands), "cwd": path}, act, SetupRun)
    if done.failed is not None:
        last = done.runs[-1]
        outcome = last.error or f"exit {last.exit_code}"
        tail = f":\n{last.output_tail}" if last.output_tail else ""
        raise _Fail("setup", f"setup command `{done.failed}` failed ({outcome}) in {path}; the checkout and tab are kept{tail}")
    job.notes.append(f"setup: {len(done.runs)} command(s) passed")


# --- workers on another host ---


def _provision_remote_checkout(rnd: _Round, job: _Job) -> None:
    """The first worker on a branch on another host: `worktree create` from that host's checkout by its herdr
    (`herdr --machine`), read back there (herdr for the tab, git over ssh for branch and toplevel).

    There is no repo workspace on another host (the run's is the controller's): the worker keeps the workspace
    `worktree create` opened for its checkout, which the run created and retire closes on that host.
    """
    engine, run, layout = rnd.engine, rnd.run, job.planned.worktree
    host = engine.host_config(run.run_id, job.planned.host)
    herdr, snap, path, ssh = rnd.herdr(job), rnd.snap(job), str(layout.path), str(host.ssh)
    where = f"on host {job.planned.host}"
    # A dependant starts from the integration branch, which lives on the controller: that very commit is sent to
    # the host's checkout first (``_send_base``); any other worker from the base preflight found there.
    tip = rnd.dependant_base(job)
    base_sha = tip or run.base_sha or ""
    if tip is None:
        try:
            held = bool(base_sha) and git.rev_parse(host.checkout, base_sha, on=ssh) is not None
        except git.GitError as exc:
            raise _Fail("fetch", f"cannot read the checkout {host.checkout} {where}: {exc.message}") from None
        if not held:
            raise _Fail("fetch", f"the checkout {host.checkout} {where} lacks the base commit {base_sha[:12]} pinned at preflight; nothing was created")
    elif _confirmed(rnd, job, "worktree_create") is None:
        _send_base(rnd, job, host, tip)
    found = snap.worktree_for(layout.branch)
    if found is not None and not _same_path(found.path, path):
        raise _Fail("reuse", f"branch {layout.branch} is already checked out at {found.path} {where}, not at the Layout Contract path {path}; orch never uses another path")
    rnd.update(job, branch=layout.branch, worktree_path=path, tab_label=layout.label, base_sha=base_sha)
    for effect in engine.ledger.in_flight(run.run_id):
        if effect.task_label == job.task and effect.kind == "worktree_create":
            engine.settle_effect(run, effect)  # an earlier process's create: read back on that host, never made twice
    created = _confirmed(rnd, job, "worktree_create")
    # A create of this very start is replayed below; a worker started again (its host's herdr lost its pane) finds the
    # checkout its first start made, and opens it again rather than asking for a second create.
    key = engine.start_key(run.run_id, job.task, "worktree_create")
    if found is not None and (created is None or (created.key != key and not created.key.startswith(f"{key}#"))):
        job.reused.append("worktree")
        _remote_starts_from(rnd, host, layout.branch, base_sha, f"the checkout {found.path} of {layout.branch} {where}", then="no agent was started in it")
        panes = [p for p in herdr.pane_list(workspace=found.open_workspace_id) if _same_path(p.cwd, found.path)] if found.open_workspace_id else []
        if panes:
            pane, workspace = panes[0].pane_id, found.open_workspace_id
        else:
            pane, workspace = _open_checkout(rnd, job, herdr, found.path, {"cwd": host.checkout}, f" {where}")
    else:
        if created is None and git.branch_exists(host.checkout, layout.branch, on=ssh):
            _remote_starts_from(rnd, host, layout.branch, base_sha, f"the existing branch {layout.branch} {where}", then="nothing was created")
        if created is None:
            _note_remote_worktrees_folder(rnd, job.planned.host, ssh, str(PurePosixPath(path).parent))
            _note_host_workspace(rnd, job, str(host.checkout), snap)
        request = {"cwd": host.checkout, "branch": layout.branch, "base": base_sha, "path": path, "label": layout.label}

        def act() -> Checkout:
            made = herdr.worktree_create(cwd=host.checkout, branch=layout.branch, base=base_sha, path=path, label=layout.label)
            root = made.root_pane.pane_id if made.root_pane else None
            return Checkout(path=made.worktree.path, branch=made.worktree.branch, workspace_id=made.workspace.workspace_id, root_pane_id=root)

        try:
            checkout: Checkout = rnd.once(job, "worktree_create", "worktree_create", request, act, Checkout)
        except HerdrWorktreeCreateFailed as exc:
            raise _Fail("create", f"worktree create {where} failed: {exc.herdr_message or exc.message}; orch never retries with another name") from None
        job.created.append("worktree")
        _learn_host_workspace(rnd, job, herdr, str(host.checkout))
        worker = rnd.worker(job.task)
        rnd.update(job, created_worktree_paths=_add(worker.created_worktree_paths, path))
        if checkout.workspace_id:
            rnd.update(job, created_workspace_ids=_add(rnd.worker(job.task).created_workspace_ids, checkout.workspace_id))
        _remote_starts_from(rnd, host, layout.branch, base_sha, f"the new checkout {path} of {layout.branch} {where}", then="the checkout is kept and no agent was started in it")
        if checkout.root_pane_id is None or checkout.workspace_id is None:
            raise _Fail("create", f"worktree create made {path} {where} but its response has no root_pane: there was nowhere to start the agent")
        pane, workspace = checkout.root_pane_id, checkout.workspace_id
    info = herdr.pane_get(pane)
    worker = rnd.worker(job.task)
    ours = workspace in worker.created_workspace_ids
    rnd.update(job, pane_id=info.pane_id, tab_id=info.tab_id, workspace_id=info.workspace_id,
               **({"created_pane_ids": _add(worker.created_pane_ids, info.pane_id)} if ours else {}))  # fmt: skip
    _read_back(rnd, job, info.tab_id, herdr=herdr, workspace=info.workspace_id, ssh=ssh)
    if job.planned.worker.setup and _confirmed(rnd, job, "worktree_create") is not None:
        _setup(rnd, job, path, ssh=ssh)  # in a checkout this run made there, as on the controller


def _send_base(rnd: _Round, job: _Job, host: Any, sha: str) -> None:
    """Send the commit a dependant starts from into orch's ref of its host's checkout (``fetch.base_ref``), by git push
    over the plan's ssh target, and read it back there: the worktree is made from that ref's commit only once the
    host's checkout holds exactly that SHA. Nothing goes to any remote or branch."""
    ref, checkout, ssh = fetch.base_ref(rnd.run.run_id, job.task), str(host.checkout), str(host.ssh)
    where = f"{checkout} on host {job.planned.host}"

    def act() -> BaseSent:
        pushed = git.push_commit(rnd.repo_path, fetch.ssh_url(host), sha, ref)
        # What the host's checkout holds decides, not what push said: a link dropped after the push landed is done;
        # a host that does not answer now leaves the outcome unknown (HostUnreachable), settled by read-back.
        held = git.rev_parse(checkout, ref, on=ssh)
        if held != sha:
            said = one_line(pushed.stderr) or one_line(pushed.stdout) or f"exit {pushed.returncode}"
            raise _Fail("base", f"cannot send {sha[:12]} to {ref} in {where} (git push: {said}); {ref} there is {held[:12] if held else 'absent'}; nothing was created")
        return BaseSent(sha=sha, ref=ref)

    request = {"sha": sha, "ref": ref, "checkout": checkout}
    rnd.once(job, "base_push", "base_push", request, act, BaseSent)
    job.notes.append(f"sent {sha[:12]} to {ref} in {where}")


def _note_remote_worktrees_folder(rnd: _Round, host: str, ssh: str, folder: str) -> None:
    """Before the run's first checkout on another host: record that `<checkout>.worktrees/` does not exist there yet
    (the checkouts create it), so retire removes it there once it is empty, as on the controller."""
    engine, run = rnd.engine, rnd.run
    with rnd._moved_lock:  # two workers of one host in one round ask once
        known = read_facts(engine.ledger.events(run.run_id), WorktreesFolder)
        if any(f.get("host") == host and f.get("path") == folder for f in known):
            return
        if remote.exists(ssh, folder, runner=engine.remote_runner or remote.run_process):
            return
        engine.ledger.record_fact(run.run_id, FactKind.WORKTREES_FOLDER, detail=WorktreesFolder(path=folder, host=host))


def _note_host_workspace(rnd: _Round, job: _Job, checkout: str, snap: Snapshot) -> None:
    """Before the run's first checkout on another host: when no workspace holds that host's primary checkout open,
    record that this create is about to open one (herdr opens a worktree group's parent with its first linked
    worktree), so retire closes it again there once it holds nothing but its shell. One the person had open is theirs."""
    engine, run, host = rnd.engine, rnd.run, job.planned.host
    primary = _primary(snap.worktrees, checkout)
    if primary is None or primary.open_workspace_id is not None:
        return
    with rnd._moved_lock:  # two workers of one host in one round: the first create opens it
        if any(f["host"] == host for f in read_facts(engine.ledger.events(run.run_id), HostWorkspace)):
            return
        engine.ledger.record_fact(run.run_id, FactKind.HOST_WORKSPACE, task_label=job.task,
                                  detail=HostWorkspace(host=host, task=job.task, checkout=checkout))  # fmt: skip


def _learn_host_workspace(rnd: _Round, job: _Job, herdr: Herdr, checkout: str) -> None:
    """After the create ``_note_host_workspace`` expected to open the primary checkout's workspace: its id, as that
    host's ``worktree list`` reads it back (a create response names only the new linked workspace)."""
    engine, run, host = rnd.engine, rnd.run, job.planned.host
    facts = [f for f in read_facts(engine.ledger.events(run.run_id), HostWorkspace) if f["host"] == host]
    if not facts or facts[-1]["task"] != job.task or "workspace" in facts[-1]:
        return
    primary = _primary(herdr.worktree_list(cwd=checkout).worktrees, checkout)
    if primary is not None and primary.open_workspace_id is not None:
        engine.ledger.record_fact(run.run_id, FactKind.HOST_WORKSPACE, task_label=job.task,
                                  detail=HostWorkspace(host=host, task=job.task, checkout=checkout, workspace=primary.open_workspace_id))  # fmt: skip


def _primary(worktrees: tuple[WorktreeInfo, ...], checkout: str) -> WorktreeInfo | None:
    """The host's primary checkout (not a linked worktree) in its ``worktree list``."""
    return next((w for w in worktrees if not w.is_linked_worktree and _same_path(w.path, checkout)), None)


def _remote_starts_from(rnd: _Round, host: Any, branch: str, base_sha: str, what: str, *, then: str) -> None:
    """``_starts_from`` in that host's checkout, over ssh."""
    ssh, checkout = str(host.ssh), str(host.checkout)
    head = git.rev_parse(checkout, f"refs/heads/{branch}", on=ssh)
    if head is not None and git.is_ancestor(checkout, base_sha, head, on=ssh):
        return
    at = f"at {head[:12]}" if head else "with no commit"
    raise _Fail("create", f"{what} is {at}, which does not descend from the base {base_sha[:12]} this run starts every worker from; {then}")


# --- siblings ---


def _provision_sibling(rnd: _Round, job: _Job) -> None:
    """Split the branch owner's pane (right or down, from its rect) with --cwd at the shared checkout."""
    herdr, layout = rnd.herdr(job), job.planned.worktree
    owner = rnd.worker(job.owner)
    if owner.pane_id is None:
        raise _Fail("split", f"its branch owner {job.owner} has no pane ({owner.state}): nothing to split")
    path = str(layout.path)
    rnd.update(job, branch=layout.branch, worktree_path=path, tab_label=layout.label, base_sha=owner.base_sha)
    mine = rnd.worker(job.task).pane_id
    agent = rnd.snap(job).agent_named(job.planned.name)
    reuse = mine if mine and any(p.pane_id == mine for p in rnd.snap(job).panes) else (agent.pane_id if agent and _same_path(agent.cwd, path) else None)
    if reuse is not None:
        info = herdr.pane_get(reuse)
        job.reused.append("pane")
        rnd.update(job, pane_id=info.pane_id, tab_id=info.tab_id, workspace_id=info.workspace_id)
        return
    owner_pane = owner.pane_id

    def act() -> Split:
        # The direction is how the split is made, not part of its intent: the split itself changes the owner's
        # layout, so a resumed run would compute another one (the key's request must stay the same).
        direction = choose_direction(herdr.pane_layout(owner_pane), owner_pane)
        pane = herdr.pane_split(owner_pane, direction=direction, cwd=path)
        return Split(pane_id=pane.pane_id, tab_id=pane.tab_id, workspace_id=pane.workspace_id, direction=direction)

    split: Split = rnd.once(job, "pane_split", "pane_split", {"pane": owner_pane, "cwd": path}, act, Split)
    job.created.append(f"pane ({split.direction or 'split'} of {owner_pane})")
    rnd.update(
        job, pane_id=split.pane_id, tab_id=split.tab_id, workspace_id=split.workspace_id,
        created_pane_ids=_add(rnd.worker(job.task).created_pane_ids, split.pane_id),
    )  # fmt: skip


# --- agent start ---


def start_agent(engine: Engine, run: Run, planned: ResolvedWorker, pane_id: str, *, timeout_ms: int, agents: tuple[AgentInfo, ...] | None = None) -> Started:
    """Start the worker's agent in ``pane_id`` once it passes the guards; raises _Fail with the reason otherwise.

    Never in the primary checkout, never on the default branch, only in the worker's own checkout and branch.
    """
    herdr, layout, name = engine.herdr_at(run.run_id, planned.host), planned.worktree, planned.name
    # On another host, git reads its checkout over ssh: the guards hold there as here.
    ssh = None if planned.host == CONTROLLER_HOST else str(engine.host_config(run.run_id, planned.host).ssh)
    pane = herdr.pane_get(pane_id)
    cwd = pane.cwd or pane.foreground_cwd
    where = f"pane {pane_id} ({cwd})"
    if cwd is None:
        raise _Fail("guard", f"refusing to start {name} in pane {pane_id}: herdr reports no working directory for it")
    try:
        top, branch = git.toplevel(cwd, on=ssh), git.current_branch(cwd, on=ssh)
    except git.GitError:
        raise _Fail("guard", f"refusing to start {name} in {where}: it is not inside a git checkout") from None
    primary = run.repo_path if ssh is None else str(engine.host_config(run.run_id, planned.host).checkout)
    default = run.default_branch or (git.current_branch(primary) if primary else None)
    if primary and (_same_path(top, primary) if ssh is None else top.rstrip("/") == primary.rstrip("/")):
        raise _Fail("guard", f"refusing to start {name} in {where}: it is the repo's primary checkout; workers run only in their own worktree")
    if default and branch == default:
        raise _Fail("guard", f"refusing to start {name} in {where}: it is on the default branch {default}; workers run only on their target branch")
    if branch != layout.branch or not (_same_path(top, layout.path) if ssh is None else top.rstrip("/") == str(layout.path).rstrip("/")):
        raise _Fail("guard", f"refusing to start {name} in {where}: it is {top} on {branch}, not {layout.path} on {layout.branch}")

    listed = agents if agents is not None else herdr.agent_list()
    existing = next((a for a in listed if a.name == name), None)
    if existing is not None:
        if existing.pane_id != pane_id:
            raise _Fail("agent", f"agent name {name} is already used by pane {existing.pane_id}, not this worker's pane {pane_id}; orch never renames a worker")
        if not existing.interactive_ready and existing.agent_status == "blocked":
            raise _blocked(name, pane_id, _screen(herdr, pane_id), run.run_id)  # still at its start-up dialog
        return Started(name=name, pane_id=pane_id, agent_status=existing.agent_status, interactive_ready=existing.interactive_ready, reused=True)
    occupant = next((a for a in listed if a.pane_id == pane_id), None)
    if occupant is not None:
        raise _Fail("agent", f"pane {pane_id} already runs agent {occupant.name or occupant.agent}; it is not an idle shell")

    args = planned.worker.agent_args
    request = {"name": name, "kind": planned.kind, "pane": pane_id, "timeout_ms": timeout_ms, "args": list(args), **engine.on_host(planned.host)}

    def act() -> Started:
        try:
            started = herdr.agent_start(name, kind=planned.kind, pane=pane_id, timeout_ms=timeout_ms, args=args)
        except HerdrAgentNotReady as exc:
            # herdr 0.8.2 keeps the name of an agent blocked at start-up and answers agent_not_ready (DELTA #6):
            # it started, and waits at a dialog the agent stage reads.
            if "blocked" not in (exc.herdr_message or exc.message):
                raise
            return Started(name=name, pane_id=pane_id, agent_status="blocked", interactive_ready=False)
        agent = started.agent
        return Started(name=agent.name or name, pane_id=agent.pane_id, agent_status=agent.agent_status, interactive_ready=agent.interactive_ready)

    try:
        return engine.once(run.run_id, planned.task, "agent_start", engine.start_key(run.run_id, planned.task, "agent_start"), request, act, model=Started)
    except HerdrNameTaken:
        agent = herdr.agent_get(name)
        if agent.pane_id == pane_id:
            return Started(name=name, pane_id=pane_id, agent_status=agent.agent_status, interactive_ready=agent.interactive_ready, reused=True)
        raise _Fail("agent", f"agent name {name} is already used by pane {agent.pane_id}, not this worker's pane {pane_id}; orch never renames a worker") from None
    except HerdrPaneBusy as exc:
        raise _Fail("agent", f"pane {pane_id} stayed busy (not an idle shell) through every retry: {exc.herdr_message or exc.message}") from None
    except HerdrAgentNotReady as exc:
        # herdr 0.8.2+: blocked at start-up (a trust or first-run dialog) keeps the name and answers agent_not_ready
        # (../herdr-0.8.2/DELTA.md row 6). Read the screen instead of failing blindly; the worker stays provisioning.
        screen = _screen(herdr, pane_id)
        if "blocked during startup" in (exc.herdr_message or "") or _agent_blocked(herdr, name, pane_id):
            raise _blocked(name, pane_id, screen, run.run_id) from None
        raise _Fail("agent", f"agent start failed: {exc.message}; its pane shows {_last_lines(screen)}") from None
    except HerdrWaitExpired as exc:
        screen = _screen(herdr, pane_id)
        executable = facts(planned.kind).executable
        said = next((line for line in reversed(screen.splitlines()) if any(p.format(exe=executable) in line for p in _NOT_FOUND)), None)
        if said is not None:
            raise _Fail("agent", f"{planned.kind} is not installed on this machine: herdr typed `{executable}` into pane {pane_id} and its shell said {_last_lines(said, 1)}") from None
        raise _Fail("agent", f"agent start failed: {exc.message}; its pane shows {_last_lines(screen)}") from None
    except HerdrError as exc:
        raise _Fail("agent", f"agent start failed: {exc.message}") from None


def _agent_blocked(herdr: Any, name: str, pane_id: str) -> bool:
    try:
        agent = herdr.agent_get(name)
    except HerdrError:
        return False
    return bool(agent.pane_id == pane_id and agent.agent_status == "blocked")


# --- the round ---


def _guarded(rnd: _Round, job: _Job, stage: Callable[[_Round, _Job], None]) -> None:
    """Run one stage; a failure is recorded on this worker only (the round goes on for the others)."""
    if job.stopped:
        return
    host = job.planned.host
    if host != CONTROLLER_HOST and host in rnd.gone:
        _hold(rnd, job, rnd.gone[host])
        return
    try:
        stage(rnd, job)
    except HostUnreachable as exc:
        if host == CONTROLLER_HOST:
            raise
        # Another host gone (asleep, off the network, its link dropped): this worker is held, the round goes on for
        # the others; an effect the drop left unknown stays in flight for read-back once the host answers.
        with rnd._gone_lock:
            rnd.gone.setdefault(host, exc)
        _hold(rnd, job, exc)
        return
    except _Fail as fail:
        _fail(rnd, job, fail.step, fail.message)
    except InFlightEffect as exc:
        job.notes.append("left in provisioning: an earlier process's effect is in flight")
        job.error = exc.message
    except _Blocked as blocked:
        job.notes.append("left in provisioning: its agent waits at a start-up dialog")
        job.error = blocked.message
    except HerdrUnavailable:
        # herdr is down or hung (a call that ran to its limit and read-back that got no answer either): no worker
        # fails for it, the run stops until herdr is back (orchestrator.run) and resume settles what was in flight.
        raise
    except HerdrProtocolError as exc:
        # Garbled output (a server going down mid-call writes half an answer): an unknown outcome, not a failure of
        # the worker. It stays in provisioning; read-back settles any effect left in flight at the next round or resume.
        job.notes.append("left in provisioning: a herdr call answered garbage; read-back settles its effect next")
        job.error = exc.message
    except OrchError as exc:
        _fail(rnd, job, "herdr", exc.message)
    if host != CONTROLLER_HOST:
        holds.release(rnd.engine.ledger, rnd.run, job.task)  # its host answered this stage
    if job.error is not None or rnd.worker(job.task).state is not WorkerState.PROVISIONING:
        job.stopped = True


def _hold(rnd: _Round, job: _Job, exc: HostUnreachable) -> None:
    """The worker waits for its host (orchestrator.held): left in provisioning, nothing failed, said once."""
    job.error = holds.hold(rnd.engine.ledger, rnd.run, job.task, job.planned.host, "provision", exc)
    job.held = job.stopped = True


def _pane_stage(rnd: _Round, job: _Job) -> None:
    """The worker's pane: its own worktree tab (branch owner) or a split of the owner's pane (sibling)."""
    if job.owner == job.task:
        (_provision_checkout if job.planned.host == CONTROLLER_HOST else _provision_remote_checkout)(rnd, job)
    else:
        _provision_sibling(rnd, job)


def _agent_stage(rnd: _Round, job: _Job) -> None:
    """Start the agent in the worker's pane and mark the worker ready."""
    engine, run = rnd.engine, rnd.run
    worker = rnd.worker(job.task)
    assert worker.pane_id is not None
    timeout_ms = rnd.plan.plan.defaults.agent_start_timeout_s * 1000
    started = start_agent(engine, run, job.planned, worker.pane_id, timeout_ms=timeout_ms, agents=rnd.snap(job).agents)
    note = _until_ready(rnd, job, worker, blocked=started.agent_status == "blocked", reused=started.reused)
    if note:
        job.notes.append(note)
    if started.agent_status == "blocked":
        started = replace(started, agent_status="idle", interactive_ready=True)
    if not started.interactive_ready:
        raise _Fail("agent", f"herdr did not report {job.planned.name} interactive-ready (status {started.agent_status})")
    (job.reused if started.reused else job.created).append("agent")
    engine.ledger.transition(
        run.run_id, job.task, WorkerState.PROVISIONING, WorkerState.READY,
        cause={"phase": "provision", "agent_status": started.agent_status}, reply_target=job.planned.name,
    )  # fmt: skip


def _until_ready(rnd: _Round, job: _Job, worker: Worker, *, blocked: bool, reused: bool) -> str | None:
    """The agent's ready sign (orchestrator/dialogs.py `await_ready_sign`), its trust dialog answered as policy says."""
    timeout_s = max(rnd.plan.plan.defaults.agent_start_timeout_s, READY_TIMEOUT_FLOOR_S)
    try:
        return await_ready_sign(rnd.engine, worker, timeout_s=timeout_s, answer_trust=lambda: _start_dialog(rnd, job, worker),
                                blocked=blocked, reused=reused)  # fmt: skip
    except DialogStop as stop:
        raise _Fail("dialog", stop.message) from None
    except NotReady as late:
        raise _Fail("ready", late.message) from None


def _start_dialog(rnd: _Round, job: _Job, worker: Worker) -> str | None:
    """An agent blocked at start-up: its trust dialog is answered when policy allows and the run made the checkout."""
    assert worker.pane_id is not None
    policy = rnd.plan.policy
    path = job.planned.worktree.path
    created = any(_same_path(p, path) for w in rnd.engine.ledger.list_workers(rnd.run.run_id) for p in w.created_worktree_paths)
    source = policy.sources.get("trust_run_worktrees", "default")
    if not policy.policy.trust_run_worktrees:
        allowed, why = False, f"policy trust_run_worktrees is off, from {source}"
    elif not created:
        allowed, why = False, f"{path} was not created by this run, so orch does not vouch for it"
    else:
        allowed, why = True, f"policy trust_run_worktrees, from {source}: a worktree this run created"
    try:
        return answer_trust_dialog(
            rnd.engine, worker, worker.pane_id, allowed=allowed, why_not=why, wait_timeout_ms=rnd.plan.plan.defaults.wait_timeout_s * 1000
        )
    except DialogStop as stop:
        raise _Fail("dialog", stop.message) from None


def _fail(rnd: _Round, job: _Job, step: str, message: str) -> None:
    rnd.engine.ledger.transition(rnd.run.run_id, job.task, WorkerState.PROVISIONING, WorkerState.FAILED, cause={"phase": "provision", "step": step, "error": message})


def _outcome(engine: Engine, run: Run, job: _Job, *, error: str | None = None, already: bool = False, held: bool = False) -> WorkerOutcome:
    worker = engine.ledger.get_worker(run.run_id, job.task)
    if error is None and worker.state is WorkerState.FAILED:
        error = _failure_reason(engine, worker)
    state: OutcomeState = "held" if held and worker.state is WorkerState.PROVISIONING else _OUTCOMES.get(worker.state, "provisioning")
    return WorkerOutcome(
        task=job.task, name=worker.name, kind=worker.kind, placement=job.planned.placement, state=state, already=already,
        pane_id=worker.pane_id, tab_label=worker.tab_label, worktree_path=worker.worktree_path, branch=job.planned.worktree.branch,
        base_sha=worker.base_sha, reused=tuple(job.reused), created=tuple(job.created), notes=tuple(job.notes), error=error,
    )  # fmt: skip


_OUTCOMES: dict[WorkerState, OutcomeState] = {
    WorkerState.READY: "ready", WorkerState.FAILED: "failed", WorkerState.QUEUED: "queued", WorkerState.SKIPPED: "skipped",
}  # fmt: skip


def _failure_reason(engine: Engine, worker: Worker) -> str | None:
    for event in reversed(engine.ledger.events(worker.run_id, task_label=worker.task_label)):
        if event.to_state == WorkerState.FAILED:
            error = (cause_of(event) or {}).get("error")
            return str(error) if error else None
    return None


def provision(engine: Engine, run: Run) -> ProvisionResult:
    """Provision every worker of the run still in ``provisioning``; re-running creates nothing new."""
    if not run.workspace_id:
        raise OrchError(f"run {run.run_id} has no repo workspace recorded", hint="run `orch preflight PLAN` first")
    plan = engine.plan_for(run)
    ledger = engine.ledger
    rows = {w.task_label: w for w in ledger.list_workers(run.run_id)}
    missing = [p.task for p in plan.workers if p.task not in rows]
    if missing:
        raise OrchError(f"run {run.run_id} has no ledger entry for {', '.join(missing)}", hint="`orch preflight PLAN` registers every plan worker")
    # The cap and `after`: only workers the scheduler admits (queued -> provisioning) are provisioned.
    scheduled = admit(engine, run, plan)
    rows = {w.task_label: w for w in ledger.list_workers(run.run_id)}

    # plan-first needs a plan mode orch can confirm; refuse those workers before anything starts.
    refused: dict[str, str] = {}
    for planned in plan.workers:
        if planned.mode == "plan-first" and rows[planned.task].state is WorkerState.PROVISIONING:
            try:
                problem = plan_mode_problem(planned.kind) or plan_mode_problem(planned.kind, engine.herdr_at(run.run_id, planned.host).features())
            except HostUnreachable:
                problem = None  # its host does not answer: the worker is held below, and this is asked again when it does
            if problem:
                refused[planned.task] = problem
                ledger.transition(run.run_id, planned.task, WorkerState.PROVISIONING, WorkerState.FAILED, cause={"phase": "provision", "step": "mode", "error": problem})

    # The branch owner is the first worker on the branch that was not refused for its mode (refusal is decided by
    # the plan alone, so every re-run picks the same owner).
    owners: dict[str, str] = {}
    for planned in plan.workers:
        if planned.task not in refused:
            owners.setdefault(planned.worktree.branch, planned.task)
    jobs = {p.task: _Job(planned=p, owner=owners.get(p.worktree.branch, p.task)) for p in plan.workers}
    pending = [t for t, j in jobs.items() if ledger.get_worker(run.run_id, t).state is WorkerState.PROVISIONING]

    outcomes: dict[str, WorkerOutcome] = {}
    for task, job in jobs.items():
        if task not in pending:
            waits = rows[task].state in NOT_ADMITTED
            outcomes[task] = _outcome(engine, run, job, already=task not in refused and not waits)
    if pending:
        _note_worktrees_folder(engine, run, plan)
        herdr = engine.herdr
        snapshot = Snapshot(
            worktrees=herdr.worktree_list(workspace=run.workspace_id).worktrees,
            tabs=herdr.tab_list(workspace=run.workspace_id),
            panes=herdr.pane_list(workspace=run.workspace_id),
            agents=herdr.agent_list(),
        )
        workspace = run.workspace_id
        tabs = SharedRead(lambda: herdr.tab_list(workspace=workspace))
        hosts: dict[str, Snapshot] = {}
        gone: dict[str, HostUnreachable] = {}
        for host in dict.fromkeys(jobs[t].planned.host for t in pending):
            if host != CONTROLLER_HOST:
                there = engine.herdr_at(run.run_id, host)
                checkout = engine.host_config(run.run_id, host).checkout
                try:
                    hosts[host] = Snapshot(worktrees=there.worktree_list(cwd=checkout).worktrees, tabs=there.tab_list(), panes=there.pane_list(), agents=there.agent_list())
                except HostUnreachable as exc:
                    gone[host] = exc  # its workers are held this round (orchestrator.held); the others go on
        rnd = _Round(engine=engine, run=run, plan=plan, snapshot=snapshot, tabs=tabs, hosts=hosts, gone=gone)
        outcomes.update(_schedule(rnd, {t: jobs[t] for t in pending}, plan.plan.defaults.concurrency))
    return ProvisionResult(
        run_id=run.run_id, workspace_id=run.workspace_id, workers=tuple(outcomes[p.task] for p in plan.workers), schedule=tuple(render_schedule(scheduled)),
    )  # fmt: skip


def _note_worktrees_folder(engine: Engine, run: Run, plan: ResolvedPlan) -> None:
    """Before the first checkout: record that `<repo>.worktrees/` does not exist yet (the run's checkouts create it)."""
    folder = plan.repo.worktrees_dir
    if folder.exists() or any(e.kind == FactKind.WORKTREES_FOLDER for e in engine.ledger.events(run.run_id)):
        return
    engine.ledger.record_fact(run.run_id, FactKind.WORKTREES_FOLDER, detail=WorktreesFolder(path=str(folder)))


def _schedule(rnd: _Round, jobs: dict[str, _Job], concurrency: int) -> dict[str, WorkerOutcome]:
    """Run the stages concurrently in graphlib order: a sibling's pane waits for its owner's pane (not its agent),
    every agent start waits for its own pane. Failures stay with their worker."""
    graph: TopologicalSorter[tuple[str, str]] = TopologicalSorter()
    for task, job in jobs.items():
        graph.add((task, "pane"), *([(job.owner, "pane")] if job.owner != task and job.owner in jobs else []))
        graph.add((task, "agent"), (task, "pane"))
    graph.prepare()
    stages = {"pane": _pane_stage, "agent": _agent_stage}
    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="provision") as pool:
        running: dict[Future[None], tuple[str, str]] = {}
        while graph.is_active():
            for node in graph.get_ready():
                task, stage = node
                running[pool.submit(_guarded, rnd, jobs[task], stages[stage])] = node
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                node = running.pop(future)
                future.result()
                graph.done(node)
    return {task: _outcome(rnd.engine, rnd.run, job, error=job.error, held=job.held) for task, job in jobs.items()}


# --- rendering ---


def render_provision(result: ProvisionResult) -> str:
    """One line per worker (task, state, pane, tab label, path, what was reused or created), then reasons and notes."""
    counts = {state: sum(w.state == state for w in result.workers) for state in ("ready", "failed", "provisioning", "queued", "skipped", "held")}
    head = f"provision {result.run_id} (workspace {result.workspace_id}): {counts['ready']} ready, {counts['failed']} failed"
    labels = (("provisioning", "still provisioning"), ("held", "held for their host"), ("queued", "queued"), ("skipped", "skipped"))
    head += "".join(f", {counts[state]} {label}" for state, label in labels if counts[state])
    rows = []
    for w in result.workers:
        if w.already:
            what = "already provisioned"
        else:
            what = "; ".join(part for part in (
                f"created {', '.join(w.created)}" if w.created else "", f"reused {', '.join(w.reused)}" if w.reused else "",
            ) if part) or "-"  # fmt: skip
        rows.append([w.task, w.state, w.pane_id or "-", w.tab_label or "-", w.worktree_path or "-", what])
    table = tabulate(rows, headers=["task", "state", "pane", "tab", "path", "done"], tablefmt="plain")
    lines = [head, *table.splitlines()]
    lines += [f"schedule: {line}" for line in result.schedule]
    for w in result.workers:
        if w.error:
            first, *rest = w.error.splitlines()
            lines.append(f"{w.task}: {first}")
            lines.extend(f"  {line}" for line in rest)
        lines.extend(f"{w.task}: note: {note}" for note in w.notes)
    return "\n".join(lines) + "\n"
