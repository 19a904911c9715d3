"""The stop ladder (spec §7): exit each finished worker's agent, then close the panes and remove the worktrees this run created.

Nothing that holds work is removed (dirty tree, untracked files, commits no other ref has), panes, tabs and
worktrees the run did not create are never touched, and `workspace close` is never used (it cascades, CONTRACT §5).
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict

from orchestrator import git, messages, remote
from orchestrator.herdr_models import AT_REST
from orchestrator.agents import AGENTS
from orchestrator.engine import Done, Engine, InFlightEffect, NotDone, Settlement
from orchestrator.integrate import integration_worktree, worktree_removals
from orchestrator.transcripts import save_transcript
from orchestrator.errors import HerdrCommandError, HerdrConfirmationRequired, HerdrNotFound, HerdrUnavailable, HostUnreachable, OrchError, one_line
from orchestrator.hints import TEXT, orch_command
from orchestrator.report import INTEGRATION_KEPT, INTEGRATION_REMOVED, MOVED_OUT, Wait, open_wait
from packets import inert_line
from packets.render import COMMIT_TRAILER_KEY
from registry.facts import Abandoned, AgentExited, FactKind, Retained, WorktreesFolder, host_workspaces, read_facts
from registry import Effect, EffectStatus, Run, Worker
from registry.machine import ABANDON_TO_SUPERSEDED, LADDER_DONE, RETIRABLE, UNACCEPTED, WAITING_ON_PERSON, WorkerState
from registry.kinds import EventKind

if TYPE_CHECKING:
    from orchestrator.herdr import Herdr

S = WorkerState

# How long the agent gets to leave after its exit command, and how often we look (injected clock: tests never sleep).
EXIT_TIMEOUT_S = 15.0
POLL_S = 0.25
READ_LINES = 40

# The ladder runs on RETIRABLE workers; the person may give up any with --abandon: ABANDON_TO_SUPERSEDED ones become
# superseded first, the others retire directly (registry.machine).
# Final dispositions whose still-working agent retire may interrupt with a `stop` (accepted work is at rest anyway).
STOPPABLE = UNACCEPTED
# The last non-blank line of a shell at its prompt ends like this (bash $, root #, zsh %, fish >, starship ❯).
SHELL_PROMPT = re.compile(r"[$#%>❯]$")

KEPT_ON_REQUEST = "kept on request"
# A worker's host that cannot be reached: what is there is kept (a later retire asks again), never removed blind.
HOST_GONE = "host {host} is unreachable"
# A worker waiting on the person keeps its agent, pane and worktree: the person's answer must reach somebody.
WAIT_WORDS = {"question": "a question", "blocked": "a block", "verification_blocked": "a verification block"}

# Why a pane or checkout the run created was already gone when the ladder came to it (orchestrator.report shows it).
CLOSED_OUTSIDE = "closed outside orch, not by this run"
REMOVED_OUTSIDE = "removed outside orch, not by this run; {branch} its commits"
SWITCHED_OUTSIDE = "switched to {where} outside orch; kept for whoever switched it"
# A sibling's entry for the checkout it shares: what happened to it is listed once, under the worker named here.
SHARED_WITH = "shared with {task}: see {task}"

ItemKind = Literal["agent", "pane", "worktree", "workspace"]
Action = Literal["stopped", "exited", "closed", "removed", "kept", "untouched", "gone", "shared"]
Outcome = Literal["retired", "retained", "waiting", "already_retired", "not_retired"]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Item(_Model):
    """What the ladder did with one thing: an agent, a pane, a worktree or a workspace."""

    kind: ItemKind
    id: str
    action: Action
    reason: str | None = None


class WorkerRetirement(_Model):
    """One worker's ladder: its state before and after, why it was kept, and every item touched or kept."""

    task: str
    name: str
    before: WorkerState
    state: WorkerState
    outcome: Outcome
    reason: str | None = None
    items: tuple[Item, ...] = ()


class RetireResult(_Model):
    """`orch retire`: per worker what was closed and what was kept (with the reason), plus run-level workspaces and
    the integration worktree (None when integration is off or it does not exist)."""

    run_id: str
    workers: tuple[WorkerRetirement, ...]
    workspaces: tuple[Item, ...] = ()
    integration: Item | None = None


@dataclass(frozen=True, kw_only=True)
class Sent:
    """Effect record: text or keys went into a pane."""

    pane_id: str


@dataclass(frozen=True, kw_only=True)
class Closed:
    """Effect record: a pane was closed."""

    pane_id: str


@dataclass(frozen=True, kw_only=True)
class Removed:
    """Effect record: a checkout was removed (by herdr for a tracked workspace, else by git); its branch stays."""

    path: str
    via: Literal["herdr", "git"]
    workspace_id: str | None = None


def default_exit_command(kind: str) -> str | None:
    """The in-pane exit command of an agent kind (orchestrator.agents), or None when orch knows none."""
    known = AGENTS.get(kind)
    return known.exit_command if known is not None else None


@dataclass
class _Ladder:
    """One worker's progress through the ladder inside this call."""

    worker: Worker
    before: WorkerState
    round: int
    items: list[Item] = field(default_factory=list)
    holds: list[str] = field(default_factory=list)
    pane_done: bool = False

    @property
    def task(self) -> str:
        return self.worker.task_label


