"""Verification re-derives a worker's claim from git and re-runs its checks in a scratch checkout."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from orchestrator import git
from orchestrator.checks import run_command
from orchestrator.evidence import PeerClaim, Subject, verify
from packets.result import ReportedCheck, ResultReport


def _summary(result: Any) -> dict[str, Any]:
    data = dataclasses.asdict(result)
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
    claim = ResultReport(commits=(sha[:9],), changed_files=("docs/api.md",), checks=(ReportedCheck(command="test -f docs/api.md", exit_code=0),))

    assert _summary(verify(_subject(repo, base), claim)) == {
        "disposition": "accepted",
        "reasons": (),
        "head_sha": sha[:7],
        "commits": [sha[:7]],
        "changed_files": ("docs/api.md",),
        "outside_claim": (),
        "missing_files": (),
        "checks": [("test -f docs/api.md", 0, None)],
    }


def test_checks_run_in_a_scratch_checkout_not_in_the_worker_tree(worker_branch: Any) -> None:
    repo, base, worktree = worker_branch
    repo.commit("docs: api", {"docs/api.md": "# API\n"}, cwd=worktree)
    repo.write("docs/uncommitted.md", "draft\n", cwd=worktree)
    subject = _subject(repo, base, verification=("test ! -e docs/uncommitted.md",))

    result = verify(subject, ResultReport())

    assert result.disposition == "accepted"
    assert git.status_porcelain(worktree) == ["?? docs/uncommitted.md"]
    assert repo.git("worktree", "list", "--porcelain").count("worktree ") == 2


def test_zero_commit_done_is_rejected_when_the_task_had_to_change_files(worker_branch: Any) -> None:
    repo, base, _ = worker_branch

    result = verify(_subject(repo, base, verification=()), ResultReport())

    assert result.disposition == "rejected"
    assert result.reasons == (f"no commits on feat/api-docs since base {base[:12]}, but the task had to change files",)


def test_claimed_checks_that_fail_on_rerun_are_rejected(worker_branch: Any) -> None:
    repo, base, worktree = worker_branch
    repo.commit("docs: api", {"docs/api.md": "# API\n"}, cwd=worktree)
    claim = ResultReport(checks=(ReportedCheck(command="grep -q Endpoints docs/api.md", exit_code=0),))

    result = verify(_subject(repo, base, verification=("grep -q Endpoints docs/api.md",)), claim)

    assert result.disposition == "rejected"
    assert result.reasons == (
        "check `grep -q Endpoints docs/api.md` failed on re-run (exit 1)",
        "worker reported `grep -q Endpoints docs/api.md` passing, but it does not pass on re-run",
    )


def test_a_check_that_cannot_run_blocks_as_unreproducible_evidence(worker_branch: Any) -> None:
    repo, base, worktree = worker_branch
    repo.commit("docs: api", {"docs/api.md": "# API\n"}, cwd=worktree)

    def runner(command: str, cwd: Path) -> Any:
        return run_command(command, cwd=cwd, timeout=0.01)

    result = verify(_subject(repo, base, verification=("sleep 5",)), ResultReport(), runner=runner)

    assert result.disposition == "blocked"
    assert result.reasons == ("check `sleep 5` could not run: timed out after 0.01s (evidence cannot be reproduced)",)


def test_edits_outside_the_claim_pause_integration(worker_branch: Any) -> None:
    repo, base, worktree = worker_branch
    repo.commit("docs: api", {"docs/api.md": "# API\n", "setup.cfg": "[x]\n"}, cwd=worktree)

    result = verify(_subject(repo, base), ResultReport())

    assert (result.disposition, result.outside_claim, result.reasons) == (
        "blocked",
        ("setup.cfg",),
        ("edited outside its claim: setup.cfg (integration paused for a decision)",),
    )


def test_claims_that_git_does_not_support_are_rejected(worker_branch: Any) -> None:
    repo, base, worktree = worker_branch
    repo.commit("docs: api", {"docs/api.md": "# API\n"}, cwd=worktree)
    claim = ResultReport(commits=("deadbeef",), changed_files=("docs/other.md", "README.md"))

    result = verify(_subject(repo, base), claim)

    assert (result.disposition, result.missing_files, result.reasons) == (
        "rejected",
        ("docs/other.md",),
        (
            f"claimed commit deadbeef is not on feat/api-docs since base {base[:12]}",
            f"cited file docs/other.md does not exist at {result.head_sha[:12]}",
            "claimed changed file README.md is not in the diff",
        ),
    )


def test_a_cited_report_that_cannot_be_opened_is_missing(worker_branch: Any, tmp_path: Path) -> None:
    repo, base, worktree = worker_branch
    repo.commit("docs: api", {"docs/api.md": "# API\n"}, cwd=worktree)
    report = tmp_path / "report.md"

    result = verify(_subject(repo, base, verification=()), ResultReport(reports=(str(report),)))

    assert (result.disposition, result.missing_files, result.reasons) == ("rejected", (str(report),), (f"cited report {report} cannot be opened",))


def test_a_status_other_than_done_is_rejected(worker_branch: Any) -> None:
    repo, base, worktree = worker_branch
    repo.commit("docs: api", {"docs/api.md": "# API\n"}, cwd=worktree)

    assert verify(_subject(repo, base, verification=()), ResultReport(status="partial")).reasons == ("worker reported status partial, not done",)


def test_commits_that_change_nothing_inside_the_claim_are_rejected(worker_branch: Any) -> None:
    repo, base, worktree = worker_branch
    repo.commit("empty", cwd=worktree)

    assert verify(_subject(repo, base, verification=()), ResultReport()).reasons == (
        f"nothing inside its claim changed on feat/api-docs since base {base[:12]}",
    )


def test_a_read_only_worker_that_changed_files_is_blocked(worker_branch: Any) -> None:
    repo, base, worktree = worker_branch
    repo.commit("oops", {"notes.txt": "x\n"}, cwd=worktree)
    subject = Subject(repo=repo.path, branch="feat/api-docs", base_sha=base, claim=(), verification=())

    result = verify(subject, ResultReport())

    assert (result.disposition, result.reasons) == ("blocked", ("read-only task changed files: notes.txt (integration paused for a decision)",))


def test_sibling_changes_on_a_shared_branch_are_the_siblings_and_peers_are_named(worker_branch: Any) -> None:
    repo, base, worktree = worker_branch
    repo.commit("both", {"docs/api.md": "# API\n", "tests/test_api.py": "", "src/core.py": "", "setup.cfg": ""}, cwd=worktree)
    peers = (
        PeerClaim(task="api-tests", branch="feat/api-docs", claim=("tests/",)),
        PeerClaim(task="core", branch="feat/core", claim=("src/",)),
    )
    subject = Subject(repo=repo.path, branch="feat/api-docs", base_sha=base, claim=("docs/",), verification=(), peers=peers)

    result = verify(subject, ResultReport())

    assert (result.disposition, result.outside_claim, result.reasons) == (
        "blocked",
        ("setup.cfg", "src/core.py"),
        ("edited outside its claim: setup.cfg, src/core.py (claimed by core) (integration paused for a decision)",),
    )


def test_blocked_reasons_come_before_rejections(worker_branch: Any) -> None:
    repo, base, worktree = worker_branch
    repo.commit("docs: api", {"docs/api.md": "# API\n", "setup.cfg": "[x]\n"}, cwd=worktree)

    result = verify(_subject(repo, base, verification=("false",)), ResultReport())

    assert (result.disposition, result.reasons) == (
        "blocked",
        ("edited outside its claim: setup.cfg (integration paused for a decision)", "check `false` failed on re-run (exit 1)"),
    )


def test_missing_branch_is_rejected(git_repo: Any) -> None:
    subject = Subject(repo=git_repo.path, branch="feat/nope", base_sha=git_repo.head(), claim=("x",), verification=())

    assert verify(subject, ResultReport()).reasons == ("branch feat/nope does not exist",)


def test_a_timed_out_pipeline_is_killed_with_its_children(tmp_path: Path) -> None:
    run = run_command("echo started; sleep 30 | cat", cwd=tmp_path, timeout=0.5)

    assert (run.exit_code, run.output_tail, run.error) == (None, "started", "timed out after 0.5s")


# --- attribution on a shared branch (sibling panes in one checkout) -------------------------------------------------


def _sibling(repo: Any, base: str, task: str, claim: str, peer: str, peer_claim: str) -> Subject:
    return Subject(
        repo=repo.path, branch="feat/api-docs", base_sha=base, claim=(claim,), verification=(), task=task,
        peers=(PeerClaim(task=peer, branch="feat/api-docs", claim=(peer_claim,)),),
    )  # fmt: skip


def test_siblings_are_judged_on_their_own_commits_and_one_editing_the_others_claim_is_out_of_claim(worker_branch: Any) -> None:
    repo, base, worktree = worker_branch
    docs = repo.commit("docs: api\n\nOrch-Task: api-docs", {"docs/api.md": "# API\n"}, cwd=worktree)
    tests = repo.commit("tests: api\n\nOrch-Task: api-tests", {"tests/test_api.py": "pass\n", "docs/api.md": "# API (by tests)\n"}, cwd=worktree)

    docs_result = verify(_sibling(repo, base, "api-docs", "docs/", "api-tests", "tests/"), ResultReport(commits=(docs,)))
    tests_result = verify(_sibling(repo, base, "api-tests", "tests/", "api-docs", "docs/"), ResultReport(commits=(tests,)))

    assert (docs_result.disposition, docs_result.reasons, docs_result.commits, docs_result.changed_files, docs_result.head_sha) == (
        "accepted", (), (docs,), ("docs/api.md",), docs,
    )
    assert (tests_result.disposition, tests_result.reasons, tests_result.commits, tests_result.outside_claim, tests_result.head_sha) == (
        "blocked", ("edited outside its claim: docs/api.md (claimed by api-docs) (integration paused for a decision)",),
        (tests,), ("docs/api.md",), tests,
    )


def test_a_commit_no_sibling_can_be_tied_to_fails_closed_for_every_worker_of_the_branch(worker_branch: Any) -> None:
    repo, base, worktree = worker_branch
    repo.commit("docs: api\n\nOrch-Task: api-docs", {"docs/api.md": "# API\n"}, cwd=worktree)
    stray = repo.commit("someone's change", {"tests/test_api.py": "pass\n"}, cwd=worktree)
    other = repo.commit("another\n\nOrch-Task: intruder", {"tests/test_more.py": "pass\n"}, cwd=worktree)

    result = verify(_sibling(repo, base, "api-docs", "docs/", "api-tests", "tests/"), ResultReport())

    assert (result.disposition, result.reasons) == ("blocked", (
        f"commit {stray[:12]} on feat/api-docs cannot be attributed to a worker of this branch (it has no Orch-Task trailer); attribution fails closed",
        f"commit {other[:12]} on feat/api-docs cannot be attributed to a worker of this branch (its Orch-Task trailer names intruder); attribution fails closed",
    ))


def test_a_branch_on_another_history_than_the_pinned_base_is_blocked(worker_branch: Any, tmp_path: Path) -> None:
    repo, base, worktree = worker_branch
    # The branch was rebuilt on a rewritten base (a force-pushed main): an orphan history that never held the pin.
    repo.git("checkout", "--quiet", "--orphan", "rewritten", cwd=worktree)
    sha = repo.commit("docs: api", {"docs/api.md": "# API\n"}, cwd=worktree)
    repo.git("branch", "--quiet", "-f", "feat/api-docs", "rewritten")
    repo.git("checkout", "--quiet", "feat/api-docs", cwd=worktree)
    subject = dataclasses.replace(_subject(repo, base, verification=()), pinned_sha=base)

    result = verify(subject, ResultReport())

    assert (result.disposition, result.reasons) == (
        "blocked",
        (f"feat/api-docs at {sha[:12]} does not descend from the run's pinned base {base[:12]}: integrating it would merge unrelated histories",),
    )
