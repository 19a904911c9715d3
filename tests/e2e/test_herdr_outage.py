"""herdr down, hung and back: an outage stops the run interrupted (exit 3) and fails no worker; resume after herdr
restarted (real herdr keeps no panes) reads the world back: a worker that never got its packet starts again, one that
did is failed with what it saved."""

from __future__ import annotations

import io
import json
import re
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from orchestrator.dispatch import dispatch_key
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
    """Stop the simulated herdr server just before orch's first `herdr PATH` call (the call then finds no server).

    Calls are made one at a time meanwhile: a simulated call still running while the server tears its panes down
    would read them half gone (a real herdr's client just loses its connection)."""
    real, stopped, one = engine.herdr.runner, [], threading.Lock()

    def runner(argv: Any, *, env: Any, timeout: float) -> Any:
        with one:
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


def test_herdr_down_during_provisioning_interrupts_the_run_and_resume_after_its_restart_starts_each_worker_again_and_ends_pass(make_world: Any, tmp_path: Path) -> None:
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

    # Issue 21: each worker whose pane herdr lost was failed for good, though no packet had reached it (nothing of its
    # work could be lost), and the run ended FAIL. The rule: never sent its packet -> started again in its own
    # worktree (kept, reused), under new effect keys; the run ends as an uninterrupted one would.
    assert resumed.returncode == 0, resumed.stderr
    ledger = world.engine().ledger
    with_panes = [w.task_label for w in workers if w.pane_id is not None]
    said = [line for line in resumed.stderr.splitlines() if ": started again: " in line]
    assert with_panes and len(said) >= len(with_panes), resumed.stderr
    for line in said:
        assert re.search(
            r"(\S+): started again: (its pane \S+ (is gone|now names a pane in \S+) \(herdr restarted, or it was closed, while orch was stopped\)|"
            r"herdr no longer has the run's workspace \S+ \(herdr restarted while orch was stopped\)|"
            # a sibling whose split was asked of its owner's pane, which herdr lost with the rest
            r"the pane \S+ it was being split from is gone \(herdr restarted while orch was stopped\)) while it was (provisioning|ready), "
            r"before any packet was sent, so nothing of its work can be lost; its worktree \S+ is kept and reused$", line), line
    after = {w.task_label: w for w in ledger.list_workers(run_id)}
    assert {t: w.state for t, w in after.items() if w.state not in (WorkerState.RETIRED, WorkerState.RETAINED)} == {}
    assert {t: str(w.final_disposition) for t, w in after.items()} == dict.fromkeys(after, "accepted")
    for task in with_panes:
        assert [e.kind for e in ledger.events(run_id, task_label=task) if e.kind == "restarted"] == ["restarted"]
        assert after[task].worktree_path == next(w.worktree_path for w in workers if w.task_label == task)
    # One packet per worker, never a second.
    assert sorted(e.key for e in ledger.list_effects(run_id) if e.kind == "agent_prompt") == sorted(dispatch_key(t) for t in after)
    shown = json.loads(world.orch("report", "--run", run_id, "--json").stdout)
    assert shown["verdict"] == "PASS"
    # No pane that no longer exists is reported as retained (kept open for you): herdr lost them.
    assert [(i["what"], i["id"], i["reason"]) for i in shown["retired"] if i["what"] == "pane" and i["status"] == "retained"] == []
    assert ledger.get_run(run_id).status is RunStatus.FINISHED
    assert ledger.in_flight(run_id) == []


def _failure(world: Any, run_id: str, task: str) -> str:
    event = [e for e in world.engine().ledger.events(run_id, task_label=task) if e.to_state == WorkerState.FAILED][-1]
    return str(event.detail["cause"].get("reason") or event.detail["cause"].get("error"))


QUESTION_SCENARIO = """
[[task.pages]]
do = "question"
message = "Which page size should the docs show?"

[[task.pages]]
do = "write"
path = "docs/pages.md"
content = "{answer}\\n"

[[task.pages]]
do = "commit"
message = "docs: page size"

[[task.pages]]
do = "result"
"""

