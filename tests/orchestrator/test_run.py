"""`orch resume` continues only what `orch run` started: an agent-driven run's callbacks would never reach it."""

from __future__ import annotations

import io
import os
import subprocess
from datetime import UTC, datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from orchestrator.clock import FakeClock
from orchestrator.config import Settings
from orchestrator.engine import Engine
from orchestrator.errors import ExitCode, OrchError
from orchestrator.evidence import Verification
from orchestrator.verify import stored_json
from orchestrator.herdr import HerdrCli, RetryPolicy
from orchestrator.progress import Progress
from orchestrator.git import GitError
from orchestrator.run import HerdrDown, _stop_for_person, _stopped, resume_run
from registry import WorkerState

S = WorkerState

RUN = "w1:p1-20261130T080000Z"


def test_resume_refuses_a_run_driven_by_an_agent_controller(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, orch_home=tmp_path / "orch", policy_dir=tmp_path / "policies", src_root=tmp_path / "src")
    engine = Engine(settings=settings, herdr=HerdrCli("herdr-that-is-never-run"), clock=FakeClock(), env={})
    engine.ledger.create_run(RUN, controller_target="w1:p1")

    with pytest.raises(OrchError) as raised:
        resume_run(engine, RUN, Progress(io.StringIO()))

    assert (raised.value.message, raised.value.hint) == (
        f"run {RUN} is driven by an agent controller; `orch resume` continues only runs started by `orch run`",
        f"continue it with the granular commands (SKILL.md): `orch wait --run {RUN}`, then what its next[] says",
    )
    assert engine.ledger.get_run(RUN).status == "active"
    engine.close()


def test_resume_with_nothing_recorded_says_that_running_the_plan_again_is_right(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, orch_home=tmp_path / "orch", policy_dir=tmp_path / "policies", src_root=tmp_path / "src")
    engine = Engine(settings=settings, herdr=HerdrCli("herdr-that-is-never-run"), clock=FakeClock(), env={})

    with pytest.raises(OrchError) as raised:
        resume_run(engine, None, Progress(io.StringIO()))

    assert (raised.value.message, raised.value.hint) == (
        "no unfinished run in the ledger: a run stopped before it was recorded created nothing in herdr or git",
        "re-run `orch run PLAN`: it starts from the beginning",
    )
    engine.close()


def test_resume_settle_answers_only_a_prompt_left_in_flight_and_changes_nothing_otherwise(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, orch_home=tmp_path / "orch", policy_dir=tmp_path / "policies", src_root=tmp_path / "src")
    engine = Engine(settings=settings, herdr=HerdrCli("herdr-that-is-never-run"), clock=FakeClock(), env={})
    engine.ledger.create_run(RUN, controller_target="w1:p1", fields={"controller_kind": "run"})
    engine.ledger.add_worker(RUN, "feature-a", name="feature-a", kind="codex", objective="x")
    done = engine.ledger.intend(RUN, "feature-a", "agent_prompt", "feature-a:dispatch:1", {"target": "feature-a"})
    engine.ledger.confirm(done, {})

    for decisions, expected in (
        ({7: "sent"}, f"run {RUN} has no effect 7"),
        ({done.id: "sent"}, f"effect {done.id} is not a prompt of run {RUN} left in flight (agent_prompt, confirmed)"),
    ):
        with pytest.raises(OrchError) as raised:
            resume_run(engine, None, Progress(io.StringIO()), decisions=decisions)
        assert raised.value.message == expected
    assert [e.kind for e in engine.ledger.events(RUN) if e.kind == "effect_decided"] == []
    engine.close()


