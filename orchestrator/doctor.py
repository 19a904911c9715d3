"""`orch doctor PLAN`: before the fleet, one probe agent per kind the plan uses, from start to callback and back out.

Each probe runs in a detached scratch worktree under a temp dir, against a private probe ledger (its own ORCH_HOME,
one probe run, one worker per kind), so its callback takes the real `orch inbox add` path and nothing of the person's
ledger changes. Trust dialogs are answered by orchestrator/dialogs.py as the plan's policy says. `--offline` points each
probe agent at the scripted model instead of its provider (orchestrator/offline.py): no token is spent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import contextlib
import re
import shutil
import tempfile
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from orchestrator import git
from orchestrator.agents import facts
from orchestrator.config import Settings
from orchestrator.dialogs import READY_TIMEOUT_FLOOR_S, DialogStop, NotReady, answer_trust_dialog, await_ready_sign, flat
from orchestrator.engine import Engine
from orchestrator.errors import ConfigError, HerdrAgentNotReady, HerdrError, HerdrNotFound, OrchError, one_line
from orchestrator.herdr_models import AT_REST, AgentPrompted, IntegrationEntry, WorkspaceCreated
from orchestrator.intake import save_message_limit
from orchestrator.plan import ResolvedPlan, load_plan
from orchestrator.preflight import integration_problems, describe_integration
from orchestrator.quirks import excerpt, quirks
from packets.render import CONTRACT_RULES_TAIL, SEND_INTRO
from registry.facts import Dialog, read_facts
from registry import InboxVerdict, Run, Worker, WorkerState, make_run_id

if TYPE_CHECKING:
    from orchestrator.offline import OfflineModel

PROBE_MESSAGE = "probe ok"
PROBE_KIND = "update"
POLL_S = 0.5
EXIT_WAIT_S = 10.0
DEFAULT_CALLBACK_TIMEOUT_S = 60

_STEP = (
    f"Your only step: send one `{PROBE_KIND}` message whose text is exactly `{PROBE_MESSAGE}` through the Message Contract below, "
    "then end your turn. Do not read, create or change any file."
)


@dataclass(frozen=True, kw_only=True)
class ProbeStarted:
    """`agent start` of a probe: the agent's name, pane and status (``blocked`` when it waits at a dialog)."""

    name: str
    pane_id: str
    agent_status: str


@dataclass(frozen=True, kw_only=True)
class Sent:
    """Text or keys typed into a probe's pane."""

    pane_id: str


@dataclass(frozen=True, kw_only=True)
class Closed:
    """A probe's workspace closed."""

    workspace_id: str


class KindCheck(BaseModel):
    """What the probe of one agent kind found; ``failure`` is its one line (None when it passed)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: str
    ok: bool
    executable: str
    installed: bool
    executable_path: str | None = None
    integration: str
    dialog: str | None = None  # the dialog seen at start, by its quirk-table name
    dialog_answered: bool = False
    dialog_keys: tuple[str, ...] = ()
    prompt_accepted: bool = False
    callback: str | None = None  # e.g. "update #1 accepted"
    model_requests: int | None = None  # offline: the scripted model's requests carrying this probe (None: live)
    seconds: float
    cleanup: tuple[str, ...] = ()
    failure: str | None = None
    hint: str | None = None


class DoctorFailure(BaseModel):
    """The failure document of a doctor that found problems (the shape of every `--json` failure)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ok: bool = False
    error: str = "DoctorFailed"
    reason: str
    problems: tuple[str, ...]
    hint: str | None
    exit_code: int = 1