ONE_WITH_ANSWER = """
organization = "acme"
repo = "widgets"
base = "main"

[defaults]
checkin_interval_s = 1

[[workers]]
task = "pages"
objective = "Document the page size."
deliverable = "docs/pages.md committed on docs/pages."
branch = "docs/pages"
claim = ["docs/"]
verify = ["ls docs/"]

[[workers.answers]]
when = "page size"
answer = "50 by default."
"""


def at_second_prompt(world: Any, engine: Any, then: Any) -> list[str]:
    """Run ``then()`` just before orch's second `herdr agent prompt` (the first is the packet: the second is the
    plan's answer to the worker's question)."""
    real, seen = engine.herdr.runner, []

    def runner(argv: Any, *, env: Any, timeout: float) -> Any:
        if command(argv) == "agent prompt":
            seen.append("agent prompt")
            if len(seen) == 2:
                then()
        return real(argv, env=env, timeout=timeout)

    engine.herdr.runner = runner
    return seen


def test_herdr_down_during_observation_interrupts_the_run_and_resume_after_its_restart_fails_the_worker_with_what_it_saved(make_world: Any) -> None:
    world = make_world()
    world.write_scenarios(QUESTION_SCENARIO)
    engine = world.engine()
    engine.controller = "run"
    at_second_prompt(world, engine, world.sim.stop)

    with pytest.raises(HerdrDown) as raised:
        run_plan(engine, world.write_plan(ONE_WITH_ANSWER), Progress(io.StringIO(), live=False), interval_s=0.3)

    match = DOWN.fullmatch(raised.value.message)
    assert match is not None and match[2] == "observe", raised.value.message
    run_id = match[1]
    (pages,) = engine.ledger.list_workers(run_id)
    assert pages.state is WorkerState.QUESTION  # waiting for the plan's answer: nothing failed for the outage
    engine.close()

    restart(world)
    resumed = world.orch("resume", run_id, "--interval", "0.3")

    assert resumed.returncode == 11, resumed.stderr
    assert re.fullmatch(
        r"its pane \S+ is gone \(herdr restarted, or it was closed, while orch was stopped\) while it was question; "
        r"saved: no commits on docs/pages, the worktree \S+ \(kept\)", _failure(world, run_id, "pages"))
    assert world.engine().ledger.get_run(run_id).status is RunStatus.FINISHED


def test_an_answer_owed_to_an_agent_herdr_lost_in_a_restart_ends_with_the_reason_instead_of_looping(make_world: Any) -> None:
    world = make_world()
    world.write_scenarios(QUESTION_SCENARIO)
    engine = world.engine()
    engine.controller = "run"
    # herdr restarts (and loses every pane) just as orch sends the plan's answer; orch itself stays up.
    at_second_prompt(world, engine, lambda: (world.sim.stop(), restart(world)))

    outcome = run_plan(engine, world.write_plan(ONE_WITH_ANSWER), Progress(io.StringIO(), live=False), interval_s=0.3)

    assert (outcome.finished, outcome.report.verdict) == (True, "FAIL")
    reason = _failure(world, outcome.run_id, "pages")
    # Whichever notices first: the owed answer finding no agent, or the check-in finding the worker's pane gone
    # (a restarted herdr hands the controller's pane id out again, so it reads as a pane closed outside orch).
    owed = (r"its agent is gone \(no agent at \S+: .*\), so the plan's answer to 'Which page size should the docs show\?' cannot reach it; "
            r"its checkout \S+ is kept")
    closed = r"its pane \S+ was closed outside orch \(by hand or by another tool\) while it was question; saved: no commits on docs/pages, .*"
    assert re.fullmatch(owed, reason) or re.fullmatch(closed, reason), reason


ONE = """
organization = "acme"
repo = "widgets"
base = "main"

[defaults]
checkin_interval_s = 1

[[workers]]
task = "pages"
objective = "Document the page size."
deliverable = "docs/ committed on docs/pages."
branch = "docs/pages"
claim = ["docs/"]
verify = ["ls docs/"]
"""

HUNG = re.compile(
    r"herdr is not answering: herdr ([a-z -]+): no answer within 3s; killed; run (\S+) stopped during (\w+), no worker was failed for it, "
    r"workers and evidence are in place: `orch resume \2` once it is back"
)


