"""herdr down and back: an outage stops the run interrupted (exit 3) and fails no worker; resume after herdr restarted
(real herdr keeps no panes) reads the world back and says, per worker, what it lost."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from orchestrator.progress import Progress
from orchestrator.run import HerdrDown, run_plan
from provision_world import THREE
from registry import RunStatus, WorkerState

DOWN = re.compile(
    r"herdr is down: herdr [a-z -]+: herdr server is not running.*?; run (\S+) stopped during (\w+), no worker was failed for it, "
    r"workers and evidence are in place: `orch resume \1` once it is back"
)


def command(argv: Any) -> str:
    words = list(argv[1:])
    if words[:1] == ["--session"]:
        words = words[2:]
    return " ".join(words[:2])


def stop_herdr_at(world: Any, engine: Any, path: str) -> list[str]:
    """Stop the simulated herdr server just before orch's first `herdr PATH` call (the call then finds no server)."""
    real, stopped = engine.herdr.runner, []

    def runner(argv: Any, *, env: Any, timeout: float) -> Any:
        if command(argv) == path and not stopped:
            stopped.append(path)
            world.sim.stop()
        return real(argv, env=env, timeout=timeout)

    engine.herdr.runner = runner
    return stopped


def restart(world: Any) -> None:
    """herdr back, as a restarted real herdr comes back: no workspace, tab, pane or agent of before. The person
    resumes from a fresh pane."""
    world.sim.__enter__()
    created = json.loads(world.sim.run(["workspace", "create", "--cwd", str(world.repo.path), "--no-focus"]).stdout)["result"]
    pane = created["root_pane"]
    world.env.update(HERDR_PANE_ID=pane["pane_id"], HERDR_TAB_ID=pane["tab_id"], HERDR_WORKSPACE_ID=pane["workspace_id"])


def test_herdr_down_during_provisioning_interrupts_the_run_and_resume_after_its_restart_names_what_was_lost(make_world: Any, tmp_path: Path) -> None:
    world = make_world()
    plan = world.write_plan(THREE.format(base="main"))
    engine = world.engine()
    engine.controller = "run"
    stopped = stop_herdr_at(world, engine, "agent start")

    with pytest.raises(HerdrDown) as raised:
        run_plan(engine, plan, Progress(io.StringIO(), live=False), interval_s=0.3)

    assert stopped == ["agent start"]
    match = DOWN.fullmatch(raised.value.message)
    assert match is not None and match[2] == "schedule", raised.value.message
    assert raised.value.exit_code == 3
    run_id = match[1]
    run = engine.ledger.get_run(run_id)
    assert (run.status, run.stopped_at) == (RunStatus.INTERRUPTED, "herdr is down during schedule")
    workers = engine.ledger.list_workers(run_id)
    assert {w.task_label: _failure(world, run_id, w.task_label) for w in workers if w.state is WorkerState.FAILED} == {}  # nothing failed for good
    assert (engine.run_dir(run_id) / "report.md").exists()
    engine.close()

    # Still down: resume says so in one line, exit 3, and changes nothing.
    again = world.orch("resume", run_id)
    assert again.returncode == 3, again.stderr
    (line,) = again.stderr.splitlines()
    match = DOWN.fullmatch(line.removeprefix("orch: "))
    assert match is not None and match[2] == "resume", line
    assert [w.state for w in world.engine().ledger.list_workers(run_id)] == [w.state for w in workers]

    restart(world)
    resumed = world.orch("resume", run_id, "--interval", "0.3")

    after = {w.task_label: w for w in world.engine().ledger.list_workers(run_id)}
    ledger = world.engine().ledger
    reasons = {t: _failure(world, run_id, t) for t in after if any(e.to_state == WorkerState.FAILED for e in ledger.events(run_id, task_label=t))}
    # Every worker that had a pane lost it: each fails with that reason and what it saved; its worktree is kept.
    with_panes = [w.task_label for w in workers if w.pane_id is not None]
    assert with_panes and set(with_panes) <= set(reasons), (resumed.stderr, reasons)
    for task in with_panes:
        assert re.fullmatch(
            r"its pane \S+ (is gone|now names a pane in \S+) \(herdr restarted, or it was closed, while orch was stopped\) while it was (provisioning|ready); "
            r"saved: no commits on \S+, the worktree \S+ \(kept\)", reasons[task]), reasons[task]
        assert Path(after[task].worktree_path or "").is_dir()
    assert resumed.returncode == 11, resumed.stderr  # FAIL: no worker delivered
    finished = world.engine().ledger.get_run(run_id)
    assert finished.status is RunStatus.FINISHED
    assert world.engine().ledger.in_flight(run_id) == []


def _failure(world: Any, run_id: str, task: str) -> str:
    event = [e for e in world.engine().ledger.events(run_id, task_label=task) if e.to_state == WorkerState.FAILED][-1]
    return str(event.detail["cause"].get("reason") or event.detail["cause"].get("error"))