class DoctorResult(BaseModel):
    """`orch doctor`: one check per agent kind the plan uses, in plan order."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    plan: str
    ok: bool
    offline: bool = False
    kinds: tuple[KindCheck, ...]
    failure: DoctorFailure | None = None

    def error(self) -> OrchError:
        """The failure as the OrchError the CLI prints (one `orch:` line per failed kind)."""
        assert self.failure is not None
        return OrchError("\n".join(self.failure.problems), hint=self.failure.hint)


class _Failed(Exception):
    """A probe stops: its one line and what to do."""

    def __init__(self, line: str, hint: str) -> None:
        super().__init__(line)
        self.line = line
        self.hint = hint


def probe_text(run_id: str, task: str, name: str, callback_prefix: tuple[str, ...]) -> str:
    """The probe prompt: a task whose only step is one message through the Message Contract, exactly as packets send it."""
    return "\n".join([
        f"Probe from orch doctor for task {task} (run {run_id})",
        "",
        "This checks that you can reach the controller before real work starts; it is not a coding task.",
        _STEP,
        "",
        "## Message Contract",
        CONTRACT_RULES_TAIL,
        SEND_INTRO,
        "",
        "```sh",
        f'{shlex.join(callback_prefix)} "[herdr-orchestration run={run_id} task={task} from={name} kind=<kind> reply-to={name}]',
        '<message>"',
        "```",
    ]) + "\n"  # fmt: skip


def _probe_engine(engine: Engine, home: Path) -> Engine:
    """An engine on the private probe ledger: the caller's herdr and clock, callbacks through `orch inbox add`."""
    env = {**engine.env, "ORCH_HOME": str(home)}
    return Engine(settings=Settings.from_env(env), herdr=engine.herdr, clock=engine.clock, env=env, echo=engine.echo, controller="run")


def doctor(engine: Engine, plan_path: Path, *, callback_timeout_s: float = DEFAULT_CALLBACK_TIMEOUT_S, offline: bool = False) -> DoctorResult:
    """Probe every agent kind PLAN uses, one after another; nothing of the person's ledger or checkout changes.

    ``offline``: each probe agent talks to the scripted model on 127.0.0.1 instead of its provider.
    """
    plan_arg = shlex.quote(str(plan_path))
    try:
        plan = load_plan(plan_path, engine.settings, display=str(plan_path))
    except ConfigError as exc:
        raise ConfigError(exc.message, hint=exc.hint or f"`orch plan check {plan_arg}` shows every problem") from None
    # herdr first: without it nothing else can be probed, and a person without herdr should not be sent to clone first.
    entries = engine.herdr.integration_status()
    if not plan.repo.checkout.is_dir():
        hint = exact_hint("clone the repository there (or set the plan's `path`), then run `orch doctor` again", plan_path, offline=offline)
        raise OrchError(f"the plan's checkout {plan.repo.checkout} does not exist", hint=hint)
    kinds = list(dict.fromkeys(w.kind for w in plan.workers))
    scratch = Path(tempfile.mkdtemp(prefix="orch-doctor-"))
    probe = _probe_engine(engine, scratch / "home")
    try:
        with contextlib.ExitStack() as stack:
            model = stack.enter_context(_offline_model(scratch)) if offline else None
            run = _probe_run(probe, plan, kinds, scratch)
            checks = tuple(
                c.model_copy(update={"hint": exact_hint(c.hint, plan_path, offline=offline)})
                for c in (_check_kind(probe, plan, run, kind, entries, scratch, callback_timeout_s, model) for kind in kinds)
            )
    finally:
        probe.close()
        shutil.rmtree(scratch, ignore_errors=True)
    failed = [c for c in checks if c.failure is not None]
    failure = None
    if failed:
        problems = tuple(f.failure or "" for f in failed)
        failure = DoctorFailure(reason=problems[0], problems=problems, hint=failed[0].hint)
    return DoctorResult(plan=str(plan_path), ok=not failed, offline=offline, kinds=checks, failure=failure)


def exact_hint(hint: str | None, plan_path: Path, *, offline: bool = False) -> str | None:
    """``hint`` with its `orch doctor` made the exact command to run again (this plan, as run), as every printed command is."""
    again = f"`orch doctor {shlex.quote(str(plan_path))}{' --offline' if offline else ''}`"
    return hint.replace("`orch doctor`", again) if hint else hint


# One hint per kind of failure; the first failed kind's is printed (one hint line, like every orch failure); its
# `orch doctor` becomes the exact command (exact_hint).
HINT_INSTALL = "install the agent so its executable is on PATH in herdr's panes, then run `orch doctor` again"
HINT_CALLBACK = "the probe's callback must reach `orch inbox add` from the agent's shell: run it there by hand to see why not"
HINT_DIALOG = "answer it in the pane yourself, or allow it with `[policy] trust_run_worktrees = true`, then run `orch doctor` again"
HINT_FORM = "orch doctor never approves anything: let the agent run `orch` without asking (its permission settings), then run `orch doctor` again"
HINT_OFFLINE = "probe it live with `orch doctor PLAN` (without --offline; its model is then the agent's own, and spends tokens)"