def hang_at(world: Any, engine: Any, path: str, *, after: str | None) -> list[str]:
    """herdr hangs at orch's first `herdr PATH` call once an `herdr AFTER` call was made (at once without ``after``):
    the simulator's hang fault, a server that accepts the connection and never answers."""
    real, seen, hung = engine.herdr.runner, [], []

    def runner(argv: Any, *, env: Any, timeout: float) -> Any:
        words = command(argv)
        if after is None or words == after:
            seen.append(words)
        if seen and words == path and not hung:
            hung.append(path)
            world.sim.add_fault(path, hang=True)
        return real(argv, env=env, timeout=timeout)

    engine.herdr.runner = runner
    return hung


@pytest.mark.parametrize(("path", "after", "stage"), [
    ("pane read", None, "schedule"),  # provisioning: the agent's ready sign on screen
    ("agent list", "agent prompt", "observe"),  # a check-in
    ("agent read", "agent prompt", "observe"),  # a check-in's screen read
])
def test_a_herdr_that_hangs_in_any_phase_interrupts_the_run_fails_no_worker_and_resume_once_it_answers_ends_pass(
    make_world: Any, path: str, after: str | None, stage: str,
) -> None:
    # Issue 21: a call that ran to orch's time limit was news about one worker (left in provisioning for good, its
    # screen taken as unreadable) or a check-in without news, so a hung herdr was checked in on forever or the run
    # finished without the worker. Now it is an outage like a stopped server: interrupted, exit 3, nothing failed.
    world = make_world()
    engine = world.engine()
    engine.controller = "run"
    engine.herdr.timeout_s = 3.0
    hung = hang_at(world, engine, path, after=after)

    with pytest.raises(HerdrDown) as raised:
        run_plan(engine, world.write_plan(ONE), Progress(io.StringIO(), live=False), interval_s=0.3)

    assert hung == [path]
    match = HUNG.fullmatch(raised.value.message)
    assert match is not None and (match[1], match[3]) == (path, stage), raised.value.message
    assert raised.value.exit_code == 3
    run_id = match[2]
    run = engine.ledger.get_run(run_id)
    assert (run.status, run.stopped_at) == (RunStatus.INTERRUPTED, f"herdr is not answering during {stage}")
    assert [e for e in engine.ledger.events(run_id) if e.to_state is WorkerState.FAILED] == []
    engine.close()

    # herdr answers again (the hang was one call): resume settles what was in flight and the run ends PASS.
    resumed = world.orch("resume", run_id, "--interval", "0.3")

    assert resumed.returncode == 0, resumed.stderr
    ledger = world.engine().ledger
    assert ledger.get_run(run_id).status is RunStatus.FINISHED
    # Nothing was sent twice: one packet, made under its first key.
    assert [e.key for e in ledger.list_effects(run_id) if e.kind == "agent_prompt"] == [dispatch_key("pages")]


def test_a_herdr_outage_in_orch_wait_interrupts_the_run_fails_no_worker_and_names_the_wait_that_goes_on(make_world: Any) -> None:
    # Issue 21: the agent controller's `orch wait` let an outage out as the raw boundary line (exit 3) and left the
    # run `active`: nothing told the controller to stop. Now it ends as `orch run` does, with the one next step.
    world = make_world()
    plan = world.write_plan(ONE)
    pre = world.orch("preflight", str(plan), "--json")
    run_id = json.loads(pre.stdout)["run_id"]
    for step in ("provision", "dispatch"):
        done = world.orch(step, "--run", run_id, "--json")
        assert done.returncode == 0, done.stderr
    # Every `herdr agent list` client is killed before it answers (three tries of a read): herdr is not answering.
    world.sim.add_fault("agent list", die="before", times=3)

    waited = world.orch("wait", "--run", run_id, "--json", "--timeout", "30")

    assert waited.returncode == 3, waited.stderr
    failure = json.loads(waited.stdout)
    line = (
        f"herdr is not answering: herdr agent list: the herdr process died of signal 9; its outcome is unknown; run {run_id} stopped during "
        f"orch wait, no worker was failed for it, workers and evidence are in place: `orch wait --run {run_id}` once it is back"
    )
    assert (failure["error"], failure["problems"], waited.stderr) == ("HerdrDown", [line], f"orch: {line}\n")
    assert failure["next"] == [{"do": "resume", "task": None, "command": f"orch wait --run {run_id} --json",
                                "why": "herdr is down or not answering: tell the user and stop; run this once they say herdr is back"}]  # fmt: skip
    engine = world.engine()
    run = engine.ledger.get_run(run_id)
    assert (run.status, run.stopped_at) == (RunStatus.INTERRUPTED, "herdr is not answering during orch wait")
    assert [e for e in engine.ledger.events(run_id) if e.to_state is WorkerState.FAILED] == []
    engine.close()

    # herdr answers again: the command next[] named goes on.
    again = world.orch("wait", "--run", run_id, "--json", "--timeout", "30")
    assert again.returncode == 0, again.stderr


