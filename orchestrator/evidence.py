"""Evidence: re-derive a worker's claim from git and re-run its checks in a scratch checkout (pure, no ledger)."""

from __future__ import annotations

import dataclasses
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from orchestrator import claims, git
from orchestrator.checks import CheckRun, run_command
from packets.render import COMMIT_TRAILER_KEY
from packets.result import ResultReport

Disposition = Literal["accepted", "rejected", "superseded", "blocked"]


# Plain records (docs/ARCHITECTURE.md: pydantic only at the edges): a Subject is built by orchestrator.verify from the
# ledger's checked records, a Verification by `verify` below; a stored Verification is read back checked by
# `registry.records.build` (orchestrator.verify.stored_verification), and `orch verify --json` prints it through its
# result model.


@dataclasses.dataclass(frozen=True, kw_only=True)
class PeerClaim:
    """Another worker of the same run: its branch and file claim (to attribute changes and name whose surface was touched)."""

    task: str
    branch: str
    claim: tuple[str, ...]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Subject:
    """What the controller knows independently of the worker: where its work lives and what it was allowed to do."""

    repo: Path
    branch: str
    base_sha: str
    claim: tuple[str, ...]
    verification: tuple[str, ...]
    peers: tuple[PeerClaim, ...] = ()
    task: str | None = None  # the worker's task label: on a shared branch, its commits are those whose trailer names it
    pinned_sha: str | None = None  # the run's base as preflight pinned it: the worker's history must hold it
    head_ref: str | None = None  # a remote worker's head as fetched home by SHA (orchestrator.fetch); else its branch here
    reports_found: tuple[str, ...] | None = None  # a remote worker's cited reports its host could read; None: look here

    @property
    def requires_changes(self) -> bool:
        """A worker with a non-empty file claim was asked to change files."""
        return bool(self.claim)

    def sibling_claims(self) -> list[str]:
        """Claim patterns of the other workers on the same branch (their changes share this branch's diff)."""
        return [pattern for peer in self.peers if peer.branch == self.branch for pattern in peer.claim]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Verification:
    """The controller's own evidence and the disposition it supports."""

    disposition: Disposition
    reasons: tuple[str, ...]  # why the disposition is not 'accepted' (empty when accepted); blocking reasons first
    head_sha: str | None
    commits: tuple[str, ...]
    changed_files: tuple[str, ...]
    outside_claim: tuple[str, ...]
    missing_files: tuple[str, ...] = ()
    checks: tuple[CheckRun, ...]


CheckRunner = Callable[[str, Path], CheckRun]
# Where the checks are re-run, given the subject and the head commit: ``rerun_checks`` here, or on the worker's host.
Rerun = Callable[["Subject", str], tuple[CheckRun, ...]]


def run_check(command: str, cwd: Path) -> CheckRun:
    """The default runner: the plan's command line with the standard check timeout."""
    return run_command(command, cwd=cwd)


def _plain_file(path: str) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except (OSError, ValueError):
        return False


def rerun_checks(subject: Subject, head: str, runner: CheckRunner = run_check) -> tuple[CheckRun, ...]:
    """Run every verification command in a throwaway detached checkout of ``head``, never in the worker's tree."""
    if not subject.verification:
        return ()
    with tempfile.TemporaryDirectory(prefix="orch-verify-") as tmp:
        scratch = Path(tmp) / "checkout"
        git.add_scratch_worktree(subject.repo, scratch, head)
        try:
            return tuple(runner(command, scratch) for command in subject.verification)
        finally:
            git.remove_scratch_worktree(subject.repo, scratch)


def _owner(path: str, peers: tuple[PeerClaim, ...]) -> str:
    owners = [peer.task for peer in peers if claims.covered(path, peer.claim)]
    return f"{path} (claimed by {', '.join(owners)})" if owners else path


def attribute(repo: Path, commits: list[str], task: str, workers: set[str]) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """Split a shared branch's commits: this task's own (its trailer names it), and those no worker can be tied to
    (no trailer, several names, or a name that is no worker of the branch). Commits of the other workers are neither."""
    own: list[str] = []
    unattributed: list[tuple[str, list[str]]] = []
    for sha in commits:
        values = git.trailer_values(repo, sha, COMMIT_TRAILER_KEY)
        names = set(values)
        if len(names) != 1 or not names <= workers:
            unattributed.append((sha, values))
        elif names == {task}:
            own.append(sha)
    return own, unattributed