def retire(
    engine: Engine,
    run: Run,
    tasks: Sequence[str] | None = None,
    keep: Iterable[str] = (),
    abandon: Mapping[str, str] | None = None,
    *,
    exit_command: Callable[[str], str | None] = default_exit_command,
    exit_timeout_s: float = EXIT_TIMEOUT_S,
    say: Callable[[str], None] | None = None,
) -> RetireResult:
    """Retire the run's finished workers (all, or ``tasks``); ``keep`` retains, ``abandon`` maps task -> the person's reason.

    ``say`` hears a progress line as the ladder goes (it waits on each agent to leave: seconds per worker).
    """
    ledger = engine.ledger
    workers = ledger.list_workers(run.run_id)
    by_task = {w.task_label: w for w in workers}
    keep_set, abandon_map = set(keep), dict(abandon or {})
    _check_input(run, by_task, tasks, keep_set, abandon_map)
    wanted = None if tasks is None else {*tasks, *keep_set, *abandon_map}
    selected = [w for w in workers if wanted is None or w.task_label in wanted]

    finished: list[WorkerRetirement] = []
    ladders: list[_Ladder] = []
    for worker in selected:
        outcome = _enter(engine, run, worker, keep_set, abandon_map)
        if isinstance(outcome, _Ladder):
            ladders.append(outcome)
        else:
            finished.append(outcome)

    if say is not None and ladders:
        say(f"retiring {_count(len(ladders), 'worker')}: asking each agent to exit, then closing panes and removing worktrees")
    for number, ladder in enumerate(ladders, 1):
        try:
            _stop_pane(engine, run, ladder, exit_command, exit_timeout_s)
        except HostUnreachable as exc:
            _host_gone(ladder, ladder.worker.pane_id or ladder.task, "pane", exc)
        if say is not None:
            say(f"{ladder.task}: {_ladder_so_far(ladder)} ({number} of {len(ladders)})")
    if say is not None and any(ladder.worker.worktree_path for ladder in ladders):
        say("retiring: removing the worktrees that hold no work")
    _remove_worktrees(engine, run, ladders, ledger.list_workers(run.run_id))
    for ladder in ladders:
        # A ladder stopped at the pane (confirmation_required, an agent that would not exit) stops there; a kept
        # checkout does not keep its side-effect workspace (closing a linked workspace leaves the checkout). Either
        # way, workspaces herdr already removed are recorded as gone.
        try:
            ladder.items.extend(_close_leftovers(engine, run, ladder.task, ladder.worker.created_workspace_ids, close=ladder.pane_done,
                                                 herdr=engine.herdr_of(ladder.worker)))  # fmt: skip
        except HostUnreachable as exc:
            _host_gone(ladder, ", ".join(ladder.worker.created_workspace_ids) or ladder.task, "workspace", exc)

    results = {r.task: r for r in finished}
    for ladder in ladders:
        results[ladder.task] = _settle(engine, run, ladder)
    run_items: list[Item] = []
    settled = not ledger.list_workers(run.run_id, states=[s for s in WorkerState if s not in LADDER_DONE])
    if run.created_workspace_ids and settled:
        run_items = _close_leftovers(engine, run, None, run.created_workspace_ids)
        for item in run_items:
            if item.action == "kept":
                ledger.record_fact(run.run_id, FactKind.RETAINED, detail=Retained(item=item.id, what=item.kind, reason=item.reason))
    if settled:
        run_items.extend(_close_host_workspaces(engine, run))
    integration = _retire_integration(engine, run, settled=settled)
    _remove_worktrees_folder(engine, run)
    return RetireResult(run_id=run.run_id, workers=tuple(results[w.task_label] for w in selected), workspaces=tuple(run_items), integration=integration)


def _retire_integration(engine: Engine, run: Run, *, settled: bool) -> Item | None:
    """The integration worktree: removed once every worker is retired (the branch keeps every merge), else kept and said.

    It holds nothing but merges of accepted work on the integration branch, so a clean one on that branch loses
    nothing when it goes, and the person can check the branch out in their own checkout. While a worker still waits
    on a decision (or works), integration may merge more: it stays, named. A dirty one is never removed.
    """
    if not (engine.run_dir(run.run_id) / "plan.toml").exists():
        return None  # a run registered without a plan (by hand): integration never ran for it
    settings = engine.plan_for(run).plan.integration
    if not settings.enabled or not settings.branch or not run.repo_path:
        return None
    path, repo, branch = integration_worktree(engine, run), run.repo_path, settings.branch
    real = _real(path)
    try:
        registered = real in {_real(p) for p in git.worktree_checkouts(repo)}
    except git.GitError as exc:
        return _kept_integration(engine, run, real, f"git could not list the worktrees of {repo}: {one_line(exc.message)}")
    if not registered:
        return None if not path.exists() else _kept_integration(engine, run, real, f"not a worktree of {repo} any more; remove the folder yourself")
    by_hand = f"remove it with `git -C {shlex.quote(str(repo))} worktree remove {shlex.quote(real)}`"
    if not settled:
        return Item(kind="worktree", id=real, action="kept", reason=INTEGRATION_KEPT.format(branch=branch))
    try:
        now = git.current_branch(path)
        held = "a merge in progress" if git.merge_in_progress(path) else holds_work(repo, path, abandoned=True)
    except git.GitError as exc:
        return _kept_integration(engine, run, real, f"git could not inspect it: {one_line(exc.message)}; {by_hand} once you have looked")
    if now != branch:
        where = "a detached HEAD" if now == "HEAD" else f"branch {now}"
        return _kept_integration(engine, run, real, SWITCHED_OUTSIDE.format(where=where))
    if held:
        return _kept_integration(engine, run, real, f"{held}; {by_hand} once you have looked")
    key = f"run:retire:integration_worktree_remove:{worktree_removals(engine, run)}"
    try:
        engine.once(run.run_id, None, "worktree_remove", key, {"via": "git", "repo": str(repo), "path": real},
                    lambda: _git_remove(repo, real), model=Removed)  # fmt: skip
    except (git.GitError, InFlightEffect) as exc:
        return _kept_integration(engine, run, real, f"removal failed: {one_line(exc.message)}; {by_hand}")
    return Item(kind="worktree", id=real, action="removed", reason=INTEGRATION_REMOVED.format(branch=branch))


def _kept_integration(engine: Engine, run: Run, path: str, reason: str) -> Item:
    engine.ledger.record_fact(run.run_id, FactKind.RETAINED, detail=Retained(item=path, what="worktree", reason=reason))
    return Item(kind="worktree", id=path, action="kept", reason=reason)


def _close_host_workspaces(engine: Engine, run: Run) -> list[Item]:
    """Once every worker is retired: another host's primary-checkout workspace that a worker's ``worktree create``
    opened there (provision's ``host_workspace`` fact), closed as any side-effect workspace is (its one shell's pane,
    never `workspace close`), under that worker's name. A host not reached keeps it, said; a later retire asks again."""
    items: list[Item] = []
    for host, fact in sorted(host_workspaces(engine.ledger.events(run.run_id)).items()):
        # Without its id (the create's read-back never ran: every later start of the worker reads it) nothing is closed.
        if "workspace" not in fact:
            continue
        task, workspace = fact["task"], fact["workspace"]
        try:
            found = _close_leftovers(engine, run, task, [workspace], herdr=engine.herdr_at(run.run_id, host))
        except HostUnreachable as exc:
            found = [Item(kind="workspace", id=workspace, action="kept", reason=f"{HOST_GONE.format(host=host)} ({one_line(exc.message)})")]
        for item in found:
            if item.action == "kept":
                engine.ledger.record_fact(run.run_id, FactKind.RETAINED, task_label=task, detail=Retained(item=item.id, what=item.kind, reason=item.reason))
        items.extend(found)
    return items