TWO = """
organization = "acme"
repo = "widgets"
base = "main"

[defaults]
checkin_interval_s = 1

[[workers]]
task = "pages"
objective = "Document the page size."
deliverable = "docs/ committed on docs/pages."
branch = "docs/pages"
claim = ["docs/"]
verify = ["ls docs/"]

[[workers]]
task = "api"
objective = "Document the API."
deliverable = "api/ committed on docs/api."
branch = "docs/api"
claim = ["api/"]
verify = ["ls api/"]
"""

DOOR_DOWN = re.compile(
    r"herdr is down: herdr [a-z -]+: herdr server is not running.*?; run (\S+) stopped during orch (\w+), no worker was failed for it, "
    r"workers and evidence are in place: `orch wait --run \1` once it is back"
)


def _door_stopped(world: Any, done: Any, run_id: str, command: str) -> None:
    """A door command met herdr down: exit 3, one line, the run interrupted, next[] the wait that goes on."""
    assert done.returncode == 3, done.stderr
    # One line (progress lines such as integration's may come before it), no hint, no traceback.
    (line,) = [x for x in done.stderr.splitlines() if x.startswith(("orch: ", "hint: ", "Traceback"))]
    match = DOOR_DOWN.fullmatch(line.removeprefix("orch: "))
    assert match is not None and match.groups() == (run_id, command), line
    assert [s["command"] for s in json.loads(done.stdout)["next"]] == [f"orch wait --run {run_id} --json"]
    status = json.loads(world.orch("status", "--run", run_id, "--json").stdout)
    assert (status["status"], status["stopped_at"]) == ("interrupted", f"herdr is down during orch {command}")


def _wait_to_finish(world: Any, run_id: str, waited: dict[str, Any]) -> dict[str, Any]:
    """Call `orch wait` again while next[] says wait, as the controller does; then `orch finish`."""
    for _ in range(30):
        if [s["do"] for s in waited["next"]] != ["wait"]:
            break
        again = world.orch("wait", "--run", run_id, "--json", "--timeout", "30")
        assert again.returncode == 0, again.stderr
        waited = json.loads(again.stdout)
    assert [s["command"] for s in waited["next"]] == [f"orch finish --run {run_id} --json"], waited["next"]
    finished = world.orch("finish", "--run", run_id, "--json")
    result: dict[str, Any] = json.loads(finished.stdout)
    assert finished.returncode == result["exit_code"], finished.stderr
    return result