def test_a_run_stopped_by_a_verification_block_says_what_the_person_decides(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, orch_home=tmp_path / "orch", policy_dir=tmp_path / "policies", src_root=tmp_path / "src")
    engine = Engine(settings=settings, herdr=HerdrCli("herdr-that-is-never-run"), clock=FakeClock(datetime(2026, 11, 30, 8, 0, tzinfo=UTC)), env={})
    run = engine.ledger.create_run(RUN, controller_target="w1:p1")
    engine.ledger.add_worker(RUN, "docs", name="docs", kind="codex", objective="Document it.", claimed_files=("docs/",), branch="docs/greet")
    for before, after in ((S.PROVISIONING, S.READY), (S.READY, S.DISPATCHED), (S.DISPATCHED, S.RESULT), (S.RESULT, S.VERIFYING)):
        engine.ledger.transition(RUN, "docs", before, after, cause={"test": True})
    found = Verification(disposition="blocked", reasons=("edited outside its claim: README.md (integration paused for a decision)",),
                         head_sha="b" * 40, commits=(), changed_files=(), outside_claim=("README.md",), checks=())  # fmt: skip
    worker = engine.ledger.transition(RUN, "docs", S.VERIFYING, S.BLOCKED, cause={"phase": "verify"}, controller_verification=stored_json(found))
    stream = io.StringIO()

    outcome = _stop_for_person(engine, run, Progress(stream, live=False), [worker])

    assert stream.getvalue() == (
        "08:00:00 docs is blocked by verification, integration is paused: edited outside its claim: README.md (integration paused for a decision) "
        f"-> fix its branch and `orch verify --run {RUN} --task docs`, or `orch verify --run {RUN} --supersede docs --reason TEXT`, "
        f"then `orch resume {RUN}`\n"
    )
    assert (outcome.finished, outcome.stopped_at) == (False, "waiting for the person: docs")
    engine.close()


def test_resume_settle_of_an_agent_driven_run_records_the_answer_for_its_door(tmp_path: Path) -> None:
    """A cannot-tell question ends in `orch resume RUN --settle ID=…` whoever drives the run: for an agent controller's
    run it records the answer (the door's next check-in settles the effect by it); a bad id changes nothing."""
    from click.testing import CliRunner

    from orchestrator.cli import cli
    from registry.facts import FactKind

    settings = Settings(home=tmp_path, orch_home=tmp_path / "orch", policy_dir=tmp_path / "policies", src_root=tmp_path / "src")
    engine = Engine(settings=settings, herdr=HerdrCli("herdr-that-is-never-run"), clock=FakeClock(), env={})
    engine.ledger.create_run(RUN, controller_target="w1:p1")
    engine.ledger.add_worker(RUN, "feature-a", name="feature-a", kind="codex", objective="x")
    effect = engine.ledger.intend(RUN, "feature-a", "agent_prompt", "feature-a:packet", {"target": "feature-a"})
    engine.close()
    env = {"HOME": str(tmp_path), "ORCH_HOME": str(tmp_path / "orch"), "HERDR_ENV": "", "HERDR_PANE_ID": "w1:p1"}

    bad = CliRunner().invoke(cli, ["resume", RUN, "--settle", f"{effect.id}=sent", "--settle", f"{effect.id + 7}=unsent"], env=env, prog_name="orch")
    done = CliRunner().invoke(cli, ["resume", RUN, "--settle", f"{effect.id}=sent"], env=env, prog_name="orch")

    assert (bad.exit_code, bad.output) == (1, f"orch: run {RUN} has no effect {effect.id + 7}\nhint: the question that asked names the effect id\n")
    assert (done.exit_code, done.output) == (
        0,
        f"effect {effect.id}: recorded as sent\n"
        f"run {RUN} is driven by an agent controller: its next check-in (`orch wait --run {RUN}`) settles them\n",
    )
    engine = Engine(settings=settings, herdr=HerdrCli("herdr-that-is-never-run"), clock=FakeClock(), env={})
    decided = [e.detail for e in engine.ledger.events(RUN) if e.kind == FactKind.EFFECT_DECIDED]
    assert decided == [{"effect_id": effect.id, "answer": "sent"}]
    engine.close()