def _remove_worktrees_folder(engine: Engine, run: Run) -> None:
    """`<repo>.worktrees/`, when this run's provisioning created it, goes once it is empty (an empty folder is litter);
    on another host, `<checkout>.worktrees/` there, by `rmdir` over ssh (a host not reached keeps it: a later retire
    tries again)."""
    made = read_facts(engine.ledger.events(run.run_id), WorktreesFolder)
    here = [f for f in made if not f.get("host")]
    if here:
        with suppress(OSError):  # not empty (another run's checkouts, the person's files), or already gone: it stays
            Path(str(here[-1].get("path"))).rmdir()
    there = {(str(f.get("host")), str(f.get("path"))) for f in made if f.get("host")}
    for host, path in sorted(there):
        try:
            ssh = str(engine.host_config(run.run_id, host).ssh)
        except OrchError:
            continue  # a plan without that host any more: nothing to reach it by
        # rmdir removes only an empty folder: anything inside (a checkout kept, another run's, the person's) keeps it.
        remote.remove_empty_dir(ssh, path, runner=engine.remote_runner or remote.run_process)


def _check_input(run: Run, by_task: Mapping[str, Worker], tasks: Sequence[str] | None, keep: set[str], abandon: Mapping[str, str]) -> None:
    """Bad input is one line and changes nothing."""
    for task in [*(tasks or ()), *sorted(keep), *abandon]:
        if task not in by_task:
            raise OrchError(f"run {run.run_id} has no task {task}", hint=f"`orch status --run {run.run_id}` lists the run's tasks")
    both = sorted(keep & set(abandon))
    if both:
        raise OrchError(f"task {both[0]} is both kept and abandoned; choose one")
    for task, reason in abandon.items():
        if not reason.strip():
            raise OrchError(f"abandoning {task} needs a reason (--reason)")


def _enter(engine: Engine, run: Run, worker: Worker, keep: set[str], abandon: Mapping[str, str]) -> _Ladder | WorkerRetirement:
    """Decide whether the worker may be retired and move it to retiring (or retained, for --keep)."""
    ledger, task, before = engine.ledger, worker.task_label, worker.state

    def done(outcome: Outcome, reason: str | None, state: WorkerState = before) -> WorkerRetirement:
        return WorkerRetirement(task=task, name=worker.name, before=before, state=state, outcome=outcome, reason=reason)

    if before is S.RETIRED:
        return done("already_retired", None)
    wait = open_wait(ledger.events(run.run_id, task_label=task), worker) if before in WAITING_ON_PERSON else None
    if wait is not None and task not in abandon:
        # Never exit a worker whose question or block is still open: the decision would reach nobody.
        reason = waiting_reason(run, task, wait) + ("; kept on request" if task in keep else "")
        for item in (worker.pane_id, worker.worktree_path):
            if item is not None:
                ledger.record_fact(run.run_id, FactKind.RETAINED, task_label=task, detail=Retained(item=item, what="worker", reason=f"waits on the person ({WAIT_WORDS[wait.kind]})"))
        return done("waiting", reason)
    if task in keep:
        if before is S.RETAINED:
            return done("retained", KEPT_ON_REQUEST)
        if before not in RETIRABLE:
            return done("not_retired", f"still {before}: nothing to keep yet")
        ledger.transition(run.run_id, task, before, S.RETAINED, cause={"phase": "retire", "reason": KEPT_ON_REQUEST})
        return done("retained", KEPT_ON_REQUEST, S.RETAINED)
    state = before
    if task in abandon:
        reason = abandon[task].strip()
        ledger.record_fact(run.run_id, FactKind.ABANDONED, task_label=task, detail=Abandoned(reason=reason, state=str(state)))
        if state in ABANDON_TO_SUPERSEDED:
            ledger.transition(run.run_id, task, state, S.SUPERSEDED, cause={"phase": "retire", "abandoned": reason})
            state = S.SUPERSEDED
    elif state not in RETIRABLE:
        return done("not_retired", f"still {state}: record its report and disposition first, or --abandon it with a reason")
    elif state is S.FAILED and not _ever_dispatched(engine, run, task):
        # Provisioning failed (a setup command, a read-back gate): its checkout and tab are the evidence the
        # person needs, and nothing in them is the worker's. Keep them until the person gives the task up.
        reason = f"failed before its agent started; kept for inspection (`{orch_command('retire', '--run', run.run_id, '--abandon', task, '--reason', TEXT)}` removes it)"
        ledger.record_fact(run.run_id, FactKind.RETAINED, task_label=task, detail=Retained(item=worker.worktree_path or worker.pane_id or task, what="worker", reason=reason))
        ledger.transition(run.run_id, task, state, S.RETAINED, cause={"phase": "retire", "reason": reason})
        return done("retained", reason, S.RETAINED)
    if state is not S.RETIRING:
        worker = ledger.transition(run.run_id, task, state, S.RETIRING, cause={"phase": "retire"})
    else:
        worker = ledger.get_worker(run.run_id, task)
    # Each entry into retiring is a new round: a retained worker retried later sends /exit again instead of replaying.
    rounds = sum(1 for e in ledger.events(run.run_id, task_label=task) if e.kind == EventKind.TRANSITION and e.to_state is S.RETIRING)
    return _Ladder(worker=worker, before=before, round=rounds)


def waiting_reason(run: Run, task: str, wait: Wait) -> str:
    """Why retire kept a waiting worker, and the exact commands that end the wait."""
    abandon = orch_command("retire", "--run", run.run_id, "--abandon", task, "--reason", TEXT)
    if wait.kind == "verification_blocked":
        decide = f"`{orch_command('send', '--run', run.run_id, task, '--kind', 'follow-up', text=True)}` or `{orch_command('verify', '--run', run.run_id, '--supersede', task, '--reason', TEXT)}`"
    else:
        decide = f"`{orch_command('answer', '--run', run.run_id, task, text=True)}`"
    return f"waits on the person ({WAIT_WORDS[wait.kind]}: {wait.text}); decide with {decide}, or give it up with `{abandon}`"