def test_the_agent_controller_going_on_after_herdr_restarted_reads_the_world_back_and_starts_again_each_worker_no_packet_reached(make_world: Any) -> None:
    # Issue 21: after a herdr restart the door's `orch wait` (the command the outage named) did not read the world back
    # as `orch resume` does: the ready workers, whose panes herdr lost, were never dispatched, next[] said finish, and the
    # run still showed `interrupted` once the controller went on. Now the door takes the run up by the same rule.
    world = make_world()
    plan = world.write_plan(TWO)
    run_id = json.loads(world.orch("preflight", str(plan), "--json").stdout)["run_id"]
    provisioned = world.orch("provision", "--run", run_id, "--json")
    assert provisioned.returncode == 0, provisioned.stderr
    world.sim.stop()

    _door_stopped(world, world.orch("dispatch", "--run", run_id, "--json"), run_id, "dispatch")
    engine = world.engine()
    before = {w.task_label: w for w in engine.ledger.list_workers(run_id)}
    assert {t: w.state for t, w in before.items()} == dict.fromkeys(before, WorkerState.READY)  # nothing failed for the outage
    engine.close()

    restart(world)
    waited = world.orch("wait", "--run", run_id, "--json", "--timeout", "30")

    assert waited.returncode == 0, waited.stderr
    doc = json.loads(waited.stdout)
    restarted = {o["task"]: o["text"] for o in doc["observations"] if o["what"] == "restarted"}
    assert sorted(restarted) == ["api", "pages"], doc["observations"]
    for task, text in restarted.items():
        assert re.fullmatch(
            rf"its pane {re.escape(str(before[task].pane_id))} (is gone|now names a pane in \S+) \(herdr restarted, or it was closed, while orch was stopped\) "
            rf"while it was ready, before any packet was sent, so nothing of its work can be lost; its worktree \S+ is kept and reused", text), text
    # The controller goes on: the run is active again, not `interrupted`.
    status = json.loads(world.orch("status", "--run", run_id, "--json").stdout)
    assert (status["status"], status["stopped_at"]) == ("active", None)

    finished = _wait_to_finish(world, run_id, doc)

    assert (finished["finished"], finished["report"]["verdict"], finished["exit_code"]) == (True, "PASS", 0)
    ledger = world.engine().ledger
    # One packet per worker, under its first key: nothing was sent twice; nothing is left in flight or open.
    assert sorted(e.key for e in ledger.list_effects(run_id) if e.kind == "agent_prompt") == sorted(dispatch_key(t) for t in before)
    assert ledger.in_flight(run_id) == []
    assert {w.task_label: w.state for w in ledger.list_workers(run_id) if w.state not in (WorkerState.RETIRED, WorkerState.RETAINED)} == {}
    assert [i for i in finished["report"]["retired"] if i["what"] in ("pane", "agent") and i["status"] == "retained"] == []
    assert world.herdr("agent", "list")["result"]["agents"] == []
    assert ledger.get_run(run_id).status is RunStatus.FINISHED


STALL = """
[[task.pages]]
do = "stall"
"""


def test_the_agent_controller_going_on_after_herdr_restarted_fails_a_worker_its_packet_reached_with_what_it_saved(make_world: Any) -> None:
    # The other half of the rule: a worker that had its packet (its agent may have worked) is failed, its pane and
    # what it saved named, its worktree kept; never sent the packet a second time. The wait wakes for the failure.
    world = make_world()
    world.write_scenarios(STALL)
    plan = world.write_plan(ONE)
    run_id = json.loads(world.orch("preflight", str(plan), "--json").stdout)["run_id"]
    for step in ("provision", "dispatch"):
        done = world.orch(step, "--run", run_id, "--json")
        assert done.returncode == 0, done.stderr
    world.sim.stop()

    _door_stopped(world, world.orch("wait", "--run", run_id, "--json", "--timeout", "30"), run_id, "wait")

    restart(world)
    waited = world.orch("wait", "--run", run_id, "--json", "--timeout", "30")

    assert waited.returncode == 0, waited.stderr
    doc = json.loads(waited.stdout)
    assert doc["woke"] == "failed"
    (failed,) = [o for o in doc["observations"] if o["what"] == "failed"]
    assert failed["task"] == "pages"
    assert re.fullmatch(
        r"its pane \S+ (is gone|now names a pane in \S+) \(herdr restarted, or it was closed, while orch was stopped\) while it was (dispatched|working); "
        r"saved: no commits on docs/pages, the worktree \S+ \(kept\)", failed["text"]), failed["text"]
    finished = _wait_to_finish(world, run_id, doc)
    assert (finished["finished"], finished["report"]["verdict"]) == (True, "FAIL")
    ledger = world.engine().ledger
    assert [e.key for e in ledger.list_effects(run_id) if e.kind == "agent_prompt"] == [dispatch_key("pages")]
    assert ledger.in_flight(run_id) == []
    assert [w.state for w in ledger.list_workers(run_id)] in ([WorkerState.RETIRED], [WorkerState.RETAINED])
    assert world.herdr("agent", "list")["result"]["agents"] == []