def _probe_run(probe: Engine, plan: ResolvedPlan, kinds: list[str], scratch: Path) -> Run:
    """The probe ledger's one run, with one worker per kind (registered before any of its side effects)."""
    controller = probe.env.get("HERDR_PANE_ID") or "orch-doctor"
    run_id = make_run_id(controller, probe.clock.now())
    workers = [
        {"task_label": f"doctor-{kind}", "name": f"orch-doctor-{kind}", "kind": kind, "objective": "orch doctor probe",
         "cause": {"phase": "doctor"}, "worktree_path": str(scratch / "worktrees" / kind)}
        for kind in kinds
    ]  # fmt: skip
    run = probe.ledger.create_run(run_id, controller_target=controller, repo=plan.repo.repo, repo_path=plan.repo.checkout,
                                  organization=plan.repo.organization, fields={"controller_kind": "run"}, workers=workers)  # fmt: skip
    save_message_limit(probe, run_id, plan.message_limit)
    return run


def _check_kind(probe: Engine, plan: ResolvedPlan, run: Run, kind: str, entries: tuple[IntegrationEntry, ...], scratch: Path, timeout_s: float,
                model: OfflineModel | None) -> KindCheck:
    clock = probe.clock
    started = clock.monotonic()
    executable = facts(kind).executable
    found = shutil.which(executable, path=probe.env.get("PATH"))
    problems = dict(integration_problems([kind], entries))
    by_target = {e.target: e for e in entries}
    integration = problems.get(kind) or describe_integration(by_target[kind])
    check = KindCheck(kind=kind, ok=False, executable=executable, installed=found is not None, executable_path=found, integration=integration, seconds=0.0)
    state = {"check": check}
    try:
        if found is None:
            raise _Failed(f"{kind}: not installed: `{executable}` is not on PATH", HINT_INSTALL)
        if kind in problems:
            install = f"ask the person to run `herdr integration install {kind}` (orch never installs one: it changes durable machine state)"
            raise _Failed(f"{kind}: no current herdr integration ({integration}): lifecycle detection would not be authoritative", install)
        offline: tuple[dict[str, str], tuple[str, ...]] | None = None
        if model is not None:
            offline = model.agent(kind)
            if offline is None:
                raise _Failed(f"{kind}: no offline configuration for this kind (--offline knows {', '.join(_offline_kinds())})", HINT_OFFLINE)
        _probe(probe, plan, run, kind, scratch / "worktrees" / kind, timeout_s, state, offline)
        check = state["check"].model_copy(update={"ok": True})
    except _Failed as failed:
        check = state["check"].model_copy(update={"failure": failed.line, "hint": failed.hint or None})
    if model is not None and kind in _offline_kinds() and check.installed and kind not in problems:
        check = check.model_copy(update={"model_requests": model.requests(f"doctor-{kind}")})
    return check.model_copy(update={"seconds": round(clock.monotonic() - started, 1)})