def _ever_dispatched(engine: Engine, run: Run, task: str) -> bool:
    return any(e.kind == EventKind.TRANSITION and e.to_state is S.DISPATCHED for e in engine.ledger.events(run.run_id, task_label=task))


def _stop_pane(engine: Engine, run: Run, ladder: _Ladder, exit_command: Callable[[str], str | None], timeout_s: float) -> None:
    """Steps (a)-(c): exit the agent in its pane, confirm the shell is back, close the pane if this run created it."""
    herdr, worker, task = engine.herdr_of(ladder.worker), ladder.worker, ladder.task
    pane = worker.pane_id
    at = engine.on_host(worker.host)
    if pane is None:
        ladder.pane_done = True
        return
    try:
        herdr.pane_get(pane)
    except HerdrNotFound:
        # Gone before the ladder touched it: after orch's own exit (herdr may close a pane whose agent leaves), or
        # closed by someone else, which the report must not credit to the run.
        ours = any(e.kind == "pane_send_keys" and e.status is EffectStatus.CONFIRMED and e.request.get("pane") == pane
                   for e in engine.ledger.list_effects(run.run_id, task_label=task))  # fmt: skip
        ladder.items.append(Item(kind="pane", id=pane, action="gone", reason=None if ours else CLOSED_OUTSIDE))
        ladder.pane_done = True
        return
    # Before the agent exits (a TUI's history may leave with it) and long before the pane closes.
    save_transcript(engine, run, worker, pane)
    agent = _agent_in(herdr, pane)
    if agent is not None:
        status, name = agent
        if name is not None and name != worker.name:
            ladder.items.append(Item(kind="agent", id=pane, action="untouched", reason=f"the pane runs agent {name}, not {worker.name}"))
            ladder.holds.append(f"pane {pane} runs another agent ({name})")
            return
        command = exit_command(worker.kind)
        if command is None:
            # Typing a guessed command into an agent could be taken as a prompt: keep the pane instead.
            reason = f"orch knows no exit command for {worker.kind}; exit the agent in its pane, then retire again"
            ladder.items.append(Item(kind="agent", id=pane, action="kept", reason=reason))
            ladder.holds.append(f"pane {pane}: {reason}")
            return
        if status == "working" and worker.final_disposition in STOPPABLE:
            # Its outcome is recorded and final, yet it is still busy (a stalled or rejected worker): the Message
            # Contract's `stop` may interrupt a working worker; typing /exit into a busy agent would not.
            status = _stop_working(engine, run, ladder, timeout_s)
        elif status == "working":
            # Accepted work: a worker sends its result from inside its turn and comes to rest after it, so a quick
            # verification can bring retire first. Let the turn end (bounded); /exit is never typed into it.
            status = _await_rest(engine, herdr, pane, timeout_s)
        if status not in AT_REST:
            reason = f"agent is {status}; {command} not sent"
            ladder.items.append(Item(kind="agent", id=pane, action="kept", reason=reason))
            ladder.holds.append(f"pane {pane}: {reason}")
            return
        unsent = _type_exit(engine, run, worker, pane, command, f"{task}:retire{ladder.round}")
        if unsent is not None:
            ladder.items.append(Item(kind="agent", id=pane, action="kept", reason=unsent))
            ladder.holds.append(f"pane {pane}: {unsent}")
            return
        back = _await_shell(engine, herdr, pane, command, timeout_s)
        if back == "pane_gone":
            ladder.items += [Item(kind="agent", id=pane, action="exited"), Item(kind="pane", id=pane, action="gone")]
            ladder.pane_done = True
            return
        if back != "shell":
            ladder.items.append(Item(kind="agent", id=pane, action="kept", reason=back))
            ladder.holds.append(f"pane {pane}: {back}")
            return
        ladder.items.append(Item(kind="agent", id=pane, action="exited"))
    if pane not in worker.created_pane_ids:
        ladder.items.append(Item(kind="pane", id=pane, action="untouched", reason="not created by this run"))
        ladder.pane_done = True
        return
    try:
        engine.once(run.run_id, task, "pane_close", f"{task}:retire{ladder.round}:pane_close", {"pane": pane, **at},
                    lambda: _closed(pane, lambda: herdr.pane_close(pane)), model=Closed)  # fmt: skip
    except HerdrConfirmationRequired:
        # Spec §7 step 3: stop here. workspace close would close the whole worktree group and every sibling in it.
        reason = "pane close needs confirmation (it would close a worktree group); the ladder stops here"
        ladder.items.append(Item(kind="pane", id=pane, action="kept", reason=reason))
        ladder.holds.append(f"pane {pane}: {reason}")
        return
    except HerdrNotFound:
        ladder.items.append(Item(kind="pane", id=pane, action="gone"))
        ladder.pane_done = True
        return
    except (HerdrCommandError, InFlightEffect) as exc:
        reason = f"pane close failed: {one_line(exc.message)}"
        ladder.items.append(Item(kind="pane", id=pane, action="kept", reason=reason))
        ladder.holds.append(f"pane {pane}: {reason}")
        return
    ladder.items.append(Item(kind="pane", id=pane, action="closed"))
    ladder.pane_done = True


