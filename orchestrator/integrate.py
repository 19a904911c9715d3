"""The integrate phase: parallel work, serial integration of accepted workers into a dedicated branch (or a report)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from orchestrator import claims, git
from orchestrator.engine import CannotTell, Done, Engine, NotDone, Settlement
from orchestrator.hints import TEXT, orch_command
from orchestrator.errors import ExitCode, OrchError, one_line
from packets.render import COMMIT_TRAILER_KEY
from orchestrator.verify import blocked_by_verification, stored_verification
from registry.facts import FactKind, Held, IntegratedCause, Integration, IntegrationConflict
from registry import Effect, EffectStatus, Run, Worker, WorkerState

S = WorkerState

Outcome = Literal["accepted", "merged", "already integrated", "conflict", "held", "unrelated", "not merged"]
# The journal fact every enabled integrate call leaves (orchestrator.report FactKind.INTEGRATION reads it for Blockers).


class MergeConflict(OrchError):
    """A merge stopped on conflicts; it was aborted, so the integration worktree is as it was before."""

    def __init__(self, task: str, paths: list[str]) -> None:
        super().__init__(f"merging {task} conflicts in {', '.join(paths) or 'the index'}")
        self.paths = tuple(paths)


@dataclass(frozen=True, kw_only=True)
class MergeDone:
    """A merge that landed: the worker's verified head and the integration branch commit that holds it."""

    head_sha: str
    integrated_sha: str


@dataclass(frozen=True, kw_only=True)
class WorktreeReady:
    """The integration worktree exists at ``path`` on ``branch``."""

    path: str
    branch: str


class IntegrationItem(BaseModel):
    """One accepted worker and what integration did with it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    task: str
    branch: str | None
    head_sha: str | None
    outcome: Outcome
    integrated_sha: str | None = None
    conflicts: tuple[str, ...] = ()
    held_by: tuple[str, ...] = ()
    overlap: tuple[str, ...] = ()


class IntegrateFailure(BaseModel):
    """Why `orch integrate` exits 1 (held-back work or a conflict) and what to do next."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    reason: str
    # None inside a finished run's `orch finish` (orchestrator.door): nothing is left to do in that run.
    hint: str | None
    exit_code: int = int(ExitCode.FAILURE)


class Pending(BaseModel):
    """A worker that is not (or not yet) accepted, so integration leaves it alone."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    task: str
    state: WorkerState
    disposition: WorkerState | None


class IntegrateResult(BaseModel):
    """What `orch integrate` did: report-only, paused, or merged in plan order up to the first conflict."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str
    enabled: bool
    integration_branch: str | None
    worktree: str | None
    items: tuple[IntegrationItem, ...]
    not_accepted: tuple[Pending, ...]
    paused_by: tuple[str, ...]
    stopped_at: str | None
    failure: IntegrateFailure | None = None

    @property
    def complete(self) -> bool:
        """Nothing accepted is held back or stopped (report-only mode is complete by definition: it merges nothing)."""
        return self.failure is None


def integration_worktree(engine: Engine, run: Run) -> Path:
    """Where the integration branch is checked out: the run's own folder, never the user's checkout."""
    return engine.run_dir(run.run_id) / "integration"


def worktree_removals(engine: Engine, run: Run) -> int:
    """How often retire removed the integration worktree (confirmed ``worktree_remove`` effects of the run naming it).

    Each removal ends one generation of the worktree: integrating again after one opens it under a key of its own.
    """
    real = str(integration_worktree(engine, run).resolve())
    effects = [e for e in engine.ledger.list_effects(run.run_id) if e.kind == "worktree_remove" and e.task_label is None and e.request.get("path") == real]
    for effect in effects:
        if effect.status is EffectStatus.INTENDED:
            engine.settle_effect(run, effect)  # a removal a stopped process left: read back before counting
    return sum(1 for e in engine.ledger.list_effects(run.run_id) if e.kind == "worktree_remove" and e.task_label is None
               and e.request.get("path") == real and e.status is EffectStatus.CONFIRMED)  # fmt: skip


def _pending(workers: list[Worker]) -> tuple[Pending, ...]:
    return tuple(
        Pending(task=w.task_label, state=w.state, disposition=w.final_disposition) for w in workers if w.final_disposition is not S.ACCEPTED
    )