def _probe(probe: Engine, plan: ResolvedPlan, run: Run, kind: str, path: Path, timeout_s: float, state: dict[str, KindCheck],
           offline: tuple[dict[str, str], tuple[str, ...]] | None = None) -> None:
    """Scratch worktree, workspace, agent (trust dialog per policy), prompt, callback; then everything closed again.

    ``offline``: the workspace's environment and the agent's extra argv that point it at the scripted model.
    """
    env, args = offline if offline is not None else ({}, ())
    herdr, ledger = probe.herdr, probe.ledger
    task, name = f"doctor-{kind}", f"orch-doctor-{kind}"
    checkout = plan.repo.checkout
    path.parent.mkdir(parents=True, exist_ok=True)
    cleanup: list[str] = []
    workspace_id: str | None = None
    pane_id: str | None = None
    git.add_scratch_worktree(checkout, path, "HEAD")
    try:
        try:
            created = probe.once(run.run_id, task, "workspace_create", f"{task}:workspace_create", {"cwd": str(path), "label": name, **({"env": env} if env else {})},
                                 lambda: herdr.workspace_create(cwd=path, label=name, env=env or None), model=WorkspaceCreated)  # fmt: skip
        except HerdrError as exc:
            raise _Failed(f"{kind}: herdr could not open a workspace for the probe: {one_line(exc.message)}", exc.hint or "") from None
        workspace_id, pane_id = created.workspace.workspace_id, created.root_pane.pane_id
        worker = ledger.update_worker(run.run_id, task, cause={"phase": "doctor"}, pane_id=pane_id, reply_target=name,
                                      created_workspace_ids=(workspace_id,), created_worktree_paths=(str(path),))  # fmt: skip
        agent = _start(probe, plan, run, kind, task, name, pane_id, args)
        # As provisioning does: the prompt goes only to a screen showing the kind's ready sign, held, never to a dialog.
        ready_s = max(plan.plan.defaults.agent_start_timeout_s, READY_TIMEOUT_FLOOR_S)
        try:
            await_ready_sign(probe, worker, timeout_s=ready_s, blocked=agent.agent_status == "blocked",
                             answer_trust=lambda: _answer_dialog(probe, plan, worker, pane_id, state))  # fmt: skip
        except DialogStop as stop:
            _record_dialog(probe, worker, state)
            raise _Failed(f"{kind}: stopped at a dialog orch cannot answer: {stop.message}", stop.hint or HINT_DIALOG) from None
        except NotReady as late:
            raise _Failed(f"{kind}: the agent did not start: {late.message}", HINT_INSTALL) from None
        ledger.transition(run.run_id, task, WorkerState.PROVISIONING, WorkerState.READY, cause={"phase": "doctor"})
        ledger.transition(run.run_id, task, WorkerState.READY, WorkerState.DISPATCHED, cause={"phase": "doctor"})
        text = probe_text(run.run_id, task, name, probe.callback_prefix(run))
        try:
            probe.once(run.run_id, task, "agent_prompt", f"{task}:probe", {"target": name, "text": text},
                       lambda: herdr.agent_prompt(name, text), model=AgentPrompted)  # fmt: skip
        except HerdrError as exc:
            raise _Failed(f"{kind}: the probe prompt was not accepted: {one_line(exc.message)}", HINT_CALLBACK) from None
        _update(state, prompt_accepted=True)
        _await_callback(probe, run, kind, task, name, pane_id, timeout_s, state)
    finally:
        cleanup += _close(probe, run, kind, task, name, pane_id, workspace_id)
        git.remove_scratch_worktree(checkout, path)
        cleanup.append("scratch worktree removed" if not path.exists() else f"scratch worktree {path} kept")
        _update(state, cleanup=tuple(cleanup))


def _update(state: dict[str, KindCheck], **changes: object) -> None:
    state["check"] = state["check"].model_copy(update=changes)


def _start(probe: Engine, plan: ResolvedPlan, run: Run, kind: str, task: str, name: str, pane_id: str, args: tuple[str, ...] = ()) -> ProbeStarted:
    herdr = probe.herdr
    timeout_ms = plan.plan.defaults.agent_start_timeout_s * 1000
    executable = facts(kind).executable

    def act() -> ProbeStarted:
        try:
            started = herdr.agent_start(name, kind=kind, pane=pane_id, timeout_ms=timeout_ms, args=args)
        except HerdrAgentNotReady as exc:
            # herdr 0.8.2 keeps an agent blocked at start-up by name and answers agent_not_ready (DELTA #6).
            if "blocked" not in (exc.herdr_message or exc.message):
                raise
            return ProbeStarted(name=name, pane_id=pane_id, agent_status="blocked")
        return ProbeStarted(name=name, pane_id=pane_id, agent_status=started.agent.agent_status)

    try:
        return probe.once(run.run_id, task, "agent_start", f"{task}:agent_start", {"name": name, "kind": kind, "pane": pane_id, "timeout_ms": timeout_ms, **({"args": list(args)} if args else {})}, act, model=ProbeStarted)
    except HerdrError as exc:
        # A shell that could not find the agent says so in the pane (bash, zsh and fish word it alike).
        try:
            screen = herdr.pane_read(pane_id, source="recent")
        except HerdrError:
            screen = ""
        if re.search(rf"{re.escape(executable)}: (command )?not found|command not found: {re.escape(executable)}|Unknown command: {re.escape(executable)}", screen):
            raise _Failed(f"{kind}: not installed: the pane shows `{executable}: command not found`", HINT_INSTALL) from None
        raise _Failed(f"{kind}: the agent did not start: {one_line(exc.message)}", exc.hint or "") from None