def exit_for_slot(
    engine: Engine, run: Run, worker: Worker, *, exit_command: Callable[[str], str | None] = default_exit_command, exit_timeout_s: float = EXIT_TIMEOUT_S
) -> str | None:
    """Exit a finished worker's agent so its slot frees; pane and checkout stay for the ladder. None, or why it stayed.

    The same first rung as the ladder (a `stop` first for a busy failed/rejected/superseded worker, the exit command
    only at rest, each keystroke an ``engine.once`` effect), under keys of its own; success is the FactKind.AGENT_EXITED fact.
    """
    herdr, task, pane = engine.herdr_of(worker), worker.task_label, worker.pane_id
    disposition = worker.final_disposition.value if worker.final_disposition else None
    if pane is None or _agent_in(herdr, pane) is None:
        engine.ledger.record_fact(run.run_id, FactKind.AGENT_EXITED, task_label=task, detail=AgentExited(pane=pane, disposition=disposition, how="no agent in its pane"))
        return None
    status, name = _agent_in(herdr, pane) or ("idle", None)
    if name is not None and name != worker.name:
        return f"pane {pane} runs agent {name}, not {worker.name}"
    command = exit_command(worker.kind)
    if command is None:
        return f"orch knows no exit command for {worker.kind}"
    ladder = _Ladder(worker=worker, before=worker.state, round=0)
    if status == "working" and worker.final_disposition in STOPPABLE:
        status = _stop_working(engine, run, ladder, exit_timeout_s)
    if status not in AT_REST:
        return f"agent is {status}; {command} not sent"
    # The same keystrokes as the ladder's, under keys of its own.
    unsent = _type_exit(engine, run, worker, pane, command, f"{task}:free-slot")
    if unsent is not None:
        return unsent
    back = _await_shell(engine, herdr, pane, command, exit_timeout_s)
    if back not in ("shell", "pane_gone"):
        return back
    engine.ledger.record_fact(run.run_id, FactKind.AGENT_EXITED, task_label=task, detail=AgentExited(pane=pane, disposition=disposition, how=command))
    return None


def _type_exit(engine: Engine, run: Run, worker: Worker, pane: str, command: str, key: str) -> str | None:
    """Type the agent's exit command and Enter into the worker's pane, each an ``engine.once`` effect under ``key``
    (settled by read-back: orchestrator.effects, settle_pane_send_text / _keys). None, or why it was not sent."""
    herdr, at = engine.herdr_of(worker), engine.on_host(worker.host)
    try:
        engine.once(run.run_id, worker.task_label, "pane_send_text", f"{key}:exit_text", {"pane": pane, "text": command, **at},
                    lambda: _sent(pane, lambda: herdr.pane_send_text(pane, command)), model=Sent)  # fmt: skip
        engine.once(run.run_id, worker.task_label, "pane_send_keys", f"{key}:exit_enter", {"pane": pane, "keys": ["Enter"], **at},
                    lambda: _sent(pane, lambda: herdr.pane_send_keys(pane, "Enter")), model=Sent)  # fmt: skip
    except (HerdrCommandError, InFlightEffect) as exc:
        return f"{command} could not be sent: {one_line(exc.message)}"
    return None


def _sent(pane: str, send: Callable[[], None]) -> Sent:
    send()
    return Sent(pane_id=pane)


# --- read-back settlement of the retire ladder's effects (orchestrator.effects names these) ---


def settle_pane_send_text(engine: Engine, run: Run, effect: Effect) -> Settlement[Sent]:
    """Done if no agent runs in the pane any more, or the exit command is on its screen; else not done."""
    pane, text, herdr = effect.request["pane"], effect.request["text"], engine.effect_herdr(effect)
    if _agent_in(herdr, pane) is None:
        return Done(Sent(pane_id=pane), f"no agent runs in pane {pane}")
    try:
        screen = herdr.pane_read(pane, source="recent", lines=5)
    except HerdrNotFound:
        return Done(Sent(pane_id=pane), f"pane {pane} is gone")
    if text in screen:
        return Done(Sent(pane_id=pane), f"{text} is on the last lines of pane {pane}")
    return NotDone(f"the agent in pane {pane} runs on and {text} is not on its screen")


def settle_pane_send_keys(engine: Engine, run: Run, effect: Effect) -> Settlement[Sent]:
    """Done if no agent runs in the pane any more; else not done (Enter again on an exiting agent is harmless)."""
    pane = effect.request["pane"]
    if _agent_in(engine.effect_herdr(effect), pane) is None:
        return Done(Sent(pane_id=pane), f"no agent runs in pane {pane}")
    return NotDone(f"the agent in pane {pane} runs on")


def settle_pane_close(engine: Engine, run: Run, effect: Effect) -> Settlement[Closed]:
    """Done if herdr no longer knows the pane; else not done."""
    pane = effect.request["pane"]
    found = _pane_closed(engine.effect_herdr(effect), pane)
    return Done(found, f"`pane get {pane}` says not found") if found is not None else NotDone(f"pane {pane} is still open")


def settle_worktree_remove(engine: Engine, run: Run, effect: Effect) -> Settlement[Removed]:
    """Done if the checkout is gone; else not done."""
    req = effect.request
    ssh = str(engine.host_config(run.run_id, req["host"]).ssh) if req.get("host") else None
    gone = _checkout_gone(req["path"], req["via"], req.get("workspace"), ssh=ssh)
    return Done(gone, f"{req['path']} is gone") if gone is not None else NotDone(f"{req['path']} is still there")


def _closed(pane: str, close: Callable[[], None]) -> Closed:
    close()
    return Closed(pane_id=pane)


def _pane_closed(herdr: Herdr, pane: str) -> Closed | None:
    """Read-back for an in-flight close: the pane is gone, or we cannot say."""
    try:
        herdr.pane_get(pane)
    except HerdrNotFound:
        return Closed(pane_id=pane)
    return None


def _agent_in(herdr: Herdr, pane: str) -> tuple[str, str | None] | None:
    """The agent status and name in the pane (on the herdr that numbered it), or None when the pane is no agent pane
    (herdr: agent_not_found)."""
    try:
        agent = herdr.agent_get(pane)
    except HerdrNotFound:
        return None
    return agent.agent_status, agent.name


def _stop_working(engine: Engine, run: Run, ladder: _Ladder, timeout_s: float) -> str:
    """Send one `stop` envelope to a busy worker whose disposition is final; its agent status once it settled (or not)."""
    worker, task = ladder.worker, ladder.task
    disposition = worker.final_disposition.value if worker.final_disposition else "final"
    body = f"Your task is over (disposition: {disposition}). Stop now, do not send a result, and end your turn."
    try:
        messages.send_message(engine, run, task, "stop", body, key=f"{task}:retire{ladder.round}:stop", agent_status="working")
    except HerdrUnavailable:
        raise  # herdr is down: retiring waits for it (orchestrator.run)
    except (OrchError, HerdrCommandError) as exc:
        return f"working (stop not sent: {one_line(exc.message)})"
    ladder.items.append(Item(kind="agent", id=worker.pane_id or task, action="stopped"))
    return _await_rest(engine, engine.herdr_of(worker), worker.pane_id or "", timeout_s, since="{timeout}s after a stop")


