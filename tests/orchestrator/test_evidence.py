"""Verification re-derives a worker's claim from git and re-runs its checks in a scratch checkout."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from orchestrator import git
from orchestrator.checks import run_command
from orchestrator.evidence import ClaimedCheck, ResultClaim, Subject, verify


def _summary(result: Any) -> dict[str, Any]:
    data = result.model_dump()
    data["head_sha"] = data["head_sha"] and data["head_sha"][:7]
    data["commits"] = [c[:7] for c in data["commits"]]
    data["checks"] = [(c["command"], c["exit_code"], c["error"]) for c in data["checks"]]
    return data


@pytest.fixture
def worker_branch(git_repo: Any, tmp_path: Path) -> tuple[Any, str, Path]:
    """A worktree on feat/api-docs forked from main, as provisioning leaves it."""
    base = git_repo.head()
    worktree = tmp_path / "widgets.worktrees" / "widgets-feat-api-docs"
    git_repo.git("worktree", "add", "--quiet", "-b", "feat/api-docs", str(worktree), "main")
    return git_repo, base, worktree


def _subject(repo: Any, base: str, verification: tuple[str, ...] = ("test -f docs/api.md",)) -> Subject:
    return Subject(repo=repo.path, branch="feat/api-docs", base_sha=base, claim=("docs/",), verification=verification)


def test_work_inside_claim_with_passing_checks_is_accepted(worker_branch: Any) -> None:
    repo, base, worktree = worker_branch
    sha = repo.commit("docs: api", {"docs/api.md": "# API\n"}, cwd=worktree)
    claim = ResultClaim(commits=(sha[:9],), changed_files=("docs/api.md",), checks=(ClaimedCheck(command="test -f docs/api.md", exit_code=0),))

    assert _summary(verify(_subject(repo, base), claim)) == {
        "disposition": "accepted",
        "reasons": (),
        "head_sha": sha[:7],
        "commits": [sha[:7]],
        "changed_files": ("docs/api.md",),
        "outside_claim": (),
        "checks": [("test -f docs/api.md", 0, None)],
    }


def test_checks_run_in_a_scratch_checkout_not_in_the_worker_tree(worker_branch: Any) -> None:
    repo, base, worktree = worker_branch
    repo.commit("docs: api", {"docs/api.md": "# API\n"}, cwd=worktree)
    repo.write("docs/uncommitted.md", "draft\n", cwd=worktree)
    subject = _subject(repo, base, verification=("test ! -e docs/uncommitted.md",))

    result = verify(subject, ResultClaim())

    assert result.disposition == "accepted"
    assert git.status_porcelain(worktree) == ["?? docs/uncommitted.md"]
    assert repo.git("worktree", "list", "--porcelain").count("worktree ") == 2


def test_zero_commit_done_is_rejected_when_the_task_had_to_change_files(worker_branch: Any) -> None:
    repo, base, _ = worker_branch

    result = verify(_subject(repo, base, verification=()), ResultClaim())

    assert result.disposition == "rejected"
    assert result.reasons == (f"no commits on feat/api-docs since base {base[:12]}, but the task had to change files",)


def test_claimed_checks_that_fail_on_rerun_are_rejected(worker_branch: Any) -> None:
    repo, base, worktree = worker_branch
    repo.commit("docs: api", {"docs/api.md": "# API\n"}, cwd=worktree)
    claim = ResultClaim(checks=(ClaimedCheck(command="grep -q Endpoints docs/api.md", exit_code=0),))

    result = verify(_subject(repo, base, verification=("grep -q Endpoints docs/api.md",)), claim)

    assert result.disposition == "rejected"
    assert result.reasons == (
        "check `grep -q Endpoints docs/api.md` failed on re-run (exit 1)",
        "worker reported `grep -q Endpoints docs/api.md` passing, but it does not pass on re-run",
    )


def test_a_check_that_cannot_run_fails_closed(worker_branch: Any) -> None:
    repo, base, worktree = worker_branch
    repo.commit("docs: api", {"docs/api.md": "# API\n"}, cwd=worktree)

    def runner(command: str, cwd: Path) -> Any:
        return run_command(command, cwd=cwd, timeout=0.01)

    result = verify(_subject(repo, base, verification=("sleep 5",)), ResultClaim(), runner=runner)

    assert result.disposition == "rejected"
    assert result.reasons == ("check `sleep 5` could not run: timed out after 0.01s",)


def test_edits_outside_the_claim_pause_integration(worker_branch: Any) -> None:
    repo, base, worktree = worker_branch
    repo.commit("docs: api", {"docs/api.md": "# API\n", "setup.cfg": "[x]\n"}, cwd=worktree)

    result = verify(_subject(repo, base), ResultClaim())

    assert (result.disposition, result.outside_claim, result.reasons) == (
        "blocked",
        ("setup.cfg",),
        ("edited outside its claim: setup.cfg (integration paused for a decision)",),
    )


def test_claims_that_git_does_not_support_are_rejected(worker_branch: Any) -> None:
    repo, base, worktree = worker_branch
    repo.commit("docs: api", {"docs/api.md": "# API\n"}, cwd=worktree)
    claim = ResultClaim(commits=("deadbeef",), changed_files=("docs/other.md",))

    result = verify(_subject(repo, base), claim)

    assert result.reasons == (
        f"claimed commit deadbeef is not on feat/api-docs since base {base[:12]}",
        "claimed changed file docs/other.md is not in the diff",
    )


def test_missing_branch_is_rejected(git_repo: Any) -> None:
    subject = Subject(repo=git_repo.path, branch="feat/nope", base_sha=git_repo.head(), claim=("x",), verification=())

    assert verify(subject, ResultClaim()).reasons == ("branch feat/nope does not exist",)


def test_a_timed_out_pipeline_is_killed_with_its_children(tmp_path: Path) -> None:
    run = run_command("echo started; sleep 30 | cat", cwd=tmp_path, timeout=0.5)

    assert (run.exit_code, run.output_tail, run.error) == (None, "started", "timed out after 0.5s")