def test_a_run_stopped_by_an_error_is_left_resumable_with_its_report_and_says_so_in_one_line(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, orch_home=tmp_path / "orch", policy_dir=tmp_path / "policies", src_root=tmp_path / "src")
    engine = Engine(settings=settings, herdr=HerdrCli("herdr-that-is-never-run"), clock=FakeClock(), env={})
    run = engine.ledger.create_run(RUN, controller_target="w1:p1", fields={"controller_kind": "run"})
    engine.ledger.add_worker(RUN, "docs", name="docs", kind="codex", objective="Document it.")
    failed = GitError("git merge failed:\nfatal: refusing to merge unrelated histories")
    failed.exit_code = 7  # type: ignore[assignment]

    stopped = _stopped(engine, run, "integrate", failed)

    report = engine.run_dir(RUN) / "report.md"
    assert (stopped.message, stopped.hint, stopped.exit_code) == (
        f"run {RUN} stopped during integrate: git merge failed: / fatal: refusing to merge unrelated histories; the report is in {report}",
        f"fix the cause, then `orch resume {RUN}`",
        7,
    )
    after = engine.ledger.get_run(RUN)
    assert (after.status, after.stopped_at) == ("interrupted", "stopped during integrate: git merge failed: / fatal: refusing to merge unrelated histories")
    assert report.read_text().startswith(f"# Herdr orchestration report: {RUN}\n")
    engine.close()