def _answer_dialog(probe: Engine, plan: ResolvedPlan, worker: Worker, pane_id: str, state: dict[str, KindCheck]) -> str | None:
    """The trust dialog at start, answered by orchestrator/dialogs.py exactly as provisioning would (policy decides)."""
    policy = plan.policy
    source = policy.sources.get("trust_run_worktrees", "default")
    if policy.policy.trust_run_worktrees:
        allowed, why = True, f"policy trust_run_worktrees, from {source}: a scratch worktree orch doctor created"
    else:
        allowed, why = False, f"policy trust_run_worktrees is off, from {source}"
    try:
        note = answer_trust_dialog(probe, worker, pane_id, allowed=allowed, why_not=why, wait_timeout_ms=plan.plan.defaults.wait_timeout_s * 1000)
    except DialogStop as stop:
        _record_dialog(probe, worker, state)
        raise _Failed(f"{worker.kind}: stopped at a dialog orch cannot answer: {stop.message}", HINT_DIALOG) from None
    _record_dialog(probe, worker, state)
    return note


def _record_dialog(probe: Engine, worker: Worker, state: dict[str, KindCheck]) -> None:
    seen = read_facts(probe.ledger.events(worker.run_id, task_label=worker.task_label), Dialog)
    if seen:
        last = seen[-1]
        _update(state, dialog=last.get("dialog") or "unknown dialog", dialog_answered=bool(last.get("answered")), dialog_keys=tuple(last.get("keys") or ()))


def _await_callback(probe: Engine, run: Run, kind: str, task: str, name: str, pane_id: str, timeout_s: float, state: dict[str, KindCheck]) -> None:
    """Poll the probe ledger until an accepted callback from the probe; a form mid-turn or the deadline fails it."""
    clock, ledger = probe.clock, probe.ledger
    deadline = clock.monotonic() + timeout_s
    while True:
        messages = ledger.list_inbox(run.run_id, task_label=task)
        accepted = [m for m in messages if m.verdict is InboxVerdict.ACCEPTED]
        if accepted:
            _update(state, callback=f"{accepted[0].kind} #{accepted[0].id} accepted")
            return
        try:
            status = probe.herdr.agent_get(name).agent_status
        except HerdrError:
            status = "unknown"
        if status == "blocked":
            screen = probe.herdr.pane_read(pane_id, source="visible")
            form = quirks(kind).approval_on(screen)
            what = f"its {form.name}" if form is not None else "a dialog orch does not know"
            raise _Failed(f"{kind}: stopped at a dialog orch cannot answer: the probe waits at {what} and orch never approves on its own. Screen: {flat(excerpt(screen))}", HINT_FORM)
        if clock.monotonic() >= deadline:
            # Anything the run's ledger read from every kept-aside message: the first reason says what broke.
            aside = [m for m in ledger.list_inbox(run.run_id) if m.verdict is InboxVerdict.KEPT_ASIDE]
            why = f" ({len(aside)} kept aside, first: {aside[0].reason_code}: {one_line(aside[0].reason or '')})" if aside else ""
            raise _Failed(f"{kind}: no valid callback within {timeout_s:g}s; the callback path does not work{why}", HINT_CALLBACK)
        clock.sleep(POLL_S)


