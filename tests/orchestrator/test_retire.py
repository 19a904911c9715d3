"""The stop ladder's decisions: real git worktrees, a real ledger, a fake clock and the shared fake herdr."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fake_herdr import FakeAgent, FakeHerdr

from orchestrator.clock import FakeClock
from orchestrator.config import Settings
from orchestrator.engine import Engine
from orchestrator.errors import OrchError
from orchestrator.retire import RetireResult, holds_work, render_retire, retire
from registry import Run, WorkerState

S = WorkerState
RUN = "w1:p1-20261130T080000Z"


def calls(herdr: FakeHerdr) -> list[tuple[str, ...]]:
    """What the ladder changed through herdr, compactly: text and keys typed, prompts (their header), panes closed."""
    shown: list[tuple[str, ...]] = []
    for argv in herdr.argvs():
        command, rest = " ".join(argv[:2]), argv[2:]
        if command == "pane send-text":
            shown.append(("send-text", rest[0], rest[1]))
        elif command == "pane send-keys":
            shown.append(("send-keys", *rest))
        elif command == "agent prompt":
            shown.append(("agent-prompt", rest[0], rest[1].splitlines()[0]))
        elif command in ("pane close", "workspace close", "worktree remove"):
            shown.append((command.replace(" ", "-"), *rest))
    return shown


def agent(w: Any, pane: str) -> FakeAgent:
    found = w.herdr.pane(pane).agent
    assert found is not None
    return found


@pytest.fixture
def world(tmp_path: Path, git_repo_factory: Any) -> Any:
    """A repo, a ledger run on it, the shared fake herdr (workspace w1 at the repo, the controller in w1:p1) and an
    engine on a fake clock."""
    repo = git_repo_factory(tmp_path / "src" / "acme" / "widgets")
    herdr = FakeHerdr(cwd=repo.path)
    engine = Engine(settings=Settings.from_env(), herdr=herdr, clock=FakeClock(), env={"HERDR_WORKSPACE_ID": "w1"})
    run = engine.ledger.create_run(RUN, controller_target="w1:p1", repo_path=repo.path)

    class W:
        pass

    w = W()
    w.repo, w.herdr, w.engine, w.run, w.tmp = repo, herdr, engine, run, tmp_path  # type: ignore[attr-defined]
    yield w
    engine.close()


def new_pane(w: Any, workspace: str = "w1") -> str:
    """A pane of its own: the root pane of a new tab in ``workspace``, or of a new workspace (``workspace="new"``)."""
    if workspace == "new":
        return str(w.herdr.workspace_create(cwd=w.repo.path).root_pane.pane_id)
    return str(w.herdr.tab_create(workspace=workspace).root_pane.pane_id)


LADDER = [S.READY, S.DISPATCHED, S.RESULT, S.VERIFYING]


def add_worker(w: Any, task: str, state: WorkerState, *, pane: str | None = None, created_pane: bool = True,
               worktree: bool = False, commit: bool = False, **fields: Any) -> Path | None:  # fmt: skip
    """A worker of the run in ``state``, with a pane (``pane``: a new tab's in that workspace, or a new workspace's, an
    idle codex agent named after the task at its prompt) and optionally its own worktree."""
    path = None
    if worktree:
        path = w.tmp / "worktrees" / task
        w.repo.git("worktree", "add", "--quiet", "-b", f"feat/{task}", str(path))
        if commit:
            w.repo.commit(f"{task} work", {f"{task}.txt": "work\n"}, cwd=path)
        fields.update(worktree_path=str(path), created_worktree_paths=(str(path),), branch=f"feat/{task}")
    if pane is not None:
        pane = new_pane(w, pane)
        w.herdr.add_agent(pane, task, "codex")
        w.herdr.pane(pane).screen = "› \n"
        fields.update(pane_id=pane, created_pane_ids=(pane,) if created_pane else ())
    ledger = w.engine.ledger
    ledger.add_worker(RUN, task, name=task, kind="codex", objective="do it", **fields)
    current = S.PROVISIONING
    targets = {S.ACCEPTED: [*LADDER, S.ACCEPTED], S.FAILED: [S.READY, S.DISPATCHED, S.FAILED], S.WORKING: [S.READY, S.DISPATCHED, S.WORKING]}
    for step in targets.get(state, []):
        ledger.transition(RUN, task, current, step, cause={"test": True})
        current = step
    w.herdr.calls.clear()  # the world as the ladder finds it: what it changes starts here
    return path


def run_of(w: Any) -> Run:
    return w.engine.ledger.get_run(RUN)


# --- the worktree rule, on real git ---


def test_clean_checkout_whose_commits_are_merged_may_go(git_repo: Any, tmp_path: Path) -> None:
    path = tmp_path / "wt"
    git_repo.git("worktree", "add", "--quiet", "-b", "feat/a", str(path))
    git_repo.commit("a", {"a.txt": "a\n"}, cwd=path)
    git_repo.git("merge", "--quiet", "--no-ff", "-m", "merge feat/a", "feat/a")

    assert holds_work(git_repo.path, path) is None


def test_fresh_checkout_without_commits_may_go(git_repo: Any, tmp_path: Path) -> None:
    path = tmp_path / "wt"
    git_repo.git("worktree", "add", "--quiet", "-b", "feat/a", str(path))

    assert holds_work(git_repo.path, path) is None


@pytest.mark.parametrize(
    ("arrange", "expected"),
    [
        ({"modify": True}, "1 changed file"),
        ({"untracked": 2}, "2 untracked files"),
        ({"modify": True, "untracked": 1}, "1 changed file and 1 untracked file"),
        ({"commits": 1}, "not integrated: commit {0} exists only on feat/a"),
        ({"commits": 3}, "not integrated: 3 commits exist only on feat/a ({0} and 2 more)"),
    ],
)
def test_checkout_holding_work_is_kept_with_the_exact_reason(git_repo: Any, tmp_path: Path, arrange: dict[str, Any], expected: str) -> None:
    path = tmp_path / "wt"
    git_repo.git("worktree", "add", "--quiet", "-b", "feat/a", str(path))
    for n in range(arrange.get("commits", 0)):
        git_repo.commit(f"c{n}", {f"c{n}.txt": "x\n"}, cwd=path)
    if arrange.get("modify"):
        (path / "README.md").write_text("changed\n")
    for n in range(arrange.get("untracked", 0)):
        (path / f"new{n}.txt").write_text("new\n")

    assert holds_work(git_repo.path, path) == expected.format(git_repo.head(cwd=path)[:7])


def test_pushed_or_tagged_commits_exist_elsewhere(git_repo: Any, tmp_path: Path) -> None:
    path = tmp_path / "wt"
    git_repo.git("worktree", "add", "--quiet", "-b", "feat/a", str(path))
    git_repo.commit("a", {"a.txt": "a\n"}, cwd=path)
    git_repo.git("tag", "keep-a", "feat/a")

    assert holds_work(git_repo.path, path) is None


def test_abandoned_work_may_go_with_commits_only_on_its_branch_but_never_with_uncommitted_changes(git_repo: Any, tmp_path: Path) -> None:
    path = tmp_path / "wt"
    git_repo.git("worktree", "add", "--quiet", "-b", "feat/a", str(path))
    git_repo.commit("a", {"a.txt": "a\n"}, cwd=path)
    assert holds_work(git_repo.path, path, abandoned=True) is None
    (path / "scratch.txt").write_text("x\n")
    assert holds_work(git_repo.path, path, abandoned=True) == "1 untracked file"


def test_detached_checkout_commits_are_named_as_such(git_repo: Any, tmp_path: Path) -> None:
    path = tmp_path / "wt"
    git_repo.git("worktree", "add", "--quiet", "--detach", str(path))
    sha = git_repo.commit("a", {"a.txt": "a\n"}, cwd=path)

    assert holds_work(git_repo.path, path) == f"not integrated: commit {sha[:7]} exists only on this detached checkout"


# --- the ladder ---


def test_full_ladder_exits_closes_and_removes_a_merged_worktree(world: Any) -> None:
    path = add_worker(world, "feature-a", S.ACCEPTED, pane="w1", worktree=True, commit=True)
    world.repo.git("merge", "--quiet", "--no-ff", "-m", "merge", "feat/feature-a")

    result = retire(world.engine, run_of(world))

    assert render_retire(result) == (
        f"Retire {RUN}\n"
        "feature-a (feature-a): retired\n"
        "  agent w1:p2: exited\n"
        "  pane w1:p2: closed\n"
        f"  worktree {path}: removed\n"
    )
    assert calls(world.herdr) == [("send-text", "w1:p2", "/exit"), ("send-keys", "w1:p2", "Enter"), ("pane-close", "w1:p2")]
    assert path is not None and not path.exists()
    assert world.repo.git("branch", "--list", "feat/feature-a") == "feat/feature-a"
    assert world.engine.ledger.get_worker(RUN, "feature-a").state is S.RETIRED
    assert [(e.kind, e.request["via"], e.status.value) for e in world.engine.ledger.list_effects(RUN) if e.kind == "worktree_remove"] == [
        ("worktree_remove", "git", "confirmed")
    ]


def test_retire_says_each_step_as_it_goes_so_a_long_ladder_never_looks_hung(world: Any) -> None:
    merged = add_worker(world, "feature-a", S.ACCEPTED, pane="w1", worktree=True, commit=True)
    world.repo.git("merge", "--quiet", "--no-ff", "-m", "merge", "feat/feature-a")
    add_worker(world, "feature-b", S.FAILED, pane="w1")
    agent(world, "w1:p3").exits = False
    add_worker(world, "feature-c", S.ACCEPTED, pane="w1")
    said: list[str] = []

    result = retire(world.engine, run_of(world), keep=["feature-c"], exit_timeout_s=2, say=said.append)

    # Kept on request is no ladder: two workers are retired, each named once its agent and pane are dealt with.
    assert said == [
        "retiring 2 workers: asking each agent to exit, then closing panes and removing worktrees",
        "feature-a: agent exited, pane closed (1 of 2)",
        "feature-b: agent kept (2 of 2)",
        "retiring: removing the worktrees that hold no work",
    ]
    assert [(w.task, w.outcome) for w in result.workers] == [("feature-a", "retired"), ("feature-b", "retained"), ("feature-c", "retained")]
    assert merged is not None and not merged.exists()


def test_retire_with_nothing_to_ladder_says_nothing(world: Any) -> None:
    add_worker(world, "feature-a", S.ACCEPTED, pane="w1")
    said: list[str] = []

    retire(world.engine, run_of(world), keep=["feature-a"], say=said.append)

    assert said == []


def test_unmerged_worktree_is_kept_and_the_worker_retained(world: Any) -> None:
    path = add_worker(world, "feature-a", S.ACCEPTED, pane="w1", worktree=True, commit=True)
    assert path is not None
    sha = world.repo.head(cwd=path)[:7]

    result = retire(world.engine, run_of(world))

    assert render_retire(result) == (
        f"Retire {RUN}\n"
        f"feature-a (feature-a): retained: worktree {path}: not integrated: commit {sha} exists only on feat/feature-a\n"
        "  agent w1:p2: exited\n"
        "  pane w1:p2: closed\n"
        f"  worktree {path}: kept (not integrated: commit {sha} exists only on feat/feature-a)\n"
    )
    assert path.exists()
    assert world.engine.ledger.get_worker(RUN, "feature-a").state is S.RETAINED
    facts = [e.detail for e in world.engine.ledger.events(RUN, task_label="feature-a") if e.kind == "retained"]
    assert facts == [{"item": str(path), "what": "worktree", "reason": f"not integrated: commit {sha} exists only on feat/feature-a"}]


def test_retained_worker_is_retired_once_its_work_is_merged(world: Any) -> None:
    path = add_worker(world, "feature-a", S.ACCEPTED, pane="w1", worktree=True, commit=True)
    retire(world.engine, run_of(world))
    world.repo.git("merge", "--quiet", "--no-ff", "-m", "merge", "feat/feature-a")

    again = retire(world.engine, run_of(world))

    assert render_retire(again) == (
        f"Retire {RUN}\n"
        "feature-a (feature-a): retired\n"
        "  pane w1:p2: gone\n"
        f"  worktree {path}: removed\n"
    )


def test_live_worker_is_not_retired_and_nothing_is_touched(world: Any) -> None:
    add_worker(world, "feature-a", S.WORKING, pane="w1")

    result = retire(world.engine, run_of(world))

    assert render_retire(result) == (
        f"Retire {RUN}\n"
        "feature-a (feature-a): not retired: still working: record its report and disposition first, or --abandon it with a reason\n"
    )
    assert calls(world.herdr) == []
    assert world.engine.ledger.get_worker(RUN, "feature-a").state is S.WORKING


def test_kept_worker_is_retained_without_touching_its_pane(world: Any) -> None:
    add_worker(world, "feature-a", S.ACCEPTED, pane="w1")

    result = retire(world.engine, run_of(world), keep=["feature-a"])

    assert render_retire(result) == f"Retire {RUN}\nfeature-a (feature-a): retained: kept on request\n"
    assert calls(world.herdr) == []
    assert world.engine.ledger.get_worker(RUN, "feature-a").state is S.RETAINED


def test_agent_that_does_not_exit_keeps_its_pane_after_a_bounded_wait(world: Any) -> None:
    add_worker(world, "feature-a", S.FAILED, pane="w1")
    agent(world, "w1:p2").exits = False

    result = retire(world.engine, run_of(world), exit_timeout_s=2)

    assert render_retire(result) == (
        f"Retire {RUN}\n"
        "feature-a (feature-a): retained: pane w1:p2: agent did not exit within 2s of /exit\n"
        "  agent w1:p2: kept (agent did not exit within 2s of /exit)\n"
    )
    assert ("pane-close", "w1:p2") not in calls(world.herdr)
    assert world.engine.clock.slept == [0.25] * 8  # type: ignore[attr-defined]


def test_working_agent_gets_no_exit_command(world: Any) -> None:
    add_worker(world, "feature-a", S.ACCEPTED, pane="w1")
    world.herdr.set_status("feature-a", "working")

    result = retire(world.engine, run_of(world), exit_timeout_s=2)

    assert result.workers[0].reason == "pane w1:p2: agent is still working after 2s; /exit not sent"
    assert calls(world.herdr) == []


def test_an_accepted_worker_finishing_its_turn_is_let_come_to_rest_then_exited(world: Any) -> None:
    # A worker sends its result from inside its turn: a quick verification can accept it before its agent is idle.
    add_worker(world, "feature-a", S.ACCEPTED, pane="w1")
    world.herdr.set_status("feature-a", "working")
    agent(world, "w1:p2").rests_after = 3

    result = retire(world.engine, run_of(world))

    assert render_retire(result) == (
        f"Retire {RUN}\n"
        "feature-a (feature-a): retired\n"
        "  agent w1:p2: exited\n"
        "  pane w1:p2: closed\n"
    )
    assert calls(world.herdr) == [("send-text", "w1:p2", "/exit"), ("send-keys", "w1:p2", "Enter"), ("pane-close", "w1:p2")]


def test_a_failed_worker_still_working_gets_one_stop_then_exits(world: Any) -> None:
    add_worker(world, "feature-a", S.FAILED, pane="w1")
    world.herdr.set_status("feature-a", "working")

    result = retire(world.engine, run_of(world))

    assert render_retire(result) == (
        f"Retire {RUN}\n"
        "feature-a (feature-a): retired\n"
        "  agent w1:p2: stopped\n"
        "  agent w1:p2: exited\n"
        "  pane w1:p2: closed\n"
    )
    assert calls(world.herdr)[0] == (
        "agent-prompt", "w1:p2", f"[herdr-orchestration run={RUN} task=feature-a from=w1:p1 kind=stop reply-to=w1:p1]"
    )


def test_a_failed_worker_that_ignores_the_stop_is_kept(world: Any) -> None:
    add_worker(world, "feature-a", S.FAILED, pane="w1")
    world.herdr.set_status("feature-a", "working")
    agent(world, "w1:p2").stops = False

    result = retire(world.engine, run_of(world), exit_timeout_s=1)

    assert result.workers[0].reason == "pane w1:p2: agent is still working 1s after a stop; /exit not sent"
    assert [call[0] for call in calls(world.herdr)] == ["agent-prompt"]


def test_confirmation_required_stops_the_ladder(world: Any) -> None:
    add_worker(world, "feature-a", S.ACCEPTED, pane="new")
    world.herdr.fail_next("pane close", "confirmation_required", "closing this pane would close a worktree group")

    result = retire(world.engine, run_of(world))

    assert render_retire(result) == (
        f"Retire {RUN}\n"
        "feature-a (feature-a): retained: pane w2:p1: pane close needs confirmation (it would close a worktree group); the ladder stops here\n"
        "  agent w2:p1: exited\n"
        "  pane w2:p1: kept (pane close needs confirmation (it would close a worktree group); the ladder stops here)\n"
    )
    assert calls(world.herdr)[-1] == ("pane-close", "w2:p1")
    assert "w2:p1" in world.herdr.panes


def test_pane_not_created_by_the_run_is_left_open(world: Any) -> None:
    add_worker(world, "feature-a", S.ACCEPTED, pane="w1", created_pane=False)

    result = retire(world.engine, run_of(world))

    assert render_retire(result) == (
        f"Retire {RUN}\n"
        "feature-a (feature-a): retired\n"
        "  agent w1:p2: exited\n"
        "  pane w1:p2: untouched (not created by this run)\n"
    )
    assert "w1:p2" in world.herdr.panes


def test_a_checkout_is_never_removed_while_a_pane_is_open_in_it(world: Any) -> None:
    # The ledger does not know the pane as the run's (as after a crash that lost the record): it stays, and so
    # does the checkout it is open in.
    path = add_worker(world, "feature-a", S.ACCEPTED, pane="w1", created_pane=False, worktree=True)
    world.herdr.pane("w1:p2").cwd = str(path)

    result = retire(world.engine, run_of(world))

    assert render_retire(result) == (
        f"Retire {RUN}\n"
        f"feature-a (feature-a): retained: worktree {path}: pane w1:p2 is still open in it\n"
        "  agent w1:p2: exited\n"
        "  pane w1:p2: untouched (not created by this run)\n"
        f"  worktree {path}: kept (pane w1:p2 is still open in it)\n"
    )
    assert path is not None and path.exists()


def test_sibling_checkout_waits_for_its_last_worker(world: Any) -> None:
    path = add_worker(world, "feature-a", S.ACCEPTED, pane="w1", worktree=True)
    add_worker(world, "feature-b", S.WORKING, pane="w1", worktree_path=str(path))

    first = retire(world.engine, run_of(world), tasks=["feature-a"])

    assert render_retire(first) == (
        f"Retire {RUN}\n"
        "feature-a (feature-a): retired\n"
        "  agent w1:p2: exited\n"
        "  pane w1:p2: closed\n"
        f"  worktree {path}: kept (still used by feature-b (working))\n"
    )
    assert path is not None and path.exists()


def test_abandoned_live_worker_is_superseded_then_retired_and_its_branch_kept(world: Any) -> None:
    path = add_worker(world, "feature-a", S.WORKING, pane="w1", worktree=True, commit=True)

    result = retire(world.engine, run_of(world), abandon={"feature-a": "approach dropped"})

    assert (result.workers[0].before, result.workers[0].outcome) == (S.WORKING, "retired")
    assert path is not None and not path.exists()
    assert world.repo.git("branch", "--list", "feat/feature-a") == "feat/feature-a"
    worker = world.engine.ledger.get_worker(RUN, "feature-a")
    assert (worker.state, worker.final_disposition) == (S.RETIRED, S.SUPERSEDED)


def test_empty_side_effect_workspace_is_closed_by_its_pane_and_a_busy_one_kept(world: Any) -> None:
    empty, busy, gone = (world.herdr.workspace_create(cwd=world.repo.path).workspace.workspace_id for _ in range(3))
    world.herdr.pane_split(f"{busy}:p1", direction="right")
    world.herdr.workspace_close(gone)
    assert (empty, busy, gone) == ("w2", "w3", "w4")
    add_worker(world, "feature-a", S.ACCEPTED, pane="w1", created_workspace_ids=(empty, busy, gone))

    result = retire(world.engine, run_of(world))

    assert render_retire(result) == (
        f"Retire {RUN}\n"
        "feature-a (feature-a): retired\n"
        "  agent w1:p2: exited\n"
        "  pane w1:p2: closed\n"
        "  workspace w2: closed\n"
        "  workspace w3: kept (not empty (2 panes))\n"
        "  workspace w4: gone\n"
    )
    assert calls(world.herdr)[-1] == ("pane-close", "w2:p1")


def test_unknown_task_or_abandon_without_reason_changes_nothing(world: Any) -> None:
    add_worker(world, "feature-a", S.ACCEPTED, pane="w1")
    before = world.engine.ledger.events(RUN)

    with pytest.raises(OrchError, match=f"^run {RUN} has no task nope$"):
        retire(world.engine, run_of(world), tasks=["feature-a", "nope"])
    with pytest.raises(OrchError, match="^abandoning feature-a needs a reason"):
        retire(world.engine, run_of(world), abandon={"feature-a": " "})
    with pytest.raises(OrchError, match="^task feature-a is both kept and abandoned; choose one$"):
        retire(world.engine, run_of(world), keep=["feature-a"], abandon={"feature-a": "x"})

    assert world.engine.ledger.events(RUN) == before and calls(world.herdr) == []


def test_result_json_shape(world: Any) -> None:
    add_worker(world, "feature-a", S.ACCEPTED, pane="w1")

    result = retire(world.engine, run_of(world))

    assert RetireResult.model_validate(result.model_dump(mode="json")).model_dump(mode="json") == {
        "run_id": RUN,
        "workers": [{
            "task": "feature-a", "name": "feature-a", "before": "accepted", "state": "retired", "outcome": "retired", "reason": None,
            "items": [{"kind": "agent", "id": "w1:p2", "action": "exited", "reason": None},
                      {"kind": "pane", "id": "w1:p2", "action": "closed", "reason": None}],
        }],
        "workspaces": [],
        "integration": None,
    }  # fmt: skip


def test_run_level_leftover_workspace_closes_once_no_worker_is_live(world: Any) -> None:
    add_worker(world, "feature-a", S.ACCEPTED, pane="w1")
    add_worker(world, "feature-b", S.WORKING, pane="w1")
    assert new_pane(world, "new") == "w2:p1"
    world.engine.ledger.update_run(RUN, created_workspace_ids=("w2", "w1"))

    first = retire(world.engine, run_of(world), tasks=["feature-a"])
    second = retire(world.engine, run_of(world), abandon={"feature-b": "no longer needed"})

    assert first.workspaces == ()
    assert render_retire(second) == (
        f"Retire {RUN}\n"
        "feature-a (feature-a): already retired\n"
        "feature-b (feature-b): retired\n"
        "  agent w1:p3: exited\n"
        "  pane w1:p3: closed\n"
        "Run workspaces:\n"
        "  workspace w2: closed\n"
    )
    assert "w1:p1" not in [c[1] for c in calls(world.herdr)]


def test_cli_abandon_without_reason_is_one_line() -> None:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "orchestrator", "retire", "--abandon", "feature-a"], capture_output=True, text=True, timeout=60)

    assert (done.returncode, done.stdout, done.stderr) == (1, "", "orch: --abandon needs --reason: say why the work is given up\n")


def test_workers_waiting_on_the_person_keep_their_agent_unless_abandoned(world: Any) -> None:
    ledger = world.engine.ledger
    for task in ("token", "ask", "outside"):
        add_worker(world, task, S.WORKING, pane="w1")
    ledger.transition(RUN, "token", S.WORKING, S.BLOCKED, cause={"inbox_id": 1}, pending_question="Need a token for the staging API.")
    ledger.transition(RUN, "ask", S.WORKING, S.QUESTION, cause={"inbox_id": 2}, pending_question="Formal or casual?")
    for step in (S.RESULT, S.VERIFYING):
        ledger.transition(RUN, "outside", ledger.get_worker(RUN, "outside").state, step, cause={"test": True})
    ledger.transition(RUN, "outside", S.VERIFYING, S.BLOCKED, cause={"phase": "verify", "disposition": "blocked", "reasons": ["edited outside its claim: README.md"]})

    result = retire(world.engine, run_of(world))

    assert render_retire(result) == (
        f"Retire {RUN}\n"
        f"token (token): kept: waits on the person (a block: Need a token for the staging API.); decide with `orch answer --run {RUN} token -- TEXT`, "
        f"or give it up with `orch retire --run {RUN} --abandon token --reason TEXT`\n"
        f"ask (ask): kept: waits on the person (a question: Formal or casual?); decide with `orch answer --run {RUN} ask -- TEXT`, "
        f"or give it up with `orch retire --run {RUN} --abandon ask --reason TEXT`\n"
        f"outside (outside): kept: waits on the person (a verification block: edited outside its claim: README.md); decide with "
        f"`orch send --run {RUN} outside --kind follow-up -- TEXT` or `orch verify --run {RUN} --supersede outside --reason TEXT`, "
        f"or give it up with `orch retire --run {RUN} --abandon outside --reason TEXT`\n"
    )
    assert [w.state for w in ledger.list_workers(RUN)] == [S.BLOCKED, S.QUESTION, S.BLOCKED]
    assert all(world.herdr.pane(w.pane_id or "").agent is not None for w in ledger.list_workers(RUN)) and calls(world.herdr) == []

    abandoned = retire(world.engine, run_of(world), tasks=["token"], abandon={"token": "no token will be issued"})
    assert [(w.task, w.outcome) for w in abandoned.workers] == [("token", "retired")]


def test_a_shared_checkout_names_each_commit_under_the_worker_that_made_it(git_repo: Any, tmp_path: Path) -> None:
    path = tmp_path / "wt"
    git_repo.git("worktree", "add", "--quiet", "-b", "feat/cli-help", str(path))
    help_first = git_repo.commit("cli-help: text\n\nOrch-Task: cli-help", {"src/cli/help.txt": "x\n"}, cwd=path)
    tests_own = git_repo.commit("cli-tests: test\n\nOrch-Task: cli-tests", {"tests/cli/t.txt": "x\n"}, cwd=path)
    help_second = git_repo.commit("cli-help: more\n\nOrch-Task: cli-help", {"src/cli/more.txt": "x\n"}, cwd=path)
    stray = git_repo.commit("no trailer", {"stray.txt": "x\n"}, cwd=path)

    reason = holds_work(git_repo.path, path, tasks=("cli-help", "cli-tests"))

    # A rejected sibling's commit used to be counted under its owner's worktree ("4 commits exist only on feat/cli-help").
    assert reason == (
        f"not integrated: on feat/cli-help only, 2 commits by cli-help ({help_second[:7]} and 1 more), commit {tests_own[:7]} by cli-tests, "
        f"commit {stray[:7]} with no Orch-Task trailer of theirs"
    )
    assert help_first != help_second


def test_a_shared_checkout_is_listed_once_under_the_worker_that_created_it(world: Any) -> None:
    # Both workers' items used to list "worktree …: removed", as if it had been removed twice.
    path = add_worker(world, "feature-a", S.ACCEPTED, pane="w1", worktree=True)
    add_worker(world, "feature-b", S.ACCEPTED, pane="w1", worktree_path=str(path), branch="feat/feature-a")

    result = retire(world.engine, run_of(world))

    assert render_retire(result) == (
        f"Retire {RUN}\n"
        "feature-a (feature-a): retired\n"
        "  agent w1:p2: exited\n"
        "  pane w1:p2: closed\n"
        f"  worktree {path}: removed\n"
        "feature-b (feature-b): retired\n"
        "  agent w1:p3: exited\n"
        "  pane w1:p3: closed\n"
        f"  worktree {path}: shared (shared with feature-a: see feature-a)\n"
    )
    assert path is not None and not path.exists()


def test_a_workspace_herdr_closed_at_provision_is_said_so(world: Any) -> None:
    moved_out, other = (world.herdr.workspace_create(cwd=world.repo.path).workspace.workspace_id for _ in range(2))
    world.herdr.workspace_close(moved_out)
    world.herdr.workspace_close(other)
    add_worker(world, "feature-a", S.ACCEPTED, pane="w1", created_workspace_ids=(moved_out, other))
    moved = world.engine.ledger.intend(RUN, "feature-a", "pane_move", "pane_move:x", {"pane": f"{moved_out}:p1", "from": moved_out, "workspace": "w1", "label": "a"})
    world.engine.ledger.confirm(moved, {"pane_id": "w1:p2", "tab_id": "w1:t2", "workspace_id": "w1", "closed_workspace_id": moved_out})

    result = retire(world.engine, run_of(world))

    assert render_retire(result).splitlines()[-2:] == [f"  workspace {moved_out}: closed (by herdr when its pane moved out)", f"  workspace {other}: gone"]


def test_the_worktrees_folder_the_run_created_goes_once_empty_and_never_otherwise(world: Any) -> None:
    # An empty `<repo>.worktrees/` used to be left beside the checkout after every worktree was removed.
    path = add_worker(world, "feature-a", S.ACCEPTED, pane="w1", worktree=True)
    kept = add_worker(world, "feature-b", S.ACCEPTED, pane="w1", worktree=True, commit=True)
    assert path is not None and kept is not None
    folder = path.parent
    world.engine.ledger.record_fact(RUN, "worktrees_folder", detail={"path": str(folder)})

    retire(world.engine, run_of(world))
    assert sorted(p.name for p in folder.iterdir()) == ["feature-b"]  # feature-b's checkout holds work: the folder stays

    world.repo.git("worktree", "remove", str(kept))  # the person took care of it
    retire(world.engine, run_of(world))
    assert not folder.exists()


def test_a_worktrees_folder_the_run_did_not_create_stays_even_when_empty(world: Any) -> None:
    path = add_worker(world, "feature-a", S.ACCEPTED, pane="w1", worktree=True)
    assert path is not None

    retire(world.engine, run_of(world))

    assert not path.exists() and path.parent.is_dir()


def test_a_worker_on_another_host_is_retired_through_its_hosts_herdr_and_a_local_pane_of_the_same_id_is_untouched(world: Any) -> None:
    world.engine.run_dir(RUN).mkdir(parents=True)
    (world.engine.run_dir(RUN) / "plan.toml").write_text(
        'organization = "acme"\nrepo = "widgets"\nbase = "main"\n\n[hosts.buildbox]\nmachine = "buildbox"\nssh = "me@buildbox"\n'
        'checkout = "/srv/acme/widgets"\n\n[[workers]]\ntask = "feature-r"\nobjective = "o"\ndeliverable = "d"\nbranch = "feat/r"\n'
        'claim = ["src/r/**"]\nhost = "buildbox"\n'
    )
    box = FakeHerdr(cwd=world.tmp)
    world.engine.host_herdrs["buildbox"] = box
    # Every herdr numbers its panes from w1: the build box's worker and a person's local agent both sit in w1:p2.
    remote = str(box.tab_create(workspace="w1").root_pane.pane_id)
    box.add_agent(remote, "feature-r", "codex")
    box.pane(remote).screen = "› \n"
    local = new_pane(world)
    world.herdr.add_agent(local, "bystander", "codex")
    add_worker(world, "feature-r", S.ACCEPTED, pane_id=remote, created_pane_ids=(remote,), host="buildbox")
    box.calls.clear()

    result = retire(world.engine, run_of(world))

    assert (remote, local) == ("w1:p2", "w1:p2")
    assert render_retire(result) == f"Retire {RUN}\nfeature-r (feature-r): retired\n  agent w1:p2: exited\n  pane w1:p2: closed\n"
    assert calls(box) == [("send-text", "w1:p2", "/exit"), ("send-keys", "w1:p2", "Enter"), ("pane-close", "w1:p2")]
    assert calls(world.herdr) == [] and world.herdr.pane(local).agent is not None
    closes = [e.request for e in world.engine.ledger.list_effects(RUN) if e.kind == "pane_close"]
    assert closes == [{"pane": "w1:p2", "host": "buildbox"}]