def _ensure_worktree(engine: Engine, run: Run, repo: str, branch: str, base: str) -> Path:
    path = integration_worktree(engine, run)
    real = str(path.resolve())

    def found() -> WorktreeReady | None:
        checkouts = git.worktree_paths(repo)
        return WorktreeReady(path=real, branch=branch) if checkouts.get(real) == branch else None

    checkouts = git.worktree_paths(repo)
    elsewhere = [p for p, b in checkouts.items() if b == branch and p != real]
    if elsewhere:
        # The person's own checkout (or any other) may hold the branch: orch never merges into someone's working tree.
        raise OrchError(
            f"integration branch {branch} is checked out at {elsewhere[0]}; orch merges only in its own worktree {path}",
            hint="switch that checkout to another branch, or set a different [integration] branch in the plan",
        )
    if real in checkouts and checkouts[real] != branch:
        raise OrchError(f"{path} is a worktree on {checkouts[real] or 'a detached HEAD'}, not on {branch}")

    def create() -> WorktreeReady:
        path.parent.mkdir(parents=True, exist_ok=True)
        start = None if git.branch_exists(repo, branch) else base
        git.add_branch_worktree(repo, path, branch, start)
        return WorktreeReady(path=real, branch=branch)

    if git.branch_exists(repo, branch) and not git.is_ancestor(repo, base, f"refs/heads/{branch}"):
        # A branch of the same name from elsewhere: merging the run's work into it would join another history.
        raise OrchError(
            f"integration branch {branch} exists and does not hold the run's pinned base {base[:12]}; orch merges only into a branch that starts from it",
            hint="rename or delete that branch, or set a different [integration] branch in the plan, then resume",
        )
    if found() is None:
        engine.echo(f"integrate: worktree {path} on {branch}")
    # Retire removes the worktree once the run's workers are all retired; opened again after that, it is a new effect.
    removed = worktree_removals(engine, run)
    key = f"integration:worktree:{branch}" + (f":reopened:{removed}" if removed else "")
    engine.once(
        run.run_id, None, "integration_worktree", key, {"path": real, "branch": branch, "base": base},
        lambda: found() or create(), model=WorktreeReady,
    )  # fmt: skip
    if found() is None:
        raise OrchError(f"integration worktree {path} is not on {branch} (it was recorded as created earlier)", hint="inspect `git worktree list`")
    if git.merge_in_progress(path) or git.status_porcelain(path):
        raise OrchError(f"integration worktree {path} has uncommitted changes or a merge in progress; orch merges only into a clean checkout")
    return path


def settle_integration_worktree(engine: Engine, run: Run, effect: Effect) -> Settlement[WorktreeReady]:
    """Done if the path is a checkout of the integration branch; else not done."""
    req = effect.request
    repo = run.repo_path or str(engine.plan_for(run).repo.checkout)
    if git.worktree_paths(repo).get(req["path"]) == req["branch"]:
        return Done(WorktreeReady(path=req["path"], branch=req["branch"]), f"{req['path']} is a checkout of {req['branch']}")
    return NotDone(f"{req['path']} is no checkout of {req['branch']}")


def settle_git_merge(engine: Engine, run: Run, effect: Effect) -> Settlement[MergeDone]:
    """Done if the verified head is an ancestor of the integration branch; not done if not and no merge is in progress."""
    req = effect.request
    worktree = integration_worktree(engine, run)
    head, into = req["head_sha"], req["into"]
    # Ancestry is the repository's (any checkout of it answers): the integration worktree may be removed by now.
    repo = run.repo_path or str(engine.plan_for(run).repo.checkout)
    if git.is_ancestor(repo, head, f"refs/heads/{into}"):
        tip = git.rev_parse(repo, f"refs/heads/{into}")
        return Done(MergeDone(head_sha=head, integrated_sha=tip or head), f"{head[:12]} is an ancestor of {into}")
    if worktree.exists() and git.merge_in_progress(worktree):
        return CannotTell(
            f"a merge is in progress in {worktree}: finish it or abort it?",
            f"`git -C {worktree} merge --abort` (or commit it), then `orch resume {run.run_id}`",
        )
    return NotDone(f"{head[:12]} is not in {into}")


