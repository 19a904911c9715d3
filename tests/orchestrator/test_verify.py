"""The verify phase: workers with a recorded result get an evidence-backed disposition in the ledger (real git, real SQLite)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from orchestrator.errors import OrchError
from orchestrator.verify import render_verify, supersede, verify_run
from registry import WorkerState
from verify_fleet import RUN_ID, Fleet, body

S = WorkerState


@pytest.fixture
def fleet(tmp_path: Path, git_repo: Any) -> Fleet:
    return Fleet(tmp_path, git_repo)


def test_a_truthful_result_is_accepted_and_the_evidence_is_stored(fleet: Fleet) -> None:
    sha = fleet.commit("api-docs", {"docs/api.md": "# API\n"})
    fleet.result("api-docs", body([sha], ["docs/api.md"], [("test -f docs/api.md", 0)]))

    result = verify_run(fleet.engine, fleet.run)

    assert render_verify(result) == (
        f"verify {RUN_ID}: 1 worker verified\n"
        f"  api-docs  accepted  docs/api @ {sha[:12]}\n"
        "    check  exit 0: test -f docs/api.md\n"
        "not verified: greeting (working), survey (working)\n"
    )
    worker = fleet.engine.ledger.get_worker(RUN_ID, "api-docs")
    stored = json.loads(worker.controller_verification or "{}")
    assert (worker.state, worker.final_disposition, worker.head_sha) == (S.ACCEPTED, S.ACCEPTED, sha)
    assert (stored["disposition"], stored["commits"], stored["changed_files"], [c["exit_code"] for c in stored["checks"]]) == (
        "accepted", [sha], ["docs/api.md"], [0]
    )
    last = fleet.engine.ledger.events(RUN_ID, task_label="api-docs")[-1]
    assert (last.from_state, last.to_state, last.detail["cause"]) == (
        S.VERIFYING,
        S.ACCEPTED,
        {"phase": "verify", "decided_by": "evidence", "disposition": "accepted", "reasons": [], "head_sha": sha,
         "checks": [{"command": "test -f docs/api.md", "exit_code": 0, "error": None}]},
    )  # fmt: skip
    # Verifying again: the accepted worker is decided, not "not verified".
    assert [(w.task, w.state) for w in verify_run(fleet.engine, fleet.run).not_verified] == [("greeting", S.WORKING), ("survey", S.WORKING)]


def test_claimed_checks_it_did_not_run_are_rejected(fleet: Fleet) -> None:
    sha = fleet.commit("greeting", {"src/greet.py": "print('hi')\n"})
    fleet.result("greeting", body([sha], ["src/greet.py"], [("grep -q hello src/greet.py", 0)]))

    result = verify_run(fleet.engine, fleet.run, ["greeting"])

    assert render_verify(result) == (
        f"verify {RUN_ID}: 1 worker verified\n"
        f"  greeting  rejected  feat/greeting @ {sha[:12]}\n"
        "    reason check `grep -q hello src/greet.py` failed on re-run (exit 1)\n"
        "    reason worker reported `grep -q hello src/greet.py` passing, but it does not pass on re-run\n"
        "    check  exit 1: grep -q hello src/greet.py\n"
        "not verified: api-docs (working), survey (working)\n"
    )
    assert fleet.state("greeting") == ("rejected", "rejected")


def test_a_zero_commit_done_is_rejected(fleet: Fleet) -> None:
    fleet.result("api-docs", body([], [], []))

    result = verify_run(fleet.engine, fleet.run)

    assert result.verdicts[0].verification.reasons == (
        f"no commits on docs/api since base {fleet.base[:12]}, but the task had to change files",
        "check `test -f docs/api.md` failed on re-run (exit 1)",
    )
    assert fleet.state("api-docs") == ("rejected", "rejected")


def test_out_of_claim_edits_block_and_pause_integration(fleet: Fleet) -> None:
    sha = fleet.commit("greeting", {"src/greet.py": "print('hello')\n", "README.md": "drive-by\n", "docs/x.md": "x\n"})
    fleet.result("greeting", body([sha], ["README.md", "docs/x.md", "src/greet.py"], [("grep -q hello src/greet.py", 0)]))

    result = verify_run(fleet.engine, fleet.run)

    assert render_verify(result) == (
        f"verify {RUN_ID}: 1 worker verified\n"
        f"  greeting  blocked  feat/greeting @ {sha[:12]}\n"
        "    reason edited outside its claim: README.md, docs/x.md (claimed by api-docs) (integration paused for a decision)\n"
        "    check  exit 0: grep -q hello src/greet.py\n"
        "not verified: api-docs (working), survey (working)\n"
        "integration paused: blocked by verification: greeting\n"
    )
    assert fleet.state("greeting") == ("blocked", "blocked")


def test_a_missing_cited_file_is_recorded(fleet: Fleet) -> None:
    sha = fleet.commit("api-docs", {"docs/api.md": "# API\n"})
    fleet.result("api-docs", body([sha], ["docs/api.md", "docs/usage.md"], [("test -f docs/api.md", 0)]))

    verdict = verify_run(fleet.engine, fleet.run).verdicts[0].verification

    assert (verdict.disposition, verdict.missing_files, verdict.reasons) == (
        "rejected", ("docs/usage.md",), (f"cited file docs/usage.md does not exist at {sha[:12]}",)
    )


def test_a_read_only_worker_that_changed_files_is_blocked(fleet: Fleet) -> None:
    sha = fleet.commit("survey", {"notes.md": "findings\n"})
    fleet.result("survey", body([sha], ["notes.md"], []))

    verdict = verify_run(fleet.engine, fleet.run).verdicts[0].verification

    assert (verdict.disposition, verdict.reasons) == ("blocked", ("read-only task changed files: notes.md (integration paused for a decision)",))


def test_a_read_only_worker_that_changed_nothing_is_accepted(fleet: Fleet) -> None:
    fleet.result("survey", body([], [], []))

    assert verify_run(fleet.engine, fleet.run).verdicts[0].verification.disposition == "accepted"
    assert fleet.state("survey") == ("accepted", "accepted")


def test_an_unreadable_result_is_rejected_with_its_problems(fleet: Fleet) -> None:
    sha = fleet.commit("api-docs", {"docs/api.md": "# API\n"})
    fleet.result("api-docs", "I did it, trust me")

    verdict = verify_run(fleet.engine, fleet.run).verdicts[0].verification

    assert (verdict.head_sha, verdict.reasons) == (
        sha,
        (
            "result: line 1: 'I did it, trust me' is not a result field",
            "result: missing Status:",
            "result: missing Commits:",
            "result: missing Changed files:",
            "result: missing Checks:",
            "result: missing Residual risk:",
        ),
    )


def test_verification_never_touches_the_live_worktree(fleet: Fleet) -> None:
    sha = fleet.commit("api-docs", {"docs/api.md": "# API\n"})
    fleet.repo.write("docs/draft.md", "uncommitted\n", cwd=fleet.worktrees["api-docs"])
    fleet.result("api-docs", body([sha], ["docs/api.md"], [("test -f docs/api.md", 0)]))

    verify_run(fleet.engine, fleet.run)

    assert fleet.repo.git("status", "--porcelain", cwd=fleet.worktrees["api-docs"]) == "?? docs/draft.md"
    assert fleet.repo.git("worktree", "list", "--porcelain").count("worktree ") == 4


def test_a_verification_left_in_flight_is_verified_again(fleet: Fleet) -> None:
    sha = fleet.commit("api-docs", {"docs/api.md": "# API\n"})
    fleet.result("api-docs", body([sha], ["docs/api.md"], [("test -f docs/api.md", 0)]))
    fleet.engine.ledger.transition(RUN_ID, "api-docs", S.RESULT, S.VERIFYING, cause={"test": "crashed verify"})

    assert [v.verification.disposition for v in verify_run(fleet.engine, fleet.run).verdicts] == ["accepted"]


def test_naming_a_task_that_cannot_be_verified_changes_nothing(fleet: Fleet) -> None:
    with pytest.raises(OrchError) as raised:
        verify_run(fleet.engine, fleet.run, ["api-docs"])
    assert raised.value.message == "task api-docs is working; only a worker with a result (or blocked by verification) can be verified"
    with pytest.raises(OrchError) as unknown:
        verify_run(fleet.engine, fleet.run, ["nope"])
    assert unknown.value.message == f"run {RUN_ID} has no task nope"
    assert fleet.state("api-docs") == ("working", None)


def test_the_person_supersedes_a_worker_with_a_reason(fleet: Fleet) -> None:
    result = supersede(fleet.engine, fleet.run, "greeting", "replaced by the upstream greeting module")

    assert render_verify(result) == (
        f"verify {RUN_ID}: 1 worker verified\n"
        f"  greeting  superseded (by the person)  feat/greeting @ {fleet.base[:12]}\n"
        "    reason superseded by the person: replaced by the upstream greeting module\n"
        "not verified: api-docs (working), survey (working)\n"
    )
    assert fleet.state("greeting") == ("superseded", "superseded")
    with pytest.raises(OrchError) as empty:
        supersede(fleet.engine, fleet.run, "api-docs", "  ")
    assert empty.value.message == "--supersede needs a --reason saying what replaced the work"


def test_the_cli_prints_the_report_or_json_and_refuses_a_stray_reason(fleet: Fleet, monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from orchestrator.cli import cli

    for name, value in fleet.engine.env.items():
        monkeypatch.setenv(name, value)
    sha = fleet.commit("api-docs", {"docs/api.md": "# API\n"})
    fleet.result("api-docs", body([sha], ["docs/api.md"], [("test -f docs/api.md", 0)]))
    runner = CliRunner()

    shown = runner.invoke(cli, ["verify", "--run", RUN_ID, "--json"])
    stray = runner.invoke(cli, ["verify", "--run", RUN_ID, "--reason", "because"])
    report = runner.invoke(cli, ["integrate", "--run", RUN_ID])

    data = json.loads(shown.stdout)
    assert (shown.exit_code, data["run_id"], [(v["task"], v["verification"]["disposition"]) for v in data["verdicts"]]) == (
        0, RUN_ID, [("api-docs", "accepted")]
    )
    assert (stray.exit_code, stray.stderr) == (1, "orch: --reason goes with --supersede TASK\n")
    assert (report.exit_code, report.stdout) == (
        0,
        f"integrate {RUN_ID}: integration is off in the plan; nothing merged, accepted work:\n"
        f"  api-docs  docs/api  {sha}\n"
        "not accepted: greeting (working), survey (working)\n",
    )


# A worker's controller_verification exactly as orch wrote it before evidence was a plain record (pydantic's compact
# JSON, on 2026-12-02), and as a ledger from before `missing_files` and a check's `error` were recorded.
STORED_TODAY = (
    '{"disposition":"rejected","reasons":["check `pytest -q` failed on re-run (exit 1)"],"head_sha":"' + "a" * 40 + '",'
    '"commits":["' + "a" * 40 + '"],"changed_files":["src/é.py"],"outside_claim":[],"missing_files":["docs/x.md"],'
    '"checks":[{"command":"pytest -q","exit_code":1,"seconds":2.5,"output_tail":"1 failed","error":null},'
    '{"command":"make","exit_code":null,"seconds":600.0,"output_tail":"","error":"timed out after 600s"}]}'
)
STORED_OLDER = '{"disposition":"accepted","reasons":[],"head_sha":null,"commits":[],"changed_files":[],"outside_claim":[],"checks":[{"command":"true","exit_code":0,"seconds":1,"output_tail":""}]}'


def test_evidence_stored_by_todays_orch_reads_back_and_is_written_the_same(fleet: Fleet) -> None:
    from orchestrator.checks import CheckRun
    from orchestrator.evidence import Verification
    from orchestrator.verify import stored_json, stored_verification

    ledger = fleet.engine.ledger
    found = stored_verification(ledger.update_worker(RUN_ID, "api-docs", controller_verification=STORED_TODAY))
    assert found == Verification(
        disposition="rejected", reasons=("check `pytest -q` failed on re-run (exit 1)",), head_sha="a" * 40, commits=("a" * 40,),
        changed_files=("src/é.py",), outside_claim=(), missing_files=("docs/x.md",),
        checks=(CheckRun(command="pytest -q", exit_code=1, seconds=2.5, output_tail="1 failed"),
                CheckRun(command="make", exit_code=None, seconds=600.0, output_tail="", error="timed out after 600s")),
    )  # fmt: skip
    assert found is not None and stored_json(found) == STORED_TODAY
    older = stored_verification(ledger.update_worker(RUN_ID, "api-docs", controller_verification=STORED_OLDER))
    assert older is not None and (older.missing_files, older.checks[0].error, older.checks[0].seconds) == ((), None, 1.0)
    assert stored_verification(ledger.get_worker(RUN_ID, "greeting")) is None


def test_a_stored_verification_of_another_shape_is_one_line_naming_the_field(fleet: Fleet) -> None:
    from orchestrator.verify import stored_verification
    from registry import RegistryError

    bad = STORED_TODAY.replace('"seconds":2.5', '"seconds":"slow"').replace('"disposition":"rejected"', '"disposition":"maybe"')
    with pytest.raises(RegistryError) as raised:
        stored_verification(fleet.engine.ledger.update_worker(RUN_ID, "api-docs", controller_verification=bad))
    assert str(raised.value) == (
        "invalid verification: disposition: must be 'accepted' or 'rejected' or 'superseded' or 'blocked', not str; "
        "checks.0.seconds: must be float, not str"
    )


def test_checks_rerun_on_a_workers_host_say_where_in_the_text_and_not_in_the_json() -> None:
    from orchestrator.checks import CheckRun
    from orchestrator.effects import to_json
    from orchestrator.evidence import Verification
    from orchestrator.verify import VerifyResult, WorkerVerdict

    found = Verification(
        disposition="rejected", reasons=("check `make test` failed on re-run on host buildbox (exit 2)",), head_sha="a" * 40,
        commits=("a" * 40,), changed_files=("src/cli/page.py",), outside_claim=(),
        checks=(CheckRun(command="make test", exit_code=2, seconds=1.0, output_tail="FAIL"),),
    )  # fmt: skip
    verdict = WorkerVerdict(task="cli", branch="feat/cli", base_sha="b" * 40, decided_by="evidence", verification=found, checks_on="buildbox")
    result = VerifyResult(run_id=RUN_ID, verdicts=(verdict,), not_verified=(), integration_paused_by=())

    assert render_verify(result) == (
        f"verify {RUN_ID}: 1 worker verified\n"
        f"  cli  rejected  feat/cli @ {'a' * 12}\n"
        "    reason check `make test` failed on re-run on host buildbox (exit 2)\n"
        "    check  exit 2 on buildbox: make test\n"
    )
    assert sorted(to_json(result)["verdicts"][0]) == ["base_sha", "branch", "decided_by", "task", "verification"]
