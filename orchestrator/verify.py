"""The verify phase: turn each worker's recorded `result` into an evidence-backed disposition in the ledger."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from orchestrator import evidence, git
from orchestrator.checks import CheckRun
from orchestrator.engine import Engine
from orchestrator.errors import OrchError
from orchestrator.evidence import CheckRunner, PeerClaim, Subject, Verification
from packets import EnvelopeError, inert_line, parse_message
from packets.result import ResultReport, parse_result
from registry import Run, StaleState, Worker, WorkerState, records
from registry.kinds import CONTROLLER_HOST
from registry.machine import LIVE_STATES, SUPERSEDABLE, UNVERIFIED

S = WorkerState

# A worker waits for verification in `result`; `verifying` is one a crashed verify left behind (the evidence is
# read-only git and scratch checkouts, so verifying it again is safe).
PENDING = UNVERIFIED


class WorkerVerdict(BaseModel):
    """One worker's disposition and the controller's evidence for it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    task: str
    branch: str | None
    base_sha: str | None
    decided_by: Literal["evidence", "person"]
    verification: Verification
    # Where its checks were re-run (the plan's `verify_on`): shown in the text, journalled, not in --json.
    checks_on: str = Field(default=CONTROLLER_HOST, exclude=True)


class NotVerified(BaseModel):
    """A worker this verify left alone, and the state it is in."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    task: str
    state: WorkerState


class VerifyResult(BaseModel):
    """What `orch verify` did: every verdict it recorded and the workers it did not look at."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str
    verdicts: tuple[WorkerVerdict, ...]
    not_verified: tuple[NotVerified, ...]
    integration_paused_by: tuple[str, ...]


def blocked_by_verification(worker: Worker) -> bool:
    """Blocked because verification said so (not a worker asking for authority): integration pauses."""
    return worker.state is S.BLOCKED and worker.final_disposition is S.BLOCKED


def read_result(engine: Engine, worker: Worker) -> ResultReport:
    """The claim in the worker's accepted `result` message (or a claim whose problems say why there is none)."""
    if worker.last_callback_id is None:
        return ResultReport(problems=("no result message is recorded for this worker",))
    raw = engine.ledger.get_inbound(worker.last_callback_id).raw
    try:
        message = parse_message(raw)
    except EnvelopeError as exc:
        return ResultReport(problems=(f"inbox message #{worker.last_callback_id} is not an envelope: {exc}",))
    if message.kind != "result":
        return ResultReport(problems=(f"inbox message #{worker.last_callback_id} is a {message.kind}, not a result",))
    body = message.body
    # The contract allows the body to be just the path of a Markdown report holding the result.
    lines = body.strip().splitlines()
    if len(lines) == 1 and lines[0].startswith("/") and lines[0].endswith(".md"):
        # Read as every report is: inside the worker's pinned roots, no symlink followed, bounded (reportfiles).
        from orchestrator.fetch import open_report_of  # a remote worker's report is read on its host

        opened = open_report_of(engine, worker, lines[0])
        if opened.text is None:
            return ResultReport(reports=(lines[0],), problems=(f"the result is a report path that cannot be opened: {lines[0]} ({opened.reason})",))
        body = opened.text
    return parse_result(body)


def _subject(engine: Engine, run: Run, worker: Worker, peers: Iterable[Worker]) -> Subject | str:
    """Where the worker's work is and what it was allowed to do, or why that cannot be known."""
    plan = engine.plan_for(run)
    planned = engine.planned(plan, worker.task_label)
    base = worker.base_sha or run.base_sha
    repo = run.repo_path or str(plan.repo.checkout)
    if not worker.branch or not base:
        return "no branch or base SHA is recorded for this worker (evidence cannot be reproduced)"
    head_ref = None
    if worker.host != CONTROLLER_HOST:
        # Its commits are on another host: read its head back there and fetch that SHA home; everything after is
        # worked out here, from those objects (orchestrator.fetch).
        from orchestrator import fetch, remote

        host = plan.plan.hosts.get(worker.host)
        if host is None:
            return f"host {worker.host} is not in the run's plan (its commits cannot be brought home)"
        fetched = fetch.head_at_home(repo, run.run_id, worker.task_label, worker.branch, worker.host, host,
                                     runner=engine.remote_runner or remote.run_process)  # fmt: skip
        if fetched.ref is None:
            return f"{fetched.problem} (evidence cannot be reproduced)"
        head_ref = fetched.ref
    return Subject(
        repo=Path(repo), branch=worker.branch, base_sha=base, claim=worker.claimed_files,
        verification=planned.worker.verify, task=worker.task_label, pinned_sha=run.base_sha, head_ref=head_ref,
        peers=tuple(
            PeerClaim(task=peer.task_label, branch=peer.branch or "", claim=peer.claimed_files)
            for peer in peers if peer.task_label != worker.task_label
        ),
    )  # fmt: skip