def _merge(engine: Engine, run: Run, worker: Worker, head: str, worktree: Path, into: str) -> MergeDone:
    task = worker.task_label

    def landed() -> MergeDone | None:
        if git.is_ancestor(worktree, head, f"refs/heads/{into}"):
            tip = git.rev_parse(worktree, f"refs/heads/{into}")
            return MergeDone(head_sha=head, integrated_sha=tip or head)
        return None

    def act() -> MergeDone:
        message = f"Merge {worker.branch} ({task}) at {head[:12]} into {into}\n\norch run {run.run_id}, verified head {head}"
        merged = git.merge_no_ff(worktree, head, message)
        if merged.returncode != 0:
            conflicts = git.unmerged_paths(worktree) if git.merge_in_progress(worktree) else []
            if git.merge_in_progress(worktree):
                git.merge_abort(worktree)
            if conflicts:
                raise MergeConflict(task, conflicts)
            detail = merged.stderr.strip() or merged.stdout.strip() or f"exit {merged.returncode}"
            raise git.GitError(f"{git.command_text(merged.argv)} failed: {one_line(detail)}", merged)
        tip = git.rev_parse(worktree, "HEAD")
        assert tip is not None  # a merge that succeeded leaves HEAD on a commit
        return MergeDone(head_sha=head, integrated_sha=tip)

    return engine.once(
        run.run_id, task, "git_merge", f"{task}:merge:{head}", {"head_sha": head, "branch": worker.branch, "into": into},
        act, model=MergeDone,
    )  # fmt: skip


def held_back(workers: list[Worker]) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    """Accepted task -> (the verification-blocked tasks holding it back, the files they share).

    The decision (docs/ARCHITECTURE.md, Integration): a verification block holds back only accepted work that
    touches what the blocked worker touched (a file both changed, or a file of its out-of-claim edit that the
    accepted worker's claim covers). Independent work merges: holding it back would gain nothing, since the person's
    decision about the blocked worker cannot change it. A blocked worker whose changes are unknown (its evidence
    could not be reproduced) holds back everything: independence cannot be shown.
    """
    blocked = [w for w in workers if blocked_by_verification(w)]
    held: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}
    for worker in workers:
        if worker.final_disposition is not S.ACCEPTED:
            continue
        mine = set(found.changed_files) if (found := stored_verification(worker)) else set()
        by: list[str] = []
        files: set[str] = set()
        for other in blocked:
            theirs = stored_verification(other)
            if theirs is None or not theirs.changed_files or not mine:
                by.append(other.task_label)
                continue
            shared = (mine & set(theirs.changed_files)) | {f for f in theirs.outside_claim if claims.covered(f, worker.claimed_files)}
            if shared:
                by.append(other.task_label)
                files |= shared
        if by:
            held[worker.task_label] = (tuple(by), tuple(sorted(files)))
    return held


def carried_work(repo: str, base: str, head: str, worker: Worker, workers: list[Worker]) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """(the workers, the files) when an accepted head carries commits whose Orch-Task trailer names another worker of
    the run whose work is not accepted (a sibling shares its owner's branch, so the owner's head can hold a rejected,
    blocked or unfinished sibling's commits); None when it carries only its own and accepted work."""
    others = {w.task_label for w in workers if w.task_label != worker.task_label and w.final_disposition is not S.ACCEPTED}
    if not others:
        return None
    by: set[str] = set()
    files: set[str] = set()
    for sha in git.commits_between(repo, base, head):
        if names := set(git.trailer_values(repo, sha, COMMIT_TRAILER_KEY)) & others:
            by |= names
            files |= set(git.commit_paths(repo, sha))
    return (tuple(sorted(by)), tuple(sorted(files))) if by else None


def held_why(by: Sequence[str], files: Sequence[str], paused: Iterable[str]) -> str:
    """Why accepted work was held back, in the words `orch integrate`'s failure and the report's blocker share: it
    shares files with a worker blocked by verification (held_back), or its branch carries commits of a worker whose
    work is not accepted (carried_work: a sibling shares its owner's branch, not necessarily a file)."""
    who = ", ".join(by)
    if by and set(by) <= set(paused):
        return f"shares {', '.join(files)} with {who}, blocked by verification" if files else f"held back by {who}, blocked by verification (its changes are unknown)"
    return f"its branch carries commits of {who}, whose work was not accepted ({', '.join(files) or 'see its commits'})"


