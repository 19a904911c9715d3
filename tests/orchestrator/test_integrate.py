"""The integrate phase: report-only by default; with the plan's opt-in, serial --no-ff merges proved by ancestry."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import json

import pytest
from click.testing import CliRunner

from orchestrator.cli import cli

from orchestrator.errors import OrchError
from orchestrator.integrate import integrate_run, integration_worktree, render_integrate
from orchestrator.verify import verify_run
from registry import EffectStatus
from verify_fleet import RUN_ID, Fleet, body


OPT_IN = '[integration]\nenabled = true\nbranch = "chore/integrate-widgets"\n'
INTO = "chore/integrate-widgets"


def _accept_docs_and_greeting(fleet: Any) -> tuple[str, str]:
    docs = fleet.commit("api-docs", {"docs/api.md": "# API\n"})
    fleet.result("api-docs", body([docs], ["docs/api.md"], [("test -f docs/api.md", 0)]))
    greeting = fleet.commit("greeting", {"src/greet.py": "print('hello')\n"})
    fleet.result("greeting", body([greeting], ["src/greet.py"], [("grep -q hello src/greet.py", 0)]))
    assert [v.verification.disposition for v in verify_run(fleet.engine, fleet.run).verdicts] == ["accepted", "accepted"]
    return docs, greeting


def _first_parents(fleet: Any) -> list[str]:
    return fleet.repo.git("log", "--first-parent", "--format=%s", INTO).splitlines()


def test_by_default_accepted_work_is_only_reported(tmp_path: Path, git_repo: Any) -> None:
    fleet = Fleet(tmp_path, git_repo)
    docs, greeting = _accept_docs_and_greeting(fleet)

    result = integrate_run(fleet.engine, fleet.run)

    assert render_integrate(result) == (
        f"integrate {RUN_ID}: integration is off in the plan; nothing merged, accepted work:\n"
        f"  api-docs  docs/api  {docs}\n"
        f"  greeting  feat/greeting  {greeting}\n"
        "not accepted: survey (working)\n"
    )
    assert fleet.repo.git("branch", "--list", "chore/integrate-*") == ""
    assert fleet.engine.ledger.get_worker(RUN_ID, "api-docs").integrated_sha is None


def test_opt_in_merges_accepted_workers_serially_in_plan_order_and_proves_ancestry(tmp_path: Path, git_repo: Any) -> None:
    fleet = Fleet(tmp_path, git_repo, integration=OPT_IN)
    docs, greeting = _accept_docs_and_greeting(fleet)
    user_head = git_repo.head()

    result = integrate_run(fleet.engine, fleet.run)

    worktree = integration_worktree(fleet.engine, fleet.run).resolve()
    merges = fleet.repo.git("rev-list", "--first-parent", INTO).splitlines()
    assert render_integrate(result) == (
        f"integrate {RUN_ID} into {INTO} (worktree {worktree}):\n"
        f"  api-docs  docs/api @ {docs[:12]}  merged as {merges[1][:12]}\n"
        f"  greeting  feat/greeting @ {greeting[:12]}  merged as {merges[0][:12]}\n"
        "not accepted: survey (working)\n"
    )
    assert _first_parents(fleet) == [
        f"Merge feat/greeting (greeting) at {greeting[:12]} into {INTO}",
        f"Merge docs/api (api-docs) at {docs[:12]} into {INTO}",
        "initial",
    ]
    ledger = fleet.engine.ledger
    assert [ledger.get_worker(RUN_ID, t).integrated_sha for t in ("api-docs", "greeting")] == [merges[1], merges[0]]
    facts = [e for e in ledger.events(RUN_ID) if e.kind == "integrated"]
    assert [(e.task_label, e.detail["cause"]["proof"]) for e in facts] == [("api-docs", "merge-base --is-ancestor"), ("greeting", "merge-base --is-ancestor")]
    # The person's checkout and branch are untouched.
    assert (git_repo.head(), git_repo.git("rev-parse", "--abbrev-ref", "HEAD"), git_repo.git("status", "--porcelain")) == (user_head, "main", "")

    again = integrate_run(fleet.engine, fleet.run)
    assert [i.outcome for i in again.items] == ["already integrated", "already integrated"]
    assert fleet.repo.git("rev-list", "--first-parent", INTO).splitlines() == merges


def test_a_conflict_aborts_that_merge_and_stops_integration_with_the_ledger_telling_the_truth(tmp_path: Path, git_repo: Any) -> None:
    fleet = Fleet(tmp_path, git_repo, integration=OPT_IN)
    # Someone already put a different greeting on the integration branch.
    git_repo.git("branch", INTO, fleet.base)
    side = tmp_path / "side"
    git_repo.git("worktree", "add", "--quiet", str(side), INTO)
    git_repo.commit("other greeting", {"src/greet.py": "print('hey')\n"}, cwd=side)
    git_repo.git("worktree", "remove", str(side))
    docs, greeting = _accept_docs_and_greeting(fleet)
    fleet.result("survey", body([], [], []))
    verify_run(fleet.engine, fleet.run)

    result = integrate_run(fleet.engine, fleet.run)

    worktree = integration_worktree(fleet.engine, fleet.run).resolve()
    docs_merge = fleet.repo.git("rev-parse", INTO)
    assert render_integrate(result) == (
        f"integrate {RUN_ID} into {INTO} (worktree {worktree}):\n"
        f"  api-docs  docs/api @ {docs[:12]}  merged as {docs_merge[:12]}\n"
        f"  greeting  feat/greeting @ {greeting[:12]}  conflict in src/greet.py: merge aborted, integration stopped here\n"
        f"  survey    chore/survey @ {fleet.base[:12]}  not merged (stopped at greeting)\n"
    )
    assert (result.stopped_at, result.complete) == ("greeting", False)
    ledger = fleet.engine.ledger
    assert [ledger.get_worker(RUN_ID, t).integrated_sha for t in ("api-docs", "greeting", "survey")] == [docs_merge, None, None]
    conflict = [e for e in ledger.events(RUN_ID) if e.kind == "integration_conflict"]
    assert [(e.task_label, e.detail) for e in conflict] == [("greeting", {"head_sha": greeting, "into": INTO, "paths": ["src/greet.py"], "aborted": True})]
    assert [(e.key, e.status) for e in ledger.list_effects(RUN_ID) if e.kind == "git_merge"] == [
        (f"api-docs:merge:{docs}", EffectStatus.CONFIRMED),
        (f"greeting:merge:{greeting}", EffectStatus.FAILED),
    ]
    assert fleet.repo.git("status", "--porcelain", cwd=worktree) == ""


def test_a_verification_block_holds_back_only_accepted_work_that_touches_the_same_files(tmp_path: Path, git_repo: Any) -> None:
    fleet = Fleet(tmp_path, git_repo, integration=OPT_IN)
    docs = fleet.commit("api-docs", {"docs/api.md": "# API\n"})
    fleet.result("api-docs", body([docs], ["docs/api.md"], [("test -f docs/api.md", 0)]))
    # greeting edits setup.cfg, outside its claim: blocked. api-docs shares nothing with it, so it merges.
    greeting = fleet.commit("greeting", {"src/greet.py": "print('hello')\n", "setup.cfg": "[x]\n"})
    fleet.result("greeting", body([greeting], ["setup.cfg", "src/greet.py"], []))
    verify_run(fleet.engine, fleet.run)

    result = integrate_run(fleet.engine, fleet.run)

    worktree = integration_worktree(fleet.engine, fleet.run).resolve()
    merged = fleet.repo.git("rev-parse", INTO)
    assert render_integrate(result) == (
        f"integrate {RUN_ID} into {INTO} (worktree {worktree}):\n"
        f"  api-docs  docs/api @ {docs[:12]}  merged as {merged[:12]}\n"
        "not accepted: greeting (blocked), survey (working)\n"
        "blocked by verification: greeting; holds back no accepted work (none touches the same files)\n"
    )
    assert (result.paused_by, result.failure) == (("greeting",), None)


def test_accepted_work_sharing_a_file_with_a_blocked_worker_is_held_back_and_explained(tmp_path: Path, git_repo: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    fleet = Fleet(tmp_path, git_repo, integration=OPT_IN)
    # greeting also edits docs/api.md, which is api-docs' claim: what the person decides about greeting may change it.
    docs = fleet.commit("api-docs", {"docs/api.md": "# API\n"})
    fleet.result("api-docs", body([docs], ["docs/api.md"], [("test -f docs/api.md", 0)]))
    greeting = fleet.commit("greeting", {"src/greet.py": "print('hello')\n", "docs/api.md": "# Greeting API\n"})
    fleet.result("greeting", body([greeting], ["docs/api.md", "src/greet.py"], []))
    verify_run(fleet.engine, fleet.run)

    result = integrate_run(fleet.engine, fleet.run)

    assert render_integrate(result) == (
        f"integrate {RUN_ID}: paused, nothing merged into {INTO}\n"
        f"  api-docs  docs/api @ {docs[:12]}  not merged: shares docs/api.md with greeting, blocked by verification\n"
        "not accepted: greeting (blocked), survey (working)\n"
        "blocked by verification: greeting; holds back api-docs\n"
    )
    assert result.failure is not None and (result.failure.reason, result.failure.hint) == (
        f"api-docs not merged into {INTO}: shares docs/api.md with greeting, blocked by verification",
        f"ask the person, then `orch send --run {RUN_ID} greeting --kind follow-up -- TEXT` or "
        f"`orch verify --run {RUN_ID} --supersede greeting --reason TEXT`, and integrate again",
    )
    assert fleet.repo.git("branch", "--list", INTO) == ""
    assert not integration_worktree(fleet.engine, fleet.run).exists()
    fact = [e for e in fleet.engine.ledger.events(RUN_ID) if e.kind == "integration"][-1]
    assert fact.detail == {"paused_by": ["greeting"], "held": [{"task": "api-docs", "by": ["greeting"], "files": ["docs/api.md"]}], "stopped_at": None, "conflicts": []}
    # The exit 1 explains itself: `orch:` and `hint:` on stderr, the same as the JSON's failure object.
    for name, value in fleet.engine.env.items():
        monkeypatch.setenv(name, value)
    shown = CliRunner().invoke(cli, ["integrate", "--run", RUN_ID, "--json"])
    assert (shown.exit_code, shown.stderr) == (1, f"orch: {result.failure.reason}\nhint: {result.failure.hint}\n")
    assert json.loads(shown.stdout)["failure"] == {"reason": result.failure.reason, "hint": result.failure.hint, "exit_code": 1}


def test_the_integration_branch_checked_out_by_the_person_is_refused(tmp_path: Path, git_repo: Any) -> None:
    fleet = Fleet(tmp_path, git_repo, integration=OPT_IN)
    _accept_docs_and_greeting(fleet)
    git_repo.git("switch", "--quiet", "-c", INTO)

    with pytest.raises(OrchError) as refused:
        integrate_run(fleet.engine, fleet.run)

    assert refused.value.message == (
        f"integration branch {INTO} is checked out at {git_repo.path.resolve()}; "
        f"orch merges only in its own worktree {integration_worktree(fleet.engine, fleet.run)}"
    )
    assert git_repo.git("rev-list", "--count", INTO) == "1"


def test_accepted_work_that_does_not_descend_from_the_pinned_base_is_never_merged(tmp_path: Path, git_repo: Any) -> None:
    fleet = Fleet(tmp_path, git_repo, integration=OPT_IN)
    docs, greeting = _accept_docs_and_greeting(fleet)
    # The run's pin names another history (as a base force-pushed before the workers were built on the new one would).
    side = tmp_path / "side"
    git_repo.git("worktree", "add", "--quiet", "--detach", str(side))
    git_repo.git("checkout", "--quiet", "--orphan", "rewritten", cwd=side)
    pinned = git_repo.commit("rewritten", {"README.md": "# rewritten\n"}, cwd=side)
    git_repo.git("worktree", "remove", "--force", str(side))
    run = fleet.engine.ledger.update_run(RUN_ID, base_sha=pinned)

    result = integrate_run(fleet.engine, run)

    worktree = integration_worktree(fleet.engine, run).resolve()
    assert render_integrate(result) == (
        f"integrate {RUN_ID} into {INTO} (worktree {worktree}):\n"
        f"  api-docs  docs/api @ {docs[:12]}  not merged: does not descend from the run's pinned base (unrelated histories)\n"
        f"  greeting  feat/greeting @ {greeting[:12]}  not merged: does not descend from the run's pinned base (unrelated histories)\n"
        "not accepted: survey (working)\n"
    )
    assert result.failure is not None and result.failure.reason == (
        f"api-docs, greeting not merged into {INTO}: their heads do not descend from the run's pinned base {pinned[:12]} (merging would join unrelated histories)"
    )
    assert fleet.repo.git("rev-list", INTO).splitlines() == [pinned]
    assert [fleet.engine.ledger.get_worker(RUN_ID, t).integrated_sha for t in ("api-docs", "greeting")] == [None, None]


def test_retire_removes_the_integration_worktree_once_every_worker_is_retired_and_the_branch_keeps_the_merges(tmp_path: Path, git_repo: Any) -> None:
    """It used to stay registered in the person's checkout after finish, named nowhere: the branch could not be checked out."""
    from orchestrator.report import build_report, render_report
    from orchestrator.retire import render_retire, retire

    fleet = Fleet(tmp_path, git_repo, integration=OPT_IN)
    _accept_docs_and_greeting(fleet)
    integrate_run(fleet.engine, fleet.run)
    worktree = str(integration_worktree(fleet.engine, fleet.run).resolve())
    tip = fleet.repo.git("rev-parse", INTO)

    # survey still works: integration may merge more, so the worktree stays, named with why.
    first = retire(fleet.engine, fleet.run)
    kept = (f"the integration worktree of {INTO}: integration may merge more while workers wait or work; "
            "orch removes it once every worker is retired")  # fmt: skip
    assert render_retire(first).splitlines()[-1] == f"Integration worktree {worktree}: kept ({kept})"
    assert render_report(build_report(fleet.engine.ledger, RUN_ID)).splitlines()[5] == f"Retired: run worktree {worktree} open ({kept})"

    second = retire(fleet.engine, fleet.run, abandon={"survey": "not needed"})

    assert render_retire(second).splitlines()[-1] == f"Integration worktree {worktree}: removed ({INTO} keeps its merges)"
    assert worktree not in fleet.repo.git("worktree", "list")
    assert fleet.repo.git("rev-parse", INTO) == tip
    fleet.repo.git("checkout", "-q", INTO)  # the person can check the branch out now
    assert render_report(build_report(fleet.engine.ledger, RUN_ID)).splitlines()[5] == f"Retired: run worktree {worktree} removed ({INTO} keeps its merges)"
    # Integrating again finds everything merged and opens nothing.
    assert [i.outcome for i in integrate_run(fleet.engine, fleet.run).items] == ["already integrated", "already integrated"]
    assert not Path(worktree).exists()