def _no_server(argv: object, *, env: object, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.CompletedProcess(list(argv), 1, "", 'Error: Os { code: 111, kind: ConnectionRefused, message: "Connection refused" }\n')  # type: ignore[call-overload]


def test_herdr_down_while_resuming_stops_the_run_interrupted_in_one_line_and_fails_nothing(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, orch_home=tmp_path / "orch", policy_dir=tmp_path / "policies", src_root=tmp_path / "src")
    herdr = HerdrCli("herdr", runner=_no_server, retry=RetryPolicy(read_attempts=1))
    engine = Engine(settings=settings, herdr=herdr, clock=FakeClock(), env={})
    engine.ledger.create_run(RUN, controller_target="w1:p1", fields={"controller_kind": "run", "workspace_id": "w2", "repo_tab_id": "w2:t1"})
    engine.ledger.add_worker(RUN, "feature-a", name="feature-a", kind="codex", objective="x")
    engine.ledger.intend(RUN, "feature-a", "pane_split", "feature-a:pane_split", {"pane": "w2:p1", "cwd": str(tmp_path)})

    with pytest.raises(HerdrDown) as raised:
        resume_run(engine, RUN, Progress(io.StringIO(), live=False))

    assert (raised.value.message, raised.value.hint, raised.value.exit_code) == (
        f"herdr is down: herdr workspace get: herdr server is not running; run {RUN} stopped during resume, no worker was failed for it, "
        f"workers and evidence are in place: `orch resume {RUN}` once it is back",
        None, ExitCode.HERDR_UNAVAILABLE,
    )
    run = engine.ledger.get_run(RUN)
    assert (run.status, run.stopped_at) == ("interrupted", "herdr is down during resume")
    assert [(w.task_label, w.state) for w in engine.ledger.list_workers(RUN)] == [("feature-a", S.PROVISIONING)]
    assert [str(e.status) for e in engine.ledger.list_effects(RUN)] == ["intended"]  # settled once herdr is back
    assert (engine.run_dir(RUN) / "report.md").exists()
    engine.close()


def test_resume_takes_an_interrupted_orch_run_run_recorded_by_the_schema_before_controller_kind(tmp_path: Path) -> None:
    # Issue 21: migration 3's bare default made such a run agent-driven, and resume refused it. The file is built as
    # schema 2 wrote it (MIGRATIONS[:2] is that release's DDL; the row has that release's columns).
    import sqlite3

    from registry.schema import MIGRATIONS

    settings = Settings(home=tmp_path, orch_home=tmp_path / "orch", policy_dir=tmp_path / "policies", src_root=tmp_path / "src")
    settings.orch_home.mkdir()
    old = sqlite3.connect(settings.orch_home / "ledger.sqlite3", isolation_level=None)
    for script in MIGRATIONS[:2]:
        old.executescript(script)
    old.execute("PRAGMA user_version = 2")
    old.execute(
        "INSERT INTO runs (run_id, controller_target, status, stopped_at, created_at, updated_at, workspace_id, repo_tab_id)"
        " VALUES (?, 'w1:p1', 'interrupted', ?, ?, ?, 'w1', 'w1:t1')",
        (RUN, "interrupted during observe", "2026-11-30T08:00:00.000000+00:00", "2026-11-30T08:00:00.000000+00:00"),
    )
    old.close()
    engine = Engine(settings=settings, herdr=HerdrCli("herdr-that-is-never-run"), clock=FakeClock(), env={})

    with pytest.raises(OrchError) as raised:
        resume_run(engine, RUN, Progress(io.StringIO()))

    # Past the controller check: resume went on to drive the run from its plan snapshot (absent here).
    snapshot = settings.orch_home / "runs" / RUN.replace(":", "_") / "plan.toml"
    assert raised.value.message == f"run {RUN} has no plan snapshot at {snapshot}"
    assert engine.ledger.get_run(RUN).controller_kind == "run"
    engine.close()


def test_resume_after_herdr_lost_the_panes_starts_again_each_worker_no_packet_reached_and_fails_one_it_may_have(tmp_path: Path) -> None:
    # Issue 21: every worker whose pane a herdr restart took was failed for good, though one that never got its packet
    # has no work to lose. The rule: no prompt made or in flight -> started again (new keys); else failed, named.
    from fake_herdr import FakeHerdr

    from orchestrator.run import reread_world

    settings = Settings(home=tmp_path, orch_home=tmp_path / "orch", policy_dir=tmp_path / "policies", src_root=tmp_path / "src")
    engine = Engine(settings=settings, herdr=FakeHerdr(cwd=tmp_path), clock=FakeClock(), env={})  # type: ignore[arg-type]
    ledger = engine.ledger
    run = ledger.create_run(RUN, controller_target="w1:p1", fields={"controller_kind": "run", "workspace_id": "w1", "repo_tab_id": "w1:t1"})
    moves = {"ready": (S.READY,), "prompted": (S.READY,), "provisioning": (), "dispatched": (S.READY, S.DISPATCHED)}
    for number, (task, path) in enumerate(moves.items(), start=1):
        ledger.add_worker(RUN, task, name=task, kind="codex", objective="x", pane_id=f"w9:p{number}", tab_id=f"w9:t{number}")
        state = S.PROVISIONING
        for after in path:
            ledger.transition(RUN, task, state, after)
            state = after
    ledger.intend(RUN, "prompted", "agent_prompt", "prompted:dispatch:1", {"name": "prompted"})  # in flight: it may have landed
    moving = ledger.intend(RUN, "provisioning", "pane_move", "provisioning:pane_move:w9:p3", {"pane": "w9:p3"})

    lines = reread_world(engine, run, Progress(io.StringIO(), live=False))

    lost = "(herdr restarted, or it was closed, while orch was stopped)"
    assert lines == [
        f"ready: started again: its pane w9:p1 is gone {lost} while it was ready, before any packet was sent, so nothing of its work can be lost",
        f"prompted: failed: its pane w9:p2 is gone {lost} while it was ready; saved: no branch recorded",
        f"provisioning: started again: its pane w9:p3 is gone {lost} while it was provisioning, before any packet was sent, so nothing of its work can be lost",
        f"dispatched: failed: its pane w9:p4 is gone {lost} while it was dispatched; saved: no branch recorded",
    ]
    after = {w.task_label: (w.state, w.pane_id, w.tab_id) for w in ledger.list_workers(RUN)}
    assert after == {
        "ready": (S.PROVISIONING, None, None), "prompted": (S.FAILED, "w9:p2", "w9:t2"),
        "provisioning": (S.PROVISIONING, None, None), "dispatched": (S.FAILED, "w9:p4", "w9:t4"),
    }  # fmt: skip
    assert str(ledger.get_effect(moving.id).status) == "abandoned"  # made in a world herdr no longer has
    # The new start's effects have keys of their own: nothing of the first start is replayed.
    assert [engine.start_key(RUN, t, "agent_start") for t in moves] == ["ready:start2:agent_start", "prompted:agent_start", "provisioning:start2:agent_start", "dispatched:agent_start"]
    engine.close()


def test_resume_starts_again_a_sibling_whose_split_was_asked_of_an_owner_pane_herdr_lost(tmp_path: Path) -> None:
    # Found by .ci/run: the owner was started again, its sibling (no pane yet, its split intended from the owner's old
    # pane) was not, and its split asked again of the owner's new pane under the first start's key was refused as a
    # different request. While the pane it was split from still exists (orch died, herdr did not) nothing is restarted.
    from fake_herdr import FakeHerdr

    from orchestrator.run import reread_world

    settings = Settings(home=tmp_path, orch_home=tmp_path / "orch", policy_dir=tmp_path / "policies", src_root=tmp_path / "src")
    herdr = FakeHerdr(cwd=tmp_path)
    engine = Engine(settings=settings, herdr=herdr, clock=FakeClock(), env={})  # type: ignore[arg-type]
    ledger = engine.ledger
    run = ledger.create_run(RUN, controller_target="w1:p1", fields={"controller_kind": "run", "workspace_id": "w1", "repo_tab_id": "w1:t1"})
    ledger.add_worker(RUN, "sibling", name="sibling", kind="codex", objective="x")
    ledger.add_worker(RUN, "kept", name="kept", kind="codex", objective="x")
    split = ledger.intend(RUN, "sibling", "pane_split", "sibling:pane_split", {"pane": "w9:p3", "cwd": str(tmp_path)})
    ledger.intend(RUN, "kept", "pane_split", "kept:pane_split", {"pane": "w1:p1", "cwd": str(tmp_path)})  # the controller's: still there

    lines = reread_world(engine, run, Progress(io.StringIO(), live=False))

    assert lines == [
        "sibling: started again: the pane w9:p3 it was being split from is gone (herdr restarted while orch was stopped) while it was "
        "provisioning, before any packet was sent, so nothing of its work can be lost"
    ]
    assert str(ledger.get_effect(split.id).status) == "abandoned"
    assert [engine.start_key(RUN, t, "pane_split") for t in ("sibling", "kept")] == ["sibling:start2:pane_split", "kept:pane_split"]
    engine.close()


def test_resume_after_herdr_lost_a_pane_names_the_unsaved_work_in_its_kept_worktree(tmp_path: Path, git_repo_factory: Any) -> None:
    # Issue 21: "a lost pane with unsaved work is named, its worktree kept". The agent had edited a file and not
    # committed it: the failure says so, and where; nothing of it is touched.
    from fake_herdr import FakeHerdr

    from orchestrator.run import reread_world

    checkout = git_repo_factory(tmp_path / "wt").path
    (checkout / "notes.md").write_text("half a page\n")
    settings = Settings(home=tmp_path, orch_home=tmp_path / "orch", policy_dir=tmp_path / "policies", src_root=tmp_path / "src")
    engine = Engine(settings=settings, herdr=FakeHerdr(cwd=tmp_path), clock=FakeClock(), env={})  # type: ignore[arg-type]
    ledger = engine.ledger
    run = ledger.create_run(RUN, controller_target="w1:p1", fields={"controller_kind": "run", "workspace_id": "w1", "repo_tab_id": "w1:t1"})
    ledger.add_worker(RUN, "docs", name="docs", kind="codex", objective="x", pane_id="w9:p1", tab_id="w9:t1", worktree_path=str(checkout))
    for before, after in ((S.PROVISIONING, S.READY), (S.READY, S.DISPATCHED)):
        ledger.transition(RUN, "docs", before, after)

    lines = reread_world(engine, run)

    assert lines == [
        f"docs: failed: its pane w9:p1 is gone (herdr restarted, or it was closed, while orch was stopped) while it was dispatched; "
        f"saved: no branch recorded, the worktree {checkout} (kept); 1 uncommitted change(s) in {checkout} (not committed, kept there)"
    ]
    assert (checkout / "notes.md").read_text() == "half a page\n"
    engine.close()


# --- another host's herdr restarted: its world read back through its own herdr ---

# ssh's options skipped, one target whose command string runs as sshd would run it.
HOST_SSH = """#!/bin/sh
while [ $# -gt 0 ]; do case "$1" in -[BbcDEeFIiJLlmOoPpQRSWw]) shift 2;; -*) shift;; *) break;; esac; done
[ "$1" = me@buildbox ] || { echo "ssh: Could not resolve hostname $1: Name or service not known" >&2; exit 255; }
shift; [ "$1" = -- ] && shift
exec sh -c "$*"
"""


def _hosts_run(tmp_path: Path, box_checkout: Path, box_herdr: Any, workers: dict[str, tuple[str, tuple[WorkerState, ...], dict[str, Any]]]) -> tuple[Engine, Any]:
    """A run with a controller (FakeHerdr in <tmp>/ctl) and the build box (``box_herdr``), its workers as given:
    task -> (host, the states it walked through from provisioning, its row's fields)."""
    from fake_herdr import FakeHerdr

    settings = Settings(home=tmp_path, orch_home=tmp_path / "orch", policy_dir=tmp_path / "policies", src_root=tmp_path / "src")
    engine = Engine(settings=settings, herdr=FakeHerdr(cwd=tmp_path / "ctl"), clock=FakeClock(), env={})  # type: ignore[arg-type]
    engine.host_herdrs["buildbox"] = box_herdr
    plan = (f'organization = "acme"\nrepo = "widgets"\nbase = "main"\n\n[hosts.buildbox]\nmachine = "buildbox"\nssh = "me@buildbox"\n'
            f'checkout = "{box_checkout}"\n')
    plan += "".join(f'\n[[workers]]\ntask = "{t}"\nobjective = "x"\ndeliverable = "x"\nbranch = "feat/{t}"\nclaim = ["{t}/**"]\n'
                    + ('host = "buildbox"\n' if host != "local" else "") for t, (host, _, _) in workers.items())
    engine.run_dir(RUN).mkdir(parents=True)
    (engine.run_dir(RUN) / "plan.toml").write_text(plan)
    ledger = engine.ledger
    run = ledger.create_run(RUN, controller_target="w1:p1", repo_path=str(tmp_path / "ctl"),
                            fields={"controller_kind": "run", "workspace_id": "w1", "repo_tab_id": "w1:t1"})
    for task, (host, states, fields) in workers.items():
        ledger.add_worker(RUN, task, name=task, kind="codex", objective="x", host=host, **fields)
        for before, after in pairwise((S.PROVISIONING, *states)):
            ledger.transition(RUN, task, before, after)
    return engine, run


def test_resume_reads_another_hosts_world_through_its_herdr_starting_again_or_failing_each_worker_it_lost(
    tmp_path: Path, git_repo_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The build box's herdr restarted (the controller's did not): its workers are read back there, never here, where
    the same ids name other panes. One no packet reached starts again; one that had its packet fails with what it saved,
    on the box; one whose pane the box still has is untouched, and so is the controller's worker of the same pane id."""
    from fake_herdr import FakeHerdr

    from orchestrator.run import reread_world

    box = git_repo_factory(tmp_path / "box" / "widgets")
    base = box.head()
    asked = tmp_path / "box" / "widgets.worktrees" / "widgets-feat-asked"
    box.git("worktree", "add", "--quiet", "-b", "feat/asked", str(asked))
    work = box.commit("asked: half", {"asked/a.txt": "a\n"}, cwd=asked)
    (asked / "asked" / "b.txt").write_text("b\n")
    ok = tmp_path / "box" / "ok"
    ok.mkdir()
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "ssh").write_text(HOST_SSH)
    (tmp_path / "bin" / "ssh").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    box_herdr = FakeHerdr(cwd=ok)  # the box's server now: one pane, w1:p1, in ok's checkout
    engine, run = _hosts_run(tmp_path, box.path, box_herdr, {
        "here": ("local", (S.READY, S.DISPATCHED), {"pane_id": "w1:p1"}),
        "ok": ("buildbox", (S.READY, S.DISPATCHED), {"pane_id": "w1:p1", "worktree_path": str(ok)}),
        "fresh": ("buildbox", (S.READY,), {}),
        "asked": ("buildbox", (S.READY, S.DISPATCHED), {"pane_id": "w1:p9", "worktree_path": str(asked), "branch": "feat/asked", "base_sha": base}),
    })  # fmt: skip
    # fresh's pane id names a pane of the controller's herdr: it is still lost, since only the box's herdr is asked.
    here_pane = engine.herdr.workspace_create(cwd=tmp_path / "ctl").root_pane.pane_id  # type: ignore[union-attr]
    engine.ledger.update_worker(RUN, "fresh", pane_id=here_pane)

    lines = reread_world(engine, run, Progress(io.StringIO(), live=False))

    lost = "(herdr on host buildbox restarted, or it was closed, while orch was stopped)"
    assert lines == [
        f"fresh: started again: its pane {here_pane} on host buildbox is gone {lost} while it was ready, before any packet was sent, "
        "so nothing of its work can be lost",
        f"asked: failed: its pane w1:p9 on host buildbox is gone {lost} while it was dispatched; saved: 1 commit on feat/asked ({work[:7]}), "
        f"the worktree {asked} (kept); 1 uncommitted change(s) in {asked} on host buildbox (not committed, kept there)",
    ]
    after = {w.task_label: (w.state, w.pane_id) for w in engine.ledger.list_workers(RUN)}
    assert after == {"here": (S.DISPATCHED, "w1:p1"), "ok": (S.DISPATCHED, "w1:p1"), "fresh": (S.PROVISIONING, None), "asked": (S.FAILED, "w1:p9")}
    assert [c for c in box_herdr.argvs() if c[:2] == ("pane", "get")] == [("pane", "get", "w1:p1"), ("pane", "get", here_pane), ("pane", "get", "w1:p9")]
    assert (asked / "asked" / "b.txt").read_text() == "b\n"
    assert engine.start_key(RUN, "fresh", "worktree_create") == "fresh:start2:worktree_create"
    engine.close()