INTEGRATED = """
organization = "acme"
repo = "widgets"
base = "main"

[defaults]
checkin_interval_s = 1

[integration]
enabled = true
branch = "chore/integrate-outage"
""" + TWO.split('checkin_interval_s = 1\n', 1)[1]

# herdr's reads: a read that gets no answer is an outage (a mutating call's silence is settled by read-back first).
READS = frozenset({"pane get", "pane read", "pane list", "agent get", "agent list", "agent read", "worktree list", "workspace get", "workspace list", "tab get", "tab list"})

STOPPED = re.compile(
    r"herdr is (down|not answering): herdr ([a-z -]+): (herdr server is not running.*?|no answer within \d+s; killed); run (\S+) stopped during retire, "
    r"no worker was failed for it, workers and evidence are in place: `orch resume \4` once it is back"
)


def fault_when(world: Any, engine: Any, monkeypatch: pytest.MonkeyPatch, phase: str, fault: str) -> list[str]:
    """herdr goes down (``fault`` "down": its server stopped) or hangs (the next read it gets is never answered) as
    orch's run enters ``phase`` (integrate or retire)."""
    import orchestrator.run as run_module

    armed: list[str] = []
    hung: list[str] = []
    name = {"integrate": "integrate_run", "retire": "retire"}[phase]
    real_phase = getattr(run_module, name)

    def entered(*args: Any, **kwargs: Any) -> Any:
        if not armed:
            armed.append(phase)
            if fault == "down":
                world.sim.stop()
        return real_phase(*args, **kwargs)

    monkeypatch.setattr(run_module, name, entered)
    real_runner = engine.herdr.runner

    def runner(argv: Any, *, env: Any, timeout: float) -> Any:
        words = command(argv)
        if fault == "hang" and armed and not hung and words in READS:
            hung.append(words)
            world.sim.add_fault(words, hang=True)
        return real_runner(argv, env=env, timeout=timeout)

    engine.herdr.runner = runner
    return hung


def _closes(log: Path) -> Counter[str]:
    """How many times herdr itself closed each pane (its own call log, every client that called it)."""
    found: Counter[str] = Counter()
    for line in log.read_text().splitlines() if log.exists() else []:
        words = json.loads(line)["argv"][1:]
        if words[:1] == ["--session"]:
            words = words[2:]
        if words[:2] == ["pane", "close"]:
            found[words[2]] += 1
    return found


@pytest.mark.parametrize("fault", ["hang", "down"])
@pytest.mark.parametrize("phase", ["integrate", "retire"])
def test_herdr_hung_or_down_while_the_run_integrates_or_retires_interrupts_it_and_resume_finishes_with_nothing_repeated_or_left_open(
    make_world: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, phase: str, fault: str,
) -> None:
    # Issue 21: an outage is proven in every phase, these two included. Integration is git alone, so herdr failing while
    # orch merges is met by retire's first herdr call: the run stops there (`during retire`), the merges kept; resume
    # merges nothing again, closes each pane once (none after a restart: herdr lost them) and leaves nothing open.
    world = make_world()
    log = tmp_path / "herdr-calls.log"
    world.env["HERDR_SIM_CALL_LOG"] = str(log)
    engine = world.engine()
    engine.controller = "run"
    engine.herdr.timeout_s = 5.0
    hung = fault_when(world, engine, monkeypatch, phase, fault)

    with pytest.raises(HerdrDown) as raised:
        run_plan(engine, world.write_plan(INTEGRATED), Progress(io.StringIO(), live=False), interval_s=0.3)

    assert len(hung) == (1 if fault == "hang" else 0)
    match = STOPPED.fullmatch(raised.value.message)
    assert match is not None and match[1] == {"down": "down", "hang": "not answering"}[fault], raised.value.message
    assert raised.value.exit_code == 3
    run_id = match[4]
    run = engine.ledger.get_run(run_id)
    assert (run.status, run.stopped_at) == (RunStatus.INTERRUPTED, f"herdr is {match[1]} during retire")
    assert [e for e in engine.ledger.events(run_id) if e.to_state is WorkerState.FAILED] == []
    merged = world.repo.git("rev-parse", "chore/integrate-outage").strip()
    assert {w.task_label: bool(w.integrated_sha) for w in engine.ledger.list_workers(run_id)} == {"pages": True, "api": True}  # merged before the stop
    assert (engine.run_dir(run_id) / "report.md").exists()
    engine.close()

    if fault == "down":
        restart(world)
    resumed = world.orch("resume", run_id, "--interval", "0.3", "--json")

    assert resumed.returncode == 0, resumed.stderr
    shown = json.loads(resumed.stdout)
    assert shown["report"]["verdict"] == "PASS"
    ledger = world.engine().ledger
    assert ledger.get_run(run_id).status is RunStatus.FINISHED
    assert ledger.in_flight(run_id) == []
    # Nothing repeated: no merge made again, no packet sent again, no pane closed twice.
    assert world.repo.git("rev-parse", "chore/integrate-outage").strip() == merged
    assert sorted(e.key for e in ledger.list_effects(run_id) if e.kind == "agent_prompt") == sorted(dispatch_key(t) for t in ("pages", "api"))
    assert {pane: n for pane, n in _closes(log).items() if n > 1} == {}
    # Nothing left open: no agent runs, no pane of the run is left, none reported kept.
    assert world.herdr("agent", "list")["result"]["agents"] == []
    panes = {p["pane_id"] for p in world.herdr("pane", "list")["result"]["panes"]}
    assert panes & {w.pane_id for w in ledger.list_workers(run_id)} == set() or fault == "down"  # after a restart ids are reused
    assert [i for i in shown["report"]["retired"] if i["what"] in ("pane", "agent") and i["status"] == "retained"] == []