def checks_host(engine: Engine, run: Run, worker: Worker) -> str:
    """Where the worker's checks are re-run (the plan's ``verify_on`` resolved): the controller, or its own host."""
    if worker.host == CONTROLLER_HOST:
        return CONTROLLER_HOST
    try:
        return engine.planned(engine.plan_for(run), worker.task_label).checks_on
    except OrchError:
        return CONTROLLER_HOST  # _subject already said what is wrong with the plan; nothing runs anywhere then


def _rerun_on(engine: Engine, run: Run, host: str) -> evidence.Rerun | None:
    """The checks re-run on ``host`` (over ssh, in a scratch checkout orch makes there), or None: on the controller."""
    if host == CONTROLLER_HOST:
        return None
    from orchestrator import fetch, remote

    config = engine.host_config(run.run_id, host)
    runner = engine.remote_runner or remote.run_process
    return lambda subject, head: fetch.rerun_on_host(host, config, head, subject.verification, runner=runner)


def _unverifiable(reason: str) -> Verification:
    return Verification(
        disposition="blocked", reasons=(reason,), head_sha=None, commits=(), changed_files=(), outside_claim=(), checks=(),
    )


def _cause(verdict: WorkerVerdict, **extra: Any) -> dict[str, Any]:
    found = verdict.verification
    return {
        "phase": "verify", "decided_by": verdict.decided_by, "disposition": found.disposition,
        "reasons": list(found.reasons), "head_sha": found.head_sha,
        "checks": [{"command": run.command, "exit_code": run.exit_code, "error": run.error} for run in found.checks],
        **({"checks_on": verdict.checks_on} if verdict.checks_on != CONTROLLER_HOST else {}),
        **extra,
    }  # fmt: skip


def _select(engine: Engine, run: Run, tasks: Iterable[str] | None) -> tuple[list[Worker], list[Worker]]:
    workers = engine.workers(run)
    if not tasks:
        return [w for w in workers if w.state in PENDING], [w for w in workers if w.state not in PENDING]
    by_task = {w.task_label: w for w in workers}
    wanted = list(dict.fromkeys(tasks))
    for task in wanted:
        worker = by_task.get(task)
        if worker is None:
            raise OrchError(f"run {run.run_id} has no task {task}")
        # A worker blocked by an earlier verification may be verified again once the person decided.
        if worker.state not in PENDING and not blocked_by_verification(worker):
            raise OrchError(f"task {task} is {worker.state}; only a worker with a result (or blocked by verification) can be verified")
    return [by_task[t] for t in wanted], [w for w in workers if w.task_label not in wanted]


def verify_run(engine: Engine, run: Run, tasks: Iterable[str] | None = None, *, runner: CheckRunner | None = None) -> VerifyResult:
    """Verify every worker with a result (or the named tasks): read-only git, checks re-run in scratch checkouts."""
    chosen, others = _select(engine, run, tasks)
    everyone = engine.workers(run)
    ledger = engine.ledger
    verdicts: list[WorkerVerdict] = []
    for worker in chosen:
        if worker.state is not S.VERIFYING:
            try:
                worker = ledger.transition(run.run_id, worker.task_label, worker.state, S.VERIFYING, cause={"phase": "verify", "step": "start"})
            except StaleState:
                # Another controller process moved it first; its verdict stands, ours would be a second opinion.
                others.append(ledger.get_worker(run.run_id, worker.task_label))
                continue
        engine.echo(f"verify: {worker.task_label}")
        subject = _subject(engine, run, worker, everyone)
        on = CONTROLLER_HOST
        if isinstance(subject, str):
            found = _unverifiable(subject)
        else:
            claim = read_result(engine, worker)
            if worker.host != CONTROLLER_HOST:
                # Its reports are files on its host: read there (the same reader), never looked for here.
                from orchestrator.fetch import open_report_of

                subject = records.replace(subject, reports_found=tuple(r for r in claim.reports if open_report_of(engine, worker, r).text is not None))
            on = checks_host(engine, run, worker)
            found = evidence.verify(subject, claim, runner or evidence.run_check, rerun=_rerun_on(engine, run, on), where=None if on == CONTROLLER_HOST else f"on host {on}")
        verdict = WorkerVerdict(
            task=worker.task_label, branch=worker.branch, base_sha=worker.base_sha or run.base_sha, decided_by="evidence", verification=found,
            checks_on=on,
        )
        ledger.transition(
            run.run_id, worker.task_label, S.VERIFYING, S(found.disposition), cause=_cause(verdict),
            controller_verification=stored_json(found), head_sha=found.head_sha,
        )  # fmt: skip
        verdicts.append(verdict)
    return _result(engine, run, verdicts, others)