def _close(probe: Engine, run: Run, kind: str, task: str, name: str, pane_id: str | None, workspace_id: str | None) -> list[str]:
    """Exit the probe agent (its exit command, only at rest), then close the workspace the probe opened."""
    herdr, notes = probe.herdr, []
    if pane_id is not None:
        try:
            status: str | None = herdr.agent_get(name).agent_status
        except HerdrError:
            status = None
        if status == "working":
            # The callback runs inside the probe's turn: the agent reports idle just after it.
            with contextlib.suppress(HerdrError):
                status = herdr.agent_wait(name, until=AT_REST, timeout_ms=int(EXIT_WAIT_S * 1000)).agent_status
        command = facts(kind).exit_command
        if status in AT_REST and command is not None:
            try:
                probe.once(run.run_id, task, "pane_send_text", f"{task}:exit_text", {"pane": pane_id, "text": command},
                           lambda: _sent(pane_id, lambda: herdr.pane_send_text(pane_id, command)), model=Sent)  # fmt: skip
                probe.once(run.run_id, task, "pane_send_keys", f"{task}:exit_enter", {"pane": pane_id, "keys": ["Enter"]},
                           lambda: _sent(pane_id, lambda: herdr.pane_send_keys(pane_id, "Enter")), model=Sent)  # fmt: skip
                notes.append("agent exited" if _gone(probe, name) else f"agent did not exit within {EXIT_WAIT_S:g}s of {command}")
            except HerdrError as exc:
                notes.append(f"{command} could not be sent: {one_line(exc.message)}")
        elif status is not None:
            notes.append(f"agent was {status}: closed with its workspace")
    if workspace_id is not None:
        try:
            probe.once(run.run_id, task, "workspace_close", f"{task}:workspace_close", {"workspace": workspace_id},
                       lambda: _closed(workspace_id, lambda: herdr.workspace_close(workspace_id)), model=Closed)  # fmt: skip
            notes.append("workspace closed")
        except HerdrNotFound:
            notes.append("workspace gone")
        except HerdrError as exc:
            notes.append(f"workspace {workspace_id} kept: {one_line(exc.message)}")
    return notes


def _sent(pane_id: str, send: Callable[[], None]) -> Sent:
    send()
    return Sent(pane_id=pane_id)


def _closed(workspace_id: str, close: Callable[[], None]) -> Closed:
    close()
    return Closed(workspace_id=workspace_id)


def _gone(probe: Engine, name: str) -> bool:
    deadline = probe.clock.monotonic() + EXIT_WAIT_S
    while probe.clock.monotonic() < deadline:
        try:
            probe.herdr.agent_get(name)
        except HerdrNotFound:
            return True
        except HerdrError:
            pass
        probe.clock.sleep(POLL_S)
    return False


def render_doctor(result: DoctorResult) -> str:
    """Per kind: the verdict and time, then one line per fact; a last line says whether the fleet may start."""
    where = ", offline on the scripted model (no tokens spent)" if result.offline else ""
    lines = [f"orch doctor {result.plan}: {len(result.kinds)} agent kind{'s' if len(result.kinds) != 1 else ''}{where}"]
    for c in result.kinds:
        lines.append(f"{c.kind}: {'PASS' if c.ok else 'FAIL'} in {c.seconds:.1f}s")
        lines.append(f"  installed: {'yes' if c.installed else 'no'} (`{c.executable}`)")
        lines.append(f"  integration: {c.integration}")
        if c.dialog is None:
            dialog = "none" if c.prompt_accepted else "not reached"
        elif c.dialog_answered:
            dialog = f"{c.dialog}, answered with {' '.join(c.dialog_keys)}"
        else:
            dialog = f"{c.dialog}, not answered"
        lines.append(f"  trust dialog: {dialog}")
        lines.append(f"  prompt: {'accepted' if c.prompt_accepted else 'not sent'}")
        lines.append(f"  callback: {c.callback or 'none'}")
        if c.model_requests is not None:
            asked = f"{c.model_requests} request{'s' if c.model_requests != 1 else ''}"
            lines.append(f"  scripted model: {asked}" + ("" if c.model_requests else " (the agent never asked it: check that it reads the offline configuration)"))
        if c.cleanup:
            lines.append(f"  cleanup: {', '.join(c.cleanup)}")
        if c.failure:
            lines.append(f"  failure: {c.failure}")
    if result.ok:
        lines.append(f"doctor: every agent kind passed ({', '.join(c.kind for c in result.kinds)}); the fleet can start")
    else:
        bad = [c.kind for c in result.kinds if not c.ok]
        total = len(result.kinds)
        lines.append(f"doctor: {len(bad)} of {total} agent kind{'s' if total != 1 else ''} failed ({', '.join(bad)}); fix {'it' if len(bad) == 1 else 'them'} before the fleet")
    return "\n".join(lines) + "\n"


# The scripted model lives in the simulator package: loaded only when --offline asks for it, so `orch --help` and
# the live doctor never import herdr_sim (tests/orchestrator/test_cli_imports.py).
def _offline_model(scratch: Path) -> OfflineModel:
    from orchestrator.offline import OfflineModel

    return OfflineModel(scratch)


def _offline_kinds() -> tuple[str, ...]:
    from orchestrator.offline import OFFLINE_KINDS

    return tuple(OFFLINE_KINDS)