def _failure(run: Run, into: str, items: list[IntegrationItem], stopped: str | None, paused: tuple[str, ...] = ()) -> IntegrateFailure | None:
    held = [i for i in items if i.outcome == "held"]
    unrelated = [i.task for i in items if i.outcome == "unrelated"]
    if unrelated:
        first = unrelated[0]
        return IntegrateFailure(
            reason=f"{', '.join(unrelated)} not merged into {into}: {'its head does' if len(unrelated) == 1 else 'their heads do'} not descend from the run's pinned base {(run.base_sha or '')[:12]} (merging would join unrelated histories)",
            hint=f"send the work back: `{orch_command('send', '--run', run.run_id, first, '--kind', 'follow-up', text=True)}` (rebuild it on {(run.base_sha or '')[:12]}), then `orch verify --run {run.run_id} --task {first}`",
        )
    if stopped is not None:
        conflict = next(i for i in items if i.task == stopped)
        return IntegrateFailure(
            reason=f"merging {stopped} into {into} conflicts in {', '.join(conflict.conflicts) or 'the index'}: merge aborted, integration stopped there",
            hint=f"send the work back: `{orch_command('send', '--run', run.run_id, stopped, '--kind', 'follow-up', text=True)}` (rebase onto {into}), then `orch verify --run {run.run_id} --task {stopped}`",
        )
    if held:
        by = sorted({b for i in held for b in i.held_by})
        first = by[0]
        return IntegrateFailure(
            reason="; ".join(f"{i.task} not merged into {into}: {held_why(i.held_by, i.overlap, paused)}" for i in held),
            hint=f"ask the person, then `{orch_command('send', '--run', run.run_id, first, '--kind', 'follow-up', text=True)}` or `{orch_command('verify', '--run', run.run_id, '--supersede', first, '--reason', TEXT)}`, and integrate again",
        )
    return None


def integrate_run(engine: Engine, run: Run) -> IntegrateResult:
    """Report accepted work (default) or, with the plan's opt-in, merge it one worker at a time in plan order."""
    settings = engine.plan_for(run).plan.integration
    workers = engine.workers(run)
    accepted = [w for w in workers if w.final_disposition is S.ACCEPTED]
    paused = tuple(w.task_label for w in workers if blocked_by_verification(w))
    base: dict[str, Any] = dict(run_id=run.run_id, enabled=settings.enabled, integration_branch=settings.branch, not_accepted=_pending(workers), paused_by=paused)
    if not settings.enabled:
        items = tuple(
            IntegrationItem(task=w.task_label, branch=w.branch, head_sha=w.head_sha, outcome="accepted", integrated_sha=w.integrated_sha)
            for w in accepted
        )
        return IntegrateResult(**base, worktree=None, items=items, stopped_at=None)
    into = settings.branch
    assert into is not None  # the plan model requires a branch when enabled
    held = held_back(workers)
    results: list[IntegrationItem] = []
    stopped: str | None = None
    worktree: Path | None = None
    for worker in accepted:
        head = worker.head_sha
        item = IntegrationItem(task=worker.task_label, branch=worker.branch, head_sha=head, outcome="not merged")
        if worker.task_label in held:
            # Spec §6 pauses integration for an out-of-claim edit: here, of what that edit touches (held_back).
            by, files = held[worker.task_label]
            results.append(item.model_copy(update={"outcome": "held", "held_by": by, "overlap": files, "integrated_sha": worker.integrated_sha}))
            continue
        if stopped is not None or head is None:
            results.append(item)
            continue
        if not run.repo_path or not run.base_sha:
            raise OrchError(f"run {run.run_id} has no repository path or base SHA recorded; cannot create {into}")
        if (carried := carried_work(run.repo_path, run.base_sha, head, worker, workers)) is not None:
            # Siblings share a branch: merging this head would merge the not-accepted sibling's commits with it.
            by, files = carried
            results.append(item.model_copy(update={"outcome": "held", "held_by": by, "overlap": files, "integrated_sha": worker.integrated_sha}))
            continue
        if worker.integrated_sha and git.is_ancestor(run.repo_path, head, f"refs/heads/{into}"):
            # Asked of the repository, not the worktree: integrating again after retire removed it opens nothing.
            results.append(item.model_copy(update={"outcome": "already integrated", "integrated_sha": worker.integrated_sha}))
            continue
        if worktree is None:
            worktree = _ensure_worktree(engine, run, run.repo_path, into, run.base_sha)
        if run.base_sha and not git.is_ancestor(worktree, run.base_sha, head):
            # Verification blocks such a head first; this guard holds whatever the ledger says: never unrelated histories.
            results.append(item.model_copy(update={"outcome": "unrelated"}))
            continue
        engine.echo(f"integrate: merging {worker.task_label} ({head[:12]}) into {into}")
        try:
            done = _merge(engine, run, worker, head, worktree, into)
        except MergeConflict as conflict:
            engine.ledger.record_fact(
                run.run_id, FactKind.INTEGRATION_CONFLICT, task_label=worker.task_label,
                detail=IntegrationConflict(head_sha=head, into=into, paths=list(conflict.paths), aborted=True),
            )  # fmt: skip
            results.append(item.model_copy(update={"outcome": "conflict", "conflicts": conflict.paths}))
            stopped = worker.task_label
            continue
        # The proof, not the merge's exit code, is what lets the ledger say "integrated".
        if not git.is_ancestor(worktree, head, f"refs/heads/{into}"):
            raise OrchError(f"{worker.task_label}: {head[:12]} is not an ancestor of {into} after its merge was recorded", hint="inspect the integration worktree; nothing was recorded as integrated")
        engine.ledger.update_worker(
            run.run_id, worker.task_label, fact=FactKind.INTEGRATED, integrated_sha=done.integrated_sha,
            cause=IntegratedCause(phase="integrate", head_sha=head, into=into, proof="merge-base --is-ancestor"),
        )  # fmt: skip
        results.append(item.model_copy(update={"outcome": "merged", "integrated_sha": done.integrated_sha}))
    conflicts = next((list(i.conflicts) for i in results if i.outcome == "conflict"), [])
    unrelated = [i.task for i in results if i.outcome == "unrelated"]
    holds = [Held(task=i.task, by=list(i.held_by), files=list(i.overlap)) for i in results if i.outcome == "held"]
    detail = Integration(paused_by=list(paused), held=holds, stopped_at=stopped, conflicts=conflicts)
    if unrelated:
        detail["unrelated"] = unrelated
    engine.ledger.record_fact(run.run_id, FactKind.INTEGRATION, detail=detail)
    return IntegrateResult(**base, worktree=str(worktree) if worktree else None, items=tuple(results), stopped_at=stopped, failure=_failure(run, into, results, stopped, paused))


