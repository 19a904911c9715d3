"""A herdr call lost with orch alive (the client killed before or after herdr acted) is settled in the same run."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from orchestrator.provision import provision
from registry import EffectStatus, WorkerState
from provision_world import THREE, prepare_run

CREATES = ("worktree create", "pane move", "pane split", "agent start")


def made(log: Path) -> Counter[str]:
    """How many times herdr itself ran each creating command (its own call log: a call whose caller died is in it)."""
    found: Counter[str] = Counter()
    for line in log.read_text().splitlines() if log.exists() else []:
        call = json.loads(line)
        words = call["argv"][1:]
        if words[:1] == ["--session"]:
            words = words[2:]
        if " ".join(words[:2]) in CREATES and (call.get("rc") == 0 or call.get("died") == "after"):
            found[" ".join(words[:2])] += 1
    return found


@pytest.mark.parametrize("when", ["before", "after"])
@pytest.mark.parametrize("command", CREATES)
def test_a_lost_provisioning_call_is_settled_by_read_back_and_every_worker_becomes_ready(make_world: Any, tmp_path: Path, command: str, when: str) -> None:
    world = make_world()
    log = tmp_path / "herdr-calls.log"
    world.env["HERDR_SIM_CALL_LOG"] = str(log)
    engine, run = prepare_run(world, THREE.format(base="main"))
    world.sim.add_fault(command, die=when)

    result = provision(engine, run)

    assert [w.error for w in result.workers if w.error] == []
    assert [(w.task, w.state) for w in result.workers if not w.error] == [("api-pagination", "ready"), ("api-tests", "ready"), ("pagination-docs", "ready")]
    effects = engine.ledger.list_effects(run.run_id)
    assert [e.key for e in effects if e.status is EffectStatus.INTENDED] == []
    lost = [e for e in engine.ledger.events(run.run_id) if e.kind == "effect_unknown"]
    assert [e.detail["error"] for e in lost] == ["HerdrCallLost"]
    # Nothing made twice: herdr ran each create exactly as often as a run without the fault does.
    assert made(log) == Counter({"worktree create": 2, "pane move": 2, "pane split": 1, "agent start": 3})
    states = {w.task_label: w for w in engine.ledger.list_workers(run.run_id)}
    assert {t: w.state for t, w in states.items()} == dict.fromkeys(states, WorkerState.READY)
    agents = {a["name"]: a["pane_id"] for a in world.herdr("agent", "list")["result"]["agents"]}
    assert agents == {t: w.pane_id for t, w in states.items()}


ONE = """
organization = "acme"
repo = "widgets"
base = "main"

[defaults]
checkin_interval_s = 1
wait_timeout_s = 5

[[workers]]
task = "pages"
objective = "Document the page size."
deliverable = "docs/ committed on docs/pages."
branch = "docs/pages"
claim = ["docs/"]
verify = ["ls docs/"]
"""


def test_a_packet_read_back_cannot_tell_stops_orch_run_with_one_question_and_settle_then_resume_sends_it_once(make_world: Any, tmp_path: Path) -> None:
    # Issue 21, "only when read-back cannot tell does the run stop `interrupted` with the one question and the command
    # that answers it", for `orch run` (the door's `orch finish` refusal is tests/orchestrator/test_door.py): herdr hangs
    # on the packet's prompt and never acts on it, and the agent shows no sign of it. The run goes on to no verdict.
    import io
    import re

    from orchestrator.dispatch import dispatch_key
    from orchestrator.progress import Progress
    from orchestrator.run import run_plan
    from registry import RunStatus

    world = make_world()
    log = tmp_path / "herdr-calls.log"
    world.env["HERDR_SIM_CALL_LOG"] = str(log)
    engine = world.engine()
    engine.controller = "run"
    engine.herdr.timeout_s = 3.0
    engine.herdr.wait_margin_s = 2.0  # the hung prompt (it waits for acceptance) ends after 5 + 2 s, not 60 + 15
    engine.settle_attempts = 1
    world.sim.add_fault("agent prompt", hang=True)
    said = io.StringIO()

    outcome = run_plan(engine, world.write_plan(ONE), Progress(said, live=False), interval_s=0.3)

    stopped = "waiting for the person: 1 side effect(s) read-back cannot settle"
    assert (outcome.finished, outcome.stopped_at) == (False, stopped)
    run = engine.ledger.get_run(outcome.run_id)
    assert (run.status, run.stopped_at) == (RunStatus.INTERRUPTED, stopped)
    (prompt,) = engine.ledger.in_flight(outcome.run_id)
    (line,) = [line.split(" ", 1)[1] for line in said.getvalue().splitlines() if " unsettled: " in f" {line.split(' ', 1)[1]}"]
    assert re.fullmatch(
        rf"unsettled: agent_prompt for pages \(effect {prompt.id}\): read-back cannot tell whether it happened: the packet to pages ended without an answer "
        rf"\(HerdrTimeout\) and pages \(\w+\) shows no sign of it: did it arrive\? Read its pane \(`herdr agent read pages`\) -> "
        rf"orch resume {re.escape(outcome.run_id)} --settle {prompt.id}=sent \(or {prompt.id}=unsent\)", line), line
    engine.close()

    # The person reads the pane, sees no packet, and answers: it is sent once, and the run ends as a clean one.
    resumed = world.orch("resume", outcome.run_id, "--settle", f"{prompt.id}=unsent", "--interval", "0.3")

    assert resumed.returncode == 0, resumed.stderr
    ledger = world.engine().ledger
    assert ledger.get_run(outcome.run_id).status is RunStatus.FINISHED
    assert ledger.in_flight(outcome.run_id) == []
    prompts = [(e.key, str(e.status)) for e in ledger.list_effects(outcome.run_id) if e.kind == "agent_prompt"]
    assert prompts == [(dispatch_key("pages"), "abandoned"), (f"{dispatch_key('pages')}#2", "confirmed")]
    # herdr acted on one prompt only: the hung one never reached the agent.
    acted = [json.loads(x) for x in log.read_text().splitlines()]
    assert len([c for c in acted if "prompt" in c["argv"] and c.get("rc") == 0]) == 1