class _Silent:
    """Another host's herdr that does not answer (its link down, or its server restarting): every call raises."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def __getattr__(self, name: str) -> Any:
        from orchestrator.errors import HostUnreachable

        def call(*args: Any, **kwargs: Any) -> Any:
            self.asked.append(name)
            raise HostUnreachable("herdr --machine buildbox pane get: machine 'buildbox' (session acme): ssh: connect to host buildbox port 22: Connection refused")

        return call


def test_resume_keeps_the_workers_of_a_host_that_does_not_answer_names_them_and_settles_the_rest(tmp_path: Path) -> None:
    """Never taken as lost: each is named and kept as it was, the host asked once; its effect in flight stays in flight
    (read back once it answers); the controller's world is read back and settled as ever."""
    from orchestrator.run import take_up

    silent = _Silent()
    engine, run = _hosts_run(tmp_path, tmp_path / "box", silent, {
        "one": ("buildbox", (S.READY,), {"pane_id": "w1:p2"}),
        "two": ("buildbox", (S.READY, S.DISPATCHED), {"pane_id": "w1:p3"}),
        "here": ("local", (S.READY,), {"pane_id": "w1:p7"}),
    })  # fmt: skip
    starting = engine.ledger.intend(RUN, "one", "agent_start", "one:agent_start", {"name": "one", "pane": "w1:p2", "host": "buildbox"})
    notes: list[tuple[str | None, str, str]] = []

    taken, questions = take_up(engine, run, lambda task, what, text: notes.append((task, what, text)))

    said = "herdr --machine buildbox pane get: machine 'buildbox' (session acme): ssh: connect to host buildbox port 22: Connection refused"
    assert notes == [
        ("here", "started again", "its pane w1:p7 is gone (herdr restarted, or it was closed, while orch was stopped) while it was ready, "
         "before any packet was sent, so nothing of its work can be lost"),
        ("one", "host unreachable", f"host buildbox did not answer while orch read its world back ({said}); one is kept as it was (ready), "
         "never taken as lost, and looked at again at the next check-in"),
        ("two", "host unreachable", f"host buildbox did not answer while orch read its world back ({said}); two is kept as it was (dispatched), "
         "never taken as lost, and looked at again at the next check-in"),
        (None, "settling", "settling 1 side effect(s) left in flight by read-back: agent_start (one)"),
    ]
    assert (questions, silent.asked) == ([], ["pane_get", "agent_get"])
    assert {w.task_label: (w.state, w.pane_id) for w in engine.ledger.list_workers(RUN)} == {
        "one": (S.READY, "w1:p2"), "two": (S.DISPATCHED, "w1:p3"), "here": (S.PROVISIONING, None)}
    assert str(engine.ledger.get_effect(starting.id).status) == "intended"
    lost = [e.detail["lines"] for e in engine.ledger.events(RUN) if e.kind == "herdr_lost_panes"]
    assert lost == [[notes[0][0] + ": started again: " + notes[0][2]]]  # the kept workers are no loss
    assert taken.status == "active"
    engine.close()