# --- rendering -----------------------------------------------------------------------------------------------------


def _item_line(item: IntegrationItem, width: int, result: IntegrateResult) -> str:
    where = f"{item.branch} @ {item.head_sha[:12]}" if item.branch and item.head_sha else item.branch or "no branch"
    if item.outcome == "accepted":
        return f"  {item.task:<{width}}  {item.branch}  {item.head_sha}"
    if item.outcome in ("merged", "already integrated"):
        return f"  {item.task:<{width}}  {where}  {item.outcome} as {(item.integrated_sha or '')[:12]}"
    if item.outcome == "conflict":
        return f"  {item.task:<{width}}  {where}  conflict in {', '.join(item.conflicts)}: merge aborted, integration stopped here"
    if item.outcome == "unrelated":
        return f"  {item.task:<{width}}  {where}  not merged: does not descend from the run's pinned base (unrelated histories)"
    if item.outcome == "held":
        return f"  {item.task:<{width}}  {where}  not merged: {held_why(item.held_by, item.overlap, result.paused_by)}"
    why = f"stopped at {result.stopped_at}" if result.stopped_at else "no verified head SHA"
    return f"  {item.task:<{width}}  {where}  not merged ({why})"


def render_integrate(result: IntegrateResult) -> str:
    """The human report: accepted branches and SHAs, or each merge in order, the conflict that stopped it, the pause."""
    width = max((len(i.task) for i in result.items), default=0)
    if not result.enabled:
        head = f"integrate {result.run_id}: integration is off in the plan; nothing merged"
        lines = [head + (", accepted work:" if result.items else ", nothing accepted yet")]
    elif result.items and all(i.outcome == "held" for i in result.items):
        lines = [f"integrate {result.run_id}: {'paused, ' if result.paused_by else ''}nothing merged into {result.integration_branch}"]
    else:
        lines = [f"integrate {result.run_id} into {result.integration_branch} (worktree {result.worktree or 'not created'}):"]
        if not result.items:
            lines[0] = f"integrate {result.run_id}: nothing accepted to merge into {result.integration_branch}"
    lines.extend(_item_line(item, width, result) for item in result.items)
    if result.not_accepted:
        lines.append("not accepted: " + ", ".join(f"{p.task} ({p.disposition or p.state})" for p in result.not_accepted))
    if result.paused_by:
        held = [i.task for i in result.items if i.outcome == "held"]
        pause = f"holds back {', '.join(held)}" if held else "holds back no accepted work (none touches the same files)"
        lines.append("blocked by verification: " + ", ".join(result.paused_by) + f"; {pause}")
    return "\n".join(lines) + "\n"