def verify(
    subject: Subject, claim: ResultReport, runner: CheckRunner = run_check, *, rerun: Rerun | None = None, where: str | None = None
) -> Verification:
    """Compare the claim with git and with a re-run of the checks; every reason names its evidence.

    ``rerun``: where the checks are re-run instead of a scratch checkout here (``where`` names it in the reasons: "on
    host box"). blocked (integration pauses, a person decides) beats rejected (sent back or dropped) beats accepted.
    """
    blocking: list[str] = []
    rejecting: list[str] = []
    head = git.rev_parse(subject.repo, subject.head_ref or f"refs/heads/{subject.branch}")
    if head is None:
        return Verification(
            disposition="rejected", reasons=(f"branch {subject.branch} does not exist",), head_sha=None,
            commits=(), changed_files=(), outside_claim=(), checks=(),
        )
    base = subject.base_sha[:12]
    pinned = subject.pinned_sha
    if pinned is not None and not git.is_ancestor(subject.repo, pinned, head):
        # A branch on another history (a force-pushed base, a branch reset elsewhere) would join unrelated histories.
        blocking.append(f"{subject.branch} at {head[:12]} does not descend from the run's pinned base {pinned[:12]}: integrating it would merge unrelated histories")
    commits = git.commits_between(subject.repo, subject.base_sha, head)
    changed = git.changed_paths(subject.repo, subject.base_sha, head)
    shared = [peer.task for peer in subject.peers if peer.branch == subject.branch]
    if shared and subject.task is not None:
        # Sibling panes share the branch: each commit is its worker's by its trailer, so this worker answers for
        # exactly the files its own commits changed, and its HEAD is its own newest commit.
        commits, unattributed = attribute(subject.repo, commits, subject.task, {subject.task, *shared})
        for sha, values in unattributed:
            what = f"its {COMMIT_TRAILER_KEY} trailer names {', '.join(values)}" if values else f"it has no {COMMIT_TRAILER_KEY} trailer"
            blocking.append(f"commit {sha[:12]} on {subject.branch} cannot be attributed to a worker of this branch ({what}); attribution fails closed")
        changed = sorted({path for sha in commits for path in git.commit_paths(subject.repo, sha)})
        head = commits[-1] if commits else head
        mine = changed
    else:
        # Without a task to attribute by, the older rule: a path inside a sibling's claim is that sibling's to answer for.
        siblings = subject.sibling_claims()
        mine = [path for path in changed if not claims.covered(path, siblings) or claims.covered(path, subject.claim)]
    outside = claims.outside(mine, subject.claim)

    if outside:
        touched = ", ".join(_owner(path, subject.peers) for path in outside)
        if subject.requires_changes:
            blocking.append(f"edited outside its claim: {touched} (integration paused for a decision)")
        else:
            blocking.append(f"read-only task changed files: {touched} (integration paused for a decision)")

    rejecting.extend(f"result: {problem}" for problem in claim.problems)
    if claim.status is not None and claim.status != "done":
        rejecting.append(f"worker reported status {claim.status}, not done")
    if subject.requires_changes and not commits:
        rejecting.append(f"no commits on {subject.branch} since base {base}, but the task had to change files")
    elif subject.requires_changes and not any(claims.covered(path, subject.claim) for path in changed):
        rejecting.append(f"nothing inside its claim changed on {subject.branch} since base {base}")
    for sha in claim.commits:
        full = git.rev_parse(subject.repo, sha)
        if full is None or full not in commits:
            rejecting.append(f"claimed commit {sha} is not on {subject.branch} since base {base}")

    missing: list[str] = []
    for path in claim.changed_files:
        if path in changed:
            continue  # changed and present, or deleted: either way git supports the claim
        if not git.path_exists_at(subject.repo, head, path):
            missing.append(path)
            rejecting.append(f"cited file {path} does not exist at {head[:12]}")
        else:
            rejecting.append(f"claimed changed file {path} is not in the diff")
    for report in claim.reports:
        # Only whether it is there, as a file of its own: a symlink is not followed (its target says nothing of the work).
        if not (report in subject.reports_found if subject.reports_found is not None else _plain_file(report)):
            missing.append(report)
            rejecting.append(f"cited report {report} cannot be opened")

    checks = rerun_checks(subject, head, runner) if rerun is None else rerun(subject, head)
    there = f" {where}" if where else ""
    for run in checks:
        if run.exit_code is None:
            # Fail closed, and louder than a failing check: the controller cannot reproduce the evidence at all.
            blocking.append(f"check `{run.command}` could not run{there}: {run.error} (evidence cannot be reproduced)")
        elif run.exit_code != 0:
            rejecting.append(f"check `{run.command}` failed on re-run{there} (exit {run.exit_code})")
    rerun_by_command = {run.command: run for run in checks}
    for claimed in claim.checks:
        again = rerun_by_command.get(claimed.command)
        if claimed.exit_code == 0 and again is not None and not again.passed:
            rejecting.append(f"worker reported `{claimed.command}` passing, but it does not pass on re-run{there}")

    disposition: Disposition = "blocked" if blocking else "rejected" if rejecting else "accepted"
    return Verification(
        disposition=disposition, reasons=(*blocking, *rejecting), head_sha=head, commits=tuple(commits),
        changed_files=tuple(changed), outside_claim=tuple(outside), missing_files=tuple(missing), checks=checks,
    )
