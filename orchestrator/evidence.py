"""Evidence: re-derive a worker's claim from git and re-run its checks in a scratch checkout (pure, no ledger)."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from orchestrator import claims, git
from orchestrator.checks import CheckRun, run_command

Disposition = Literal["accepted", "rejected", "superseded", "blocked"]


class ClaimedCheck(BaseModel):
    """A check the worker says it ran, with the exit code it reported."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    command: str
    exit_code: int | None


class ResultClaim(BaseModel):
    """What a worker's `result` message asserts."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    commits: tuple[str, ...] = ()
    changed_files: tuple[str, ...] = ()
    checks: tuple[ClaimedCheck, ...] = ()


class Subject(BaseModel):
    """What the controller knows independently of the worker: where its work lives and what it was allowed to do."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    repo: Path
    branch: str
    base_sha: str
    claim: tuple[str, ...]
    verification: tuple[str, ...]

    @property
    def requires_changes(self) -> bool:
        """A worker with a non-empty file claim was asked to change files."""
        return bool(self.claim)


class Verification(BaseModel):
    """The controller's own evidence and the disposition it supports."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    disposition: Disposition
    reasons: tuple[str, ...] = Field(description="why the disposition is not 'accepted' (empty when accepted)")
    head_sha: str | None
    commits: tuple[str, ...]
    changed_files: tuple[str, ...]
    outside_claim: tuple[str, ...]
    checks: tuple[CheckRun, ...]


CheckRunner = Callable[[str, Path], CheckRun]


def _default_runner(command: str, cwd: Path) -> CheckRun:
    return run_command(command, cwd=cwd)


def rerun_checks(subject: Subject, head: str, runner: CheckRunner = _default_runner) -> tuple[CheckRun, ...]:
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


def verify(subject: Subject, claim: ResultClaim, runner: CheckRunner = _default_runner) -> Verification:
    """Compare the claim with git and with a re-run of the checks; every reason names its evidence."""
    reasons: list[str] = []
    head = git.rev_parse(subject.repo, f"refs/heads/{subject.branch}")
    if head is None:
        return Verification(
            disposition="rejected", reasons=(f"branch {subject.branch} does not exist",), head_sha=None,
            commits=(), changed_files=(), outside_claim=(), checks=(),
        )
    commits = git.commits_between(subject.repo, subject.base_sha, head)
    changed = git.changed_paths(subject.repo, subject.base_sha, head)
    outside = claims.outside(changed, subject.claim)

    if subject.requires_changes and not commits:
        reasons.append(f"no commits on {subject.branch} since base {subject.base_sha[:12]}, but the task had to change files")
    for sha in claim.commits:
        full = git.rev_parse(subject.repo, sha)
        if full is None or full not in commits:
            reasons.append(f"claimed commit {sha} is not on {subject.branch} since base {subject.base_sha[:12]}")
    for path in claim.changed_files:
        if path not in changed:
            reasons.append(f"claimed changed file {path} is not in the diff")

    checks = rerun_checks(subject, head, runner)
    for run in checks:
        if run.exit_code is None:
            reasons.append(f"check `{run.command}` could not run: {run.error}")
        elif run.exit_code != 0:
            reasons.append(f"check `{run.command}` failed on re-run (exit {run.exit_code})")
    rerun_by_command = {run.command: run for run in checks}
    for claimed in claim.checks:
        rerun = rerun_by_command.get(claimed.command)
        if claimed.exit_code == 0 and rerun is not None and not rerun.passed:
            reasons.append(f"worker reported `{claimed.command}` passing, but it does not pass on re-run")

    disposition: Disposition
    if reasons:
        disposition = "rejected"
    elif outside:
        disposition = "blocked"
        reasons.append("edited outside its claim: " + ", ".join(outside) + " (integration paused for a decision)")
    else:
        disposition = "accepted"
    return Verification(
        disposition=disposition, reasons=tuple(reasons), head_sha=head, commits=tuple(commits),
        changed_files=tuple(changed), outside_claim=tuple(outside), checks=checks,
    )