def _await_rest(engine: Engine, herdr: Herdr, pane: str, timeout_s: float, since: str = "after {timeout}s") -> str:
    """Poll (bounded, on the engine's clock) until the pane's agent is at rest; its status then, or why it is not."""
    clock = engine.clock
    deadline = clock.monotonic() + timeout_s
    while True:
        found = _agent_in(herdr, pane)
        status = found[0] if found else "idle"
        if status in AT_REST:
            return status
        if clock.monotonic() >= deadline:
            return f"still {status} {since.format(timeout=f'{timeout_s:g}')}"
        clock.sleep(POLL_S)


def _await_shell(engine: Engine, herdr: Herdr, pane: str, command: str, timeout_s: float) -> str:
    """Poll (bounded, on the engine's clock) until the agent is gone and the shell prompt is back.

    Returns "shell", "pane_gone", or the reason the pane is kept.
    """
    clock = engine.clock
    deadline = clock.monotonic() + timeout_s
    last = ""
    while True:
        if _agent_in(herdr, pane) is None:
            try:
                text = herdr.pane_read(pane, source="recent", lines=READ_LINES)
            except HerdrNotFound:
                return "pane_gone"
            lines = [line.rstrip() for line in text.splitlines() if line.strip()]
            last = lines[-1] if lines else ""
            if SHELL_PROMPT.search(last):
                return "shell"
            gone = True
        else:
            gone = False
        if clock.monotonic() >= deadline:
            if gone:
                return f"agent left but no shell prompt within {timeout_s:g}s (last line {last!r})"
            return f"agent did not exit within {timeout_s:g}s of {command}"
        clock.sleep(POLL_S)


def _remove_worktrees(engine: Engine, run: Run, ladders: list[_Ladder], everyone: list[Worker]) -> None:
    """Step (d): remove each checkout this run created once every worker on it is retired and it holds no work."""
    paths: list[str] = []
    for ladder in ladders:
        path = ladder.worker.worktree_path
        if path and path not in paths:
            paths.append(path)
    in_call = {ladder.task: ladder for ladder in ladders}
    for path in paths:
        on_path = [in_call[w.task_label] for w in everyone if w.worktree_path == path and w.task_label in in_call]
        owners = [w for w in everyone if path in w.created_worktree_paths]
        if not owners:
            _note(on_path, owners, Item(kind="worktree", id=path, action="untouched", reason="not created by this run"))
            continue
        busy = [w for w in everyone if w.worktree_path == path and w.state is not S.RETIRED and w.task_label not in in_call]
        busy_names = [f"{w.task_label} ({w.state})" for w in busy]
        busy_names += [f"{ladder.task} (pane kept)" for ladder in on_path if not ladder.pane_done]
        if busy_names:
            # Not a hold on the workers here: the checkout is removed when its last worker retires.
            _note(on_path, owners, Item(kind="worktree", id=path, action="kept", reason=f"still used by {', '.join(busy_names)}"))
            continue
        try:
            verdict = _worktree_verdict(engine, run, path, owners, on_path, everyone)
        except HostUnreachable as exc:
            # Its host cannot say whether the checkout holds work: never removed blind; the next retire asks again.
            verdict = Item(kind="worktree", id=path, action="kept", reason=f"{HOST_GONE.format(host=owners[0].host)} ({one_line(exc.message)}); not removed blind")
        _note(on_path, owners, verdict)
        if verdict.action == "kept":
            for ladder in on_path:
                ladder.holds.append(f"worktree {path}: {verdict.reason}")


def _note(ladders: list[_Ladder], owners: list[Worker], item: Item) -> None:
    """List a checkout once: under the worker that created it (or the first one retiring it here); siblings refer to it."""
    if not ladders:
        return
    created = {w.task_label for w in owners}
    lister = next((ladder for ladder in ladders if ladder.task in created), ladders[0])
    lister.items.append(item)
    for ladder in ladders:
        if ladder is not lister:
            ladder.items.append(Item(kind="worktree", id=item.id, action="shared", reason=SHARED_WITH.format(task=lister.task)))