def supersede(engine: Engine, run: Run, task: str, reason: str) -> VerifyResult:
    """Record the person's decision that ``task`` was replaced; its branch is kept and never integrated."""
    reason = reason.strip()
    if not reason:
        raise OrchError("--supersede needs a --reason saying what replaced the work")
    worker = next((w for w in engine.workers(run) if w.task_label == task), None)
    if worker is None:
        raise OrchError(f"run {run.run_id} has no task {task}")
    if worker.state not in SUPERSEDABLE:
        raise OrchError(f"task {task} is {worker.state}; it can no longer be superseded")
    head = None
    if worker.branch and run.repo_path:
        # A remote worker's head is the one last fetched home by SHA (none when it never was: nothing is fetched for a
        # decision, its host may be gone); its branch name here would be another branch or none.
        from orchestrator.fetch import home_ref

        ref = f"refs/heads/{worker.branch}" if worker.host == CONTROLLER_HOST else home_ref(run.run_id, task)
        head = git.rev_parse(run.repo_path, ref)
    found = Verification(
        disposition="superseded", reasons=(f"superseded by the person: {reason}",), head_sha=head,
        commits=(), changed_files=(), outside_claim=(), checks=(),
    )  # fmt: skip
    verdict = WorkerVerdict(task=task, branch=worker.branch, base_sha=worker.base_sha or run.base_sha, decided_by="person", verification=found)
    engine.ledger.transition(
        run.run_id, task, worker.state, S.SUPERSEDED, cause=_cause(verdict), controller_verification=stored_json(found),
        head_sha=head,
    )  # fmt: skip
    others = [w for w in engine.workers(run) if w.task_label != task]
    return _result(engine, run, [verdict], others)


def _result(engine: Engine, run: Run, verdicts: list[WorkerVerdict], others: list[Worker]) -> VerifyResult:
    latest = engine.workers(run)
    return VerifyResult(
        run_id=run.run_id,
        verdicts=tuple(verdicts),
        # Workers still without a result of their own: one already decided (accepted, rejected, blocked by an earlier
        # verify, superseded) or retired was verified, just not by this call.
        not_verified=tuple(
            NotVerified(task=w.task_label, state=w.state)
            for w in latest
            if w.task_label in {o.task_label for o in others} and w.final_disposition is None and w.state in LIVE_STATES
        ),
        integration_paused_by=tuple(w.task_label for w in latest if blocked_by_verification(w)),
    )


def stored_json(found: Verification) -> str:
    """The evidence as the worker's ``controller_verification`` column holds it: compact JSON of every field."""
    return json.dumps(records.plain(found), ensure_ascii=False, separators=(",", ":"))


def stored_verification(worker: Worker) -> Verification | None:
    """The evidence verify stored for a worker (None before any verification), read back checked."""
    if not worker.controller_verification:
        return None
    return records.build(Verification, json.loads(worker.controller_verification))


# --- rendering -----------------------------------------------------------------------------------------------------


def _check_line(run: CheckRun, on: str) -> str:
    status = f"exit {run.exit_code}" if run.exit_code is not None else f"not run ({run.error})"
    there = "" if on == CONTROLLER_HOST else f" on {on}"
    return f"    check  {status}{there}: {inert_line(run.command)}"


def render_verify(result: VerifyResult) -> str:
    """The human report: each worker's disposition, every reason, every re-run check with its exit code."""
    lines = [f"verify {result.run_id}: {len(result.verdicts)} worker{'s' if len(result.verdicts) != 1 else ''} verified"]
    width = max((len(v.task) for v in result.verdicts), default=0)
    for verdict in result.verdicts:
        found = verdict.verification
        where = f"{verdict.branch} @ {found.head_sha[:12]}" if verdict.branch and found.head_sha else verdict.branch or "no branch"
        by = " (by the person)" if verdict.decided_by == "person" else ""
        lines.append(f"  {verdict.task:<{width}}  {found.disposition}{by}  {where}")
        lines.extend(f"    reason {inert_line(reason)}" for reason in found.reasons)
        lines.extend(_check_line(run, verdict.checks_on) for run in found.checks)
    if result.not_verified:
        lines.append("not verified: " + ", ".join(f"{w.task} ({w.state})" for w in result.not_verified))
    if result.integration_paused_by:
        lines.append("integration paused: blocked by verification: " + ", ".join(result.integration_paused_by))
    return "\n".join(lines) + "\n"
