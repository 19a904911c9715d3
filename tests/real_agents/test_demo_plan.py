"""The demo plan, three workers of one real kind, driven by `orch run` to `Herdr: PASS`, every agent gone at retire."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import pytest
from real_world import RealWorld, demo_plan

from herdr_sim.model.brains import Spec

pytestmark = pytest.mark.real_agents

# The demo's scenario for usage-docs (orchestrator/demo_data/scenarios.toml), as a brain: it asks the question the
# plan's [[workers.answers]] answer, and writes the answer into its guide.
BRAINS = {"usage-docs": Spec(brain="question", question="Which Python version should the guide name as the minimum?")}
TASKS = ("greeting", "area-tests", "usage-docs")


@pytest.mark.parametrize("kind", ["pi", "claude", "codex", "opencode"])
def test_demo_plan_passes_with_three_real_workers(real_world: Callable[..., RealWorld], kind: str) -> None:
    world = real_world(kind, BRAINS)
    plan = world.write_plan(demo_plan(kind))

    done = world.orch("run", str(plan), "--json")

    assert done.returncode == 0, done.stderr[-4000:]
    outcome = json.loads(done.stdout)
    report = world.run_dir(outcome["run_id"]) / "report.md"
    text = report.read_text()
    assert "Herdr: PASS" in text and "Blockers: none" in text, text
    assert world.agent_processes() == []  # every real agent exited at retire (its exit command, not a kill)
    for task in TASKS:
        packet = (world.run_dir(outcome["run_id"]) / "packets" / f"{task}.md").read_text()
        requests = [e for e in world.model.requests() if e.get("task") == task]
        assert requests, f"the model never saw {task}'s packet"
        sent = json.dumps(requests[-1]["request"], ensure_ascii=False)
        # The packet arrived whole, and once: its title line appears in exactly one user message of the conversation.
        assert sent.count(json.dumps(packet.splitlines()[0], ensure_ascii=False)[1:-1]) == 1
        assert json.dumps(packet.strip(), ensure_ascii=False)[1:-1] in sent
    assert re.search(r"usage-docs \d+ accepted \(question, result\)", text), text