def test_a_dirty_integration_worktree_is_kept_and_named_with_how_to_remove_it(tmp_path: Path, git_repo: Any) -> None:
    from orchestrator.report import build_report, render_report
    from orchestrator.retire import render_retire, retire

    fleet = Fleet(tmp_path, git_repo, integration=OPT_IN)
    _accept_docs_and_greeting(fleet)
    integrate_run(fleet.engine, fleet.run)
    worktree = integration_worktree(fleet.engine, fleet.run).resolve()
    (worktree / "scratch.txt").write_text("the person's notes\n")

    result = retire(fleet.engine, fleet.run, abandon={"survey": "not needed"})

    reason = f"1 untracked file; remove it with `git -C {git_repo.path} worktree remove {worktree}` once you have looked"
    assert render_retire(result).splitlines()[-1] == f"Integration worktree {worktree}: kept ({reason})"
    assert (worktree / "scratch.txt").exists()
    assert render_report(build_report(fleet.engine.ledger, RUN_ID)).splitlines()[5] == f"Retired: run worktree {worktree} retained ({reason})"


def test_an_accepted_head_carrying_a_not_accepted_workers_commit_is_held_not_merged(tmp_path: Path, git_repo: Any) -> None:
    # A sibling shares its owner's branch: the owner's accepted head can hold the sibling's commits. Here survey (still
    # working, not accepted) committed on api-docs' branch before api-docs did; merging api-docs would merge it too.
    fleet = Fleet(tmp_path, git_repo, integration=OPT_IN)
    theirs = fleet.commit("api-docs", {"docs/notes.md": "notes\n"}, message="survey notes\n\nOrch-Task: survey")
    docs = fleet.commit("api-docs", {"docs/api.md": "# API\n"}, message="api docs\n\nOrch-Task: api-docs")
    fleet.result("api-docs", body([theirs, docs], ["docs/api.md", "docs/notes.md"], [("test -f docs/api.md", 0)]))
    verify_run(fleet.engine, fleet.run)
    assert fleet.state("api-docs") == ("accepted", "accepted")

    result = integrate_run(fleet.engine, fleet.run)

    assert [(i.task, i.outcome, i.held_by, i.overlap) for i in result.items] == [("api-docs", "held", ("survey",), ("docs/notes.md",))]
    assert result.failure is not None and result.failure.reason == (
        f"api-docs not merged into {INTO}: its branch carries commits of survey, whose work was not accepted (docs/notes.md)"
    )
    assert render_integrate(result).splitlines()[:2] == [
        f"integrate {RUN_ID}: nothing merged into {INTO}",
        f"  api-docs  docs/api @ {docs[:12]}  not merged: its branch carries commits of survey, whose work was not accepted (docs/notes.md)",
    ]
    assert fleet.repo.git("branch", "--list", INTO) == ""
    assert fleet.engine.ledger.get_worker(RUN_ID, "api-docs").integrated_sha is None