def _worktree_verdict(engine: Engine, run: Run, path: str, owners: list[Worker], on_path: list[_Ladder], everyone: list[Worker]) -> Item:
    """Decide and do: keep a checkout that holds work, else remove it (herdr if a workspace of ours tracks it, else git).

    A checkout on another host is judged there: git over ssh, herdr through that host's boundary, paths compared as
    that host spells them (the controller cannot resolve them). If the host cannot be reached, HostUnreachable: the
    caller keeps the checkout and says so, never removing it blind.
    """
    host = owners[0].host
    herdr, at = engine.herdr_at(run.run_id, host), engine.on_host(host)
    config = engine.host_config(run.run_id, host) if at else None
    ssh = str(config.ssh) if config is not None else None
    real: Callable[[Path | str], str] = _real if ssh is None else (lambda p: os.path.normpath(str(p)))
    checkout = Path(path)
    if not (remote.exists(ssh, path) if ssh else checkout.exists()):
        removed = any(e.kind == "worktree_remove" and e.request.get("path") == path for e in engine.ledger.list_effects(run.run_id))
        branches = sorted({w.branch for w in owners if w.branch})
        reason = REMOVED_OUTSIDE.format(branch=f"branch {', '.join(branches)} keeps" if branches else "its branch keeps")
        return Item(kind="worktree", id=path, action="gone", reason=None if removed else reason)
    try:
        repo = (run.repo_path or git.worktree_checkouts(checkout)[0]) if config is None else str(config.checkout)
        if real(path) not in {real(p) for p in git.worktree_checkouts(repo, on=ssh)}:
            return Item(kind="worktree", id=path, action="kept", reason=f"not a worktree of {repo}")
        planned = {w.branch for w in owners if w.branch}
        now = git.current_branch(checkout, on=ssh)
        if planned and now not in planned:
            # Someone switched it to a branch of theirs: it is theirs now, whatever it holds.
            where = "a detached HEAD" if now == "HEAD" else f"branch {now}"
            return Item(kind="worktree", id=path, action="kept", reason=SWITCHED_OUTSIDE.format(where=where))
        sharing = [w.task_label for w in everyone if w.worktree_path == path]
        held = holds_work(repo, checkout, abandoned=all(_abandoned(engine, run, ladder.task) for ladder in on_path), tasks=sharing, on=ssh,
                          home=run.repo_path if ssh else None)  # fmt: skip
    except git.GitError as exc:
        return Item(kind="worktree", id=path, action="kept", reason=f"git could not inspect it: {one_line(exc.message)}")
    if held:
        return Item(kind="worktree", id=path, action="kept", reason=held)
    ours = {ws for w in everyone if w.worktree_path == path for ws in w.created_workspace_ids} | set(run.created_workspace_ids)
    try:
        listed = herdr.worktree_list(cwd=repo).worktrees
    except HerdrCommandError as exc:
        return Item(kind="worktree", id=path, action="kept", reason=f"herdr worktree list failed: {one_line(exc.message)}")
    tracking = next((w.open_workspace_id for w in listed if real(w.path) == real(path)), None)
    if tracking is not None and tracking not in ours:
        return Item(kind="worktree", id=path, action="kept", reason=f"open in workspace {tracking}, which this run did not create")
    # Never pull a checkout from under an open pane (one the ledger does not know as the run's, say): only the
    # workspace herdr's own `worktree remove` closes with it may still hold one.
    try:
        panes = herdr.pane_list()
    except HerdrCommandError as exc:
        return Item(kind="worktree", id=path, action="kept", reason=f"herdr pane list failed: {one_line(exc.message)}")
    inside = [p.pane_id for p in panes if p.workspace_id != tracking and _within(p.cwd or p.foreground_cwd, path, real)]
    if inside:
        return Item(kind="worktree", id=path, action="kept", reason=f"pane {', '.join(inside)} is still open in it")
    owner = owners[0].task_label
    key = f"{owner}:retire:worktree_remove:{path}"
    try:
        if tracking is not None:
            ws = tracking
            engine.once(run.run_id, owner, "worktree_remove", key, {"via": "herdr", "workspace": ws, "path": path, **at},
                        lambda: Removed(path=herdr.worktree_remove(ws).path, via="herdr", workspace_id=ws),
                        model=Removed)  # fmt: skip
        else:
            engine.once(run.run_id, owner, "worktree_remove", key, {"via": "git", "repo": str(repo), "path": path, **at},
                        lambda: _git_remove(repo, path, on=ssh), model=Removed)  # fmt: skip
    except (HerdrCommandError, git.GitError, InFlightEffect) as exc:
        return Item(kind="worktree", id=path, action="kept", reason=f"removal failed: {one_line(exc.message)}")
    return Item(kind="worktree", id=path, action="removed")


def holds_work(
    repo: Path | str, checkout: Path | str, *, abandoned: bool = False, tasks: Sequence[str] = (), on: str | None = None, home: Path | str | None = None
) -> str | None:
    """Why removing this checkout would lose work, or None when it may go.

    The rule: a checkout goes only when `git status --porcelain` (untracked included) is empty and every commit it
    holds is also on some other branch, tag or remote-tracking ref (merged, integrated or pushed). A checkout whose
    work the person explicitly abandoned may go with commits only on its own branch: the branch is never deleted,
    so they stay reachable. Uncommitted work is never removed, abandoned or not. ``home``: the controller's repository
    for a checkout on another host (``on``); a commit held by one of its refs counts as kept.
    """
    status = git.status_porcelain(checkout, on=on)
    if status:
        untracked = sum(1 for line in status if line.startswith("??"))
        changed = len(status) - untracked
        parts = [_count(changed, "changed file"), _count(untracked, "untracked file")]
        return " and ".join(part for part in parts if part)
    if abandoned:
        return None
    branch = git.current_branch(checkout, on=on)
    head = git.rev_parse(checkout, "HEAD", on=on)
    if head is None:
        return "it has no commit"
    only = git.commits_only_on(repo, head, None if branch == "HEAD" else branch, on=on)
    if home is not None:
        # A checkout on another host (``on``): a commit fetched home by SHA and held there by a ref (orch's own
        # refs/orch/…, the integration branch) is safe, though no other ref of that host has it.
        only = [sha for sha in only if not git.held_by_a_ref(home, sha)]
    if not only:
        return None
    where = "this detached checkout" if branch == "HEAD" else branch
    if len(tasks) > 1:
        # Sibling workers share the checkout: each commit is named under the worker whose trailer it carries, so a
        # rejected sibling's commit is never read as its accepted owner's.
        return f"not integrated: on {where} only, " + _by_worker(repo, only, tasks, on=on)
    if len(only) == 1:
        return f"not integrated: commit {only[0][:7]} exists only on {where}"
    return f"not integrated: {len(only)} commits exist only on {where} ({only[0][:7]} and {len(only) - 1} more)"


def _by_worker(repo: Path | str, commits: Sequence[str], tasks: Sequence[str], *, on: str | None = None) -> str:
    """Commits (newest first) grouped by the worker their Orch-Task trailer names, in the workers' order."""
    groups: dict[str, list[str]] = {}
    for sha in commits:
        names = set(git.trailer_values(repo, sha, COMMIT_TRAILER_KEY, on=on))
        owner = next(iter(names)) if len(names) == 1 and names <= set(tasks) else ""
        groups.setdefault(owner, []).append(sha)
    parts = []
    for owner in [*tasks, ""]:
        shas = groups.get(owner)
        if not shas:
            continue
        by = f"by {owner}" if owner else f"with no {COMMIT_TRAILER_KEY} trailer of theirs"
        parts.append(f"commit {shas[0][:7]} {by}" if len(shas) == 1 else f"{len(shas)} commits {by} ({shas[0][:7]} and {len(shas) - 1} more)")
    return ", ".join(parts)


def _ladder_so_far(ladder: _Ladder) -> str:
    """The agent and pane steps of one worker's ladder in a few words (the report says the why of anything kept)."""
    return ", ".join(f"{item.kind} {item.action}" for item in ladder.items) or "no pane to close"


def _count(n: int, noun: str) -> str:
    return "" if n == 0 else f"{n} {noun}{'' if n == 1 else 's'}"


def _abandoned(engine: Engine, run: Run, task: str) -> bool:
    return any(e.kind == FactKind.ABANDONED for e in engine.ledger.events(run.run_id, task_label=task))


def _real(path: Path | str) -> str:
    return os.path.realpath(path)


def _within(cwd: str | None, path: str, resolve: Callable[[Path | str], str] = os.path.realpath) -> bool:
    if not cwd:
        return False
    real, root = resolve(cwd), resolve(path)
    return real == root or real.startswith(root.rstrip("/") + "/")


