"""The real-agents lane: the real claude, codex, opencode and pi CLIs in the simulator's panes, on the scripted model.

Not part of the default `python -m pytest` run (it installs ~1.3 GB of agents and takes minutes): run it with
`ORCH_REAL_AGENTS=1 python -m pytest tests/real_agents` (docs/real-agents.md). Agents install once into
$ORCH_REAL_AGENTS_CACHE (default: $XDG_CACHE_HOME/orch-real-agents, read before the tests' HOME isolation); a kind
that cannot be installed (no node/npm, no registry) is skipped with the one line saying why.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from real_world import CAPTURE, SETTLE_MS, THINK_S, RealWorld, Recorder, agent

from herdr_sim.model.agents import KINDS, REAL_AGENTS_ENV, write_launchers
from herdr_sim.model.brains import Brain, Spec
from herdr_sim.model.server import ModelServer
from herdr_sim.testing import SimServer
from orchestrator.demo import demo_data

if os.environ.get("ORCH_REAL_AGENTS") != "1":
    collect_ignore_glob = ["test_*.py"]

# ORCH_REAL_AGENTS_SHARE=K/N runs the demo plan of every kind but opencode, and share K of N of everything else:
# opencode's tests (each 4-6 minutes on a loaded 2-CPU machine, the others 1-2) and the rest are each dealt out in
# node-id order, every N-th from the K-th, so every share has its part of both. .ci/run picks K by the day of the
# year, so N days run the whole lane while one day stays near its time budget (docs/real-agents.md, "Running it").
SHARE_ENV = "ORCH_REAL_AGENTS_SHARE"


def _always(nodeid: str) -> bool:
    return "test_demo_plan_passes" in nodeid and not _heavy(nodeid)


def _heavy(nodeid: str) -> bool:
    return nodeid.endswith("[opencode]")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # The longest first: two xdist workers then end close together (a 6-minute test last would run alone).
    items.sort(key=lambda item: not _heavy(item.nodeid))
    share = os.environ.get(SHARE_ENV)
    if not share:
        return
    try:
        k, n = (int(part) for part in share.split("/"))
        assert 0 <= k < n
    except (ValueError, AssertionError):
        raise pytest.UsageError(f"{SHARE_ENV}={share!r}: expected K/N with 0 <= K < N") from None
    rest = sorted(item.nodeid for item in items if not _always(item.nodeid))
    dropped = set()
    for part in ([nodeid for nodeid in rest if _heavy(nodeid)], [nodeid for nodeid in rest if not _heavy(nodeid)]):
        dropped |= {nodeid for i, nodeid in enumerate(part) if i % n != k}
    config.hook.pytest_deselected(items=[item for item in items if item.nodeid in dropped])
    items[:] = [item for item in items if item.nodeid not in dropped]


@pytest.fixture
def real_world(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Callable[..., RealWorld]]:
    """``build(kind, brains={task: Spec}, ask=False)``: a world whose `kind` panes run the real agent."""
    made: list[RealWorld] = []
    recorders: list[Recorder] = []

    def build(kind: str, brains: dict[str, Spec] | None = None, *, ask: bool = False) -> RealWorld:
        exe = agent(kind)
        # Socket paths must stay short: the simulator's home goes in the system temp dir (removed below).
        root = Path(os.environ.get("ORCH_E2E_TMP", "/tmp")) / f"orch-e2e-{os.getpid()}-ra{len(made)}-{kind}"
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        model = ModelServer(tmp_path / f"model-{kind}.jsonl", Brain(brains), think_s=THINK_S)
        model.__enter__()
        launchers = write_launchers(root / "agents", {kind: exe}, model.url, ask=ask)
        src_root = root / "src"
        repo = src_root / "acme" / "widgets"
        repo.mkdir(parents=True)
        for relpath, text in tomllib.loads(demo_data("project.toml"))["files"].items():
            (repo / relpath).parent.mkdir(parents=True, exist_ok=True)
            (repo / relpath).write_text(text)
        for argv in (["init", "--quiet", "--initial-branch=main"], ["add", "--all"], ["commit", "--quiet", "-m", "widgets: area()"]):
            subprocess.run(["git", *argv], cwd=repo, check=True, capture_output=True, timeout=30)
        overrides = {
            "HERDR_SIM_SETTLE_MS": str(SETTLE_MS),
            "HERDR_SIM_AGENT_MODULE": "herdr_sim.model.launch",
            REAL_AGENTS_ENV: str(launchers),
            "HERDR_SIM_INTEGRATIONS": ",".join(KINDS),
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        sim = SimServer(root / "sim", overrides, session="acme")
        sim.__enter__()
        env = sim.env()
        created = json.loads(sim.run(["workspace", "create", "--cwd", str(repo), "--no-focus"]).stdout)["result"]
        pane = created["root_pane"]
        env.update(HERDR_ENV="1", HERDR_PANE_ID=pane["pane_id"], HERDR_TAB_ID=pane["tab_id"],
                   HERDR_WORKSPACE_ID=pane["workspace_id"], ORCH_HOME=str(tmp_path / "orch-home"), ORCH_SRC_ROOT=str(src_root))
        world = RealWorld(kind, root, sim, model, repo, env, launchers)
        made.append(world)
        recorders.append(Recorder(world, Path(CAPTURE) / request.node.name.replace("[", "-").rstrip("]") if CAPTURE else None))
        recorders[-1].start()
        return world

    yield build
    for recorder in recorders:
        recorder.stop()
    for world in made:
        try:
            world.sim.__exit__(None, None, None)
        finally:
            world.model.close()
            shutil.rmtree(world.root, ignore_errors=True)