def test_herdr_down_during_orch_finish_stops_the_agent_controllers_run_and_its_wait_then_finish_end_it_with_nothing_repeated(make_world: Any) -> None:
    # The door's integrate and retire (`orch finish`) met by herdr down: merged (git alone), then retire's first herdr
    # call finds no server; the run stops interrupted, next[] the wait. After herdr restarted (every pane lost) the wait
    # takes the run up, and `orch finish` ends it PASS, merging nothing again and leaving nothing open.
    world = make_world()
    plan = world.write_plan(INTEGRATED)
    run_id = json.loads(world.orch("preflight", str(plan), "--json").stdout)["run_id"]
    for step in ("provision", "dispatch"):
        done = world.orch(step, "--run", run_id, "--json")
        assert done.returncode == 0, done.stderr
    first = world.orch("wait", "--run", run_id, "--json", "--timeout", "30")
    assert first.returncode == 0, first.stderr
    waited = json.loads(first.stdout)
    for _ in range(30):
        if [s["do"] for s in waited["next"]] != ["wait"]:
            break
        again = world.orch("wait", "--run", run_id, "--json", "--timeout", "30")
        assert again.returncode == 0, again.stderr
        waited = json.loads(again.stdout)
    assert [s["do"] for s in waited["next"]] == ["finish"], waited["next"]
    world.sim.stop()

    _door_stopped(world, world.orch("finish", "--run", run_id, "--json"), run_id, "finish")
    merged = world.repo.git("rev-parse", "chore/integrate-outage").strip()
    ledger = world.engine().ledger
    assert {w.task_label: bool(w.integrated_sha) for w in ledger.list_workers(run_id)} == {"pages": True, "api": True}
    assert [e for e in ledger.events(run_id) if e.to_state is WorkerState.FAILED] == []

    restart(world)
    taken = world.orch("wait", "--run", run_id, "--json", "--timeout", "30")
    assert taken.returncode == 0, taken.stderr
    finished = _wait_to_finish(world, run_id, json.loads(taken.stdout))

    assert (finished["finished"], finished["report"]["verdict"], finished["exit_code"]) == (True, "PASS", 0)
    assert world.repo.git("rev-parse", "chore/integrate-outage").strip() == merged  # nothing merged again
    ledger = world.engine().ledger
    assert ledger.get_run(run_id).status is RunStatus.FINISHED
    assert ledger.in_flight(run_id) == []
    assert sorted(e.key for e in ledger.list_effects(run_id) if e.kind == "agent_prompt") == sorted(dispatch_key(t) for t in ("pages", "api"))
    assert world.herdr("agent", "list")["result"]["agents"] == []
    assert [i for i in finished["report"]["retired"] if i["what"] in ("pane", "agent") and i["status"] == "retained"] == []
