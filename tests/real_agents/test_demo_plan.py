"""The demo plan, three workers of one real kind, driven by `orch run` to `Herdr: PASS`, every agent gone at retire."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from real_world import RealWorld, lane_kinds, demo_plan, stable_report

from herdr_sim.detect import app_title, explain
from herdr_sim.model.brains import Spec
from orchestrator.quirks import quirks
from registry.facts import FactKind

pytestmark = pytest.mark.real_agents

# The demo's scenario for usage-docs (orchestrator/demo_data/scenarios.toml), as a brain: it asks the question the
# plan's [[workers.answers]] answer, and writes the answer into its guide.
BRAINS = {"usage-docs": Spec(brain="question", question="Which Python version should the guide name as the minimum?")}
TASKS = ("greeting", "area-tests", "usage-docs")
# The keys that accept each kind's trust dialog from where it opens (claude's cursor starts on "No, exit").
TRUST_KEYS = {"claude": ("down", "enter"), "codex": ("enter",)}


@pytest.mark.parametrize("kind", lane_kinds("pi", "claude", "codex", "opencode"))
def test_demo_plan_passes_with_three_real_workers(real_world: Callable[..., RealWorld], kind: str) -> None:
    world = real_world(kind, BRAINS)
    plan = world.write_plan(demo_plan(kind))

    done = world.orch("run", str(plan), "--json")

    assert done.returncode == 0, world.diagnose(done)
    run_id = json.loads(done.stdout)["run_id"]
    text = stable_report(world, run_id)
    assert text == (
        "Herdr: PASS\n"
        "Controller: acme/w1/w1:t1/w1:p1\n"
        "Workers: greeting=retired/accepted+integrated, area-tests=retired/accepted+integrated, "
        "usage-docs=retired/accepted+integrated\n"
        "Callbacks: run <run>; greeting 1 accepted (result); area-tests 1 accepted (result); "
        "usage-docs 2 accepted (question, result); missing result: none\n"
        "Verification: greeting: `python3 -m unittest discover -s tests -q` exit 0 -> accepted; "
        "area-tests: `python3 -m unittest discover -s tests -q -p 'test_area*.py'` exit 0 -> accepted; "
        "usage-docs: `grep -q 'Python 3.11' docs/usage.md` exit 0 -> accepted\n"
        "Retired: greeting pane w1:pN closed; greeting worktree <root>/src/acme/widgets.worktrees/widgets-feat-greeting "
        "removed; greeting workspace wN closed (by herdr when its pane moved out); area-tests pane w1:pN closed; "
        "usage-docs pane w1:pN closed; usage-docs worktree <root>/src/acme/widgets.worktrees/widgets-docs-usage removed; "
        "usage-docs workspace wN closed (by herdr when its pane moved out); "
        "run worktree <home>/runs/<run>/integration removed (chore/demo-integration keeps its merges)\n"
        "Blockers: none\n"
    ), world.diagnose(done)
    # Each agent's trust dialog was answered per policy (the plan's default: on), with the keys read from its screen;
    # pi and opencode show none. Each launch has a HOME of its own, so every worker's agent met it, area-tests too.
    engine = world.engine()
    try:
        dialogs = {(e.task_label, e.detail["dialog"], e.detail["answered"], tuple(e.detail.get("keys", ())))
                   for e in engine.ledger.events(run_id) if e.kind == FactKind.DIALOG}  # fmt: skip
    finally:
        engine.close()
    assert dialogs == {(task, "trust folder", True, TRUST_KEYS[kind]) for task in TASKS if kind in TRUST_KEYS}, dialogs
    # Every real agent exited by its own exit command (`/quit` for pi, `/exit` for the others), typed once it was at
    # rest, and orch saw its shell come back (a kill, or an exit never seen, would have left the pane retained).
    command = quirks(kind).exit_command
    assert world.agent_exits(run_id) == {task: [f"exited by {command}"] for task in TASKS}, world.diagnose(done)
    assert world.agent_processes() == [], world.diagnose(done)
    # The table's busy signs drawn in the pane title (claude's spinner, codex's) showed while the turns ran, and the
    # simulator's rules and the table both read such a title as working: the lane's proof of those entries at every
    # run (docs/agent-quirks.md, "Verified"; claude draws its spinner only outside tmux, which no ../shared capture is).
    table = quirks(kind)
    for sign in (s for s in table.busy if s.title):
        seen = sorted(title for title in world.titles if sign.matches("", app_title(title)))
        assert seen, f"{kind} {sign.name}: no pane title matched {sign.title!r}: {sorted(world.titles)}"
        readings = {(explain(kind, "", app_title(title)).state, table.read("", app_title(title)).state) for title in seen}
        assert readings == {("working", "working")}, (seen, readings)
    run_dir = world.run_dir(run_id)
    for task in TASKS:
        packet = (run_dir / "packets" / f"{task}.md").read_text()
        requests = [e for e in world.model.requests() if e.get("task") == task]
        assert requests, f"the model never saw {task}'s packet"
        sent = json.dumps(requests[-1]["request"], ensure_ascii=False)
        # The packet arrived whole, and once: its title line is in exactly one message of the whole conversation.
        assert sent.count(json.dumps(packet.splitlines()[0], ensure_ascii=False)[1:-1]) == 1
        assert json.dumps(packet.strip(), ensure_ascii=False)[1:-1] in sent
        # A transcript of the real agent's pane was saved (it shows the agent running the packet's callback).
        transcript = (run_dir / "transcripts" / f"{task}.txt").read_text()
        assert "herdr-orchestration" in transcript, transcript[-2000:]