def _git_remove(repo: Path | str, path: str, *, on: str | None = None) -> Removed:
    git.remove_worktree(repo, path, on=on)
    return Removed(path=path, via="git")


def _checkout_gone(path: str, via: Literal["herdr", "git"], workspace_id: str | None, *, ssh: str | None = None) -> Removed | None:
    there = remote.exists(ssh, path) if ssh else Path(path).exists()
    return None if there else Removed(path=path, via=via, workspace_id=workspace_id)


def _close_leftovers(engine: Engine, run: Run, task: str | None, workspace_ids: Iterable[str], *, close: bool = True, herdr: Herdr | None = None) -> list[Item]:
    """Step (e): close side-effect workspaces from provisioning that hold nothing but the one shell herdr opened them with.

    A workspace always has a pane, so "empty" means a single plain-shell pane (no agent, nobody split it). It is
    closed by closing that pane, never with `workspace close`: if it is still a worktree group's parent, herdr then
    answers confirmation_required and closes nothing, where `workspace close` would close the whole group.
    """
    items: list[Item] = []
    # The run's and the controller's workspaces are the controller's; ids on another host only look like them.
    herdr = herdr or engine.herdr
    protected = {run.workspace_id, run.controller_workspace_id, engine.env.get("HERDR_WORKSPACE_ID")} if herdr is engine.herdr else set()
    for ws in workspace_ids:
        if ws in protected:
            continue
        try:
            panes = herdr.pane_list(workspace=ws)
        except HerdrNotFound:
            # Already gone: herdr removes a workspace emptied by `pane move` (provision's effect names it), said as
            # the report says it; one gone otherwise is only "gone".
            moved = any(e.kind == "pane_move" and e.status is EffectStatus.CONFIRMED and (e.response or {}).get("closed_workspace_id") == ws
                        for e in engine.ledger.list_effects(run.run_id))  # fmt: skip
            items.append(Item(kind="workspace", id=ws, action="closed", reason=MOVED_OUT) if moved else Item(kind="workspace", id=ws, action="gone"))
            continue
        if len(panes) != 1 or panes[0].agent is not None:
            items.append(Item(kind="workspace", id=ws, action="kept", reason=f"not empty ({_count(len(panes), 'pane')})"))
            continue
        if not close:
            items.append(Item(kind="workspace", id=ws, action="kept", reason="the ladder stopped at the worker's pane"))
            continue
        pane = panes[0].pane_id
        try:
            # engine.once calls both callables before it returns, so they cannot see a later iteration's pane.
            at = {} if task is None else engine.on_host(engine.ledger.get_worker(run.run_id, task).host)
            engine.once(run.run_id, task, "pane_close", f"{task or 'run'}:retire:leftover:{ws}:{pane}", {"workspace": ws, "pane": pane, **at},
                        lambda: _closed(pane, lambda: herdr.pane_close(pane)), model=Closed)  # noqa: B023  # fmt: skip
        except HerdrConfirmationRequired:
            items.append(Item(kind="workspace", id=ws, action="kept", reason="it is the parent of a worktree group that is still open"))
            continue
        except HerdrNotFound:
            items.append(Item(kind="workspace", id=ws, action="gone"))
            continue
        except (HerdrCommandError, InFlightEffect) as exc:
            items.append(Item(kind="workspace", id=ws, action="kept", reason=f"closing its pane failed: {one_line(exc.message)}"))
            continue
        items.append(Item(kind="workspace", id=ws, action="closed"))
    return items


def _host_gone(ladder: _Ladder, what: str, kind: ItemKind, exc: HostUnreachable) -> None:
    """The worker's host could not be reached mid-ladder: what is there is kept and said, the ladder stops for it."""
    reason = f"{HOST_GONE.format(host=ladder.worker.host)} ({one_line(exc.message)})"
    ladder.items.append(Item(kind=kind, id=what, action="kept", reason=reason))
    ladder.holds.append(f"{kind} {what}: {reason}")


def _settle(engine: Engine, run: Run, ladder: _Ladder) -> WorkerRetirement:
    """The ladder's end: retired when nothing was kept back, else retained with every reason."""
    items = tuple(ladder.items)
    for item in items:
        if item.action == "kept":
            # The report reads kept items from these facts (orchestrator.report FACT_RETAINED).
            engine.ledger.record_fact(run.run_id, FactKind.RETAINED, task_label=ladder.task, detail=Retained(item=item.id, what=item.kind, reason=item.reason))
    cause = {"phase": "retire", "items": [item.model_dump(mode="json") for item in items]}
    outcome: Outcome
    if ladder.holds:
        reason = "; ".join(ladder.holds)
        engine.ledger.transition(run.run_id, ladder.task, S.RETIRING, S.RETAINED, cause={**cause, "reason": reason})
        state, outcome = S.RETAINED, "retained"
    else:
        reason = None
        engine.ledger.transition(run.run_id, ladder.task, S.RETIRING, S.RETIRED, cause=cause)
        state, outcome = S.RETIRED, "retired"
    return WorkerRetirement(task=ladder.task, name=ladder.worker.name, before=ladder.before, state=state,
                            outcome=outcome, reason=reason, items=items)  # fmt: skip


def render_retire(result: RetireResult) -> str:
    """The human rendering: one line per worker, then what was done or kept, with reasons."""
    labels = {"retired": "retired", "retained": "retained", "waiting": "kept", "already_retired": "already retired", "not_retired": "not retired"}
    lines = [f"Retire {result.run_id}"]
    for worker in result.workers:
        head = f"{worker.task} ({worker.name}): {labels[worker.outcome]}"
        # A waiting worker's reason quotes its question: worker text, made inert.
        lines.append(head + (f": {inert_line(worker.reason)}" if worker.reason else ""))
        lines += [f"  {_render_item(item)}" for item in worker.items]
    if result.workspaces:
        lines.append("Run workspaces:")
        lines += [f"  {_render_item(item)}" for item in result.workspaces]
    if result.integration is not None:
        lines.append(f"Integration {_render_item(result.integration)}")
    return "\n".join(lines) + "\n"


def _render_item(item: Item) -> str:
    return f"{item.kind} {item.id}: {item.action}" + (f" ({inert_line(item.reason)})" if item.reason else "")
