"""A ledger deleted under a live `orch run`: the run stops with one line, nothing is prompted twice, and resume names
the lost ledger instead of saying nothing was made (issue 21)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from herdr_sim.testing import eventually
from registry import EffectStatus

pytestmark = pytest.mark.e2e

PLAN = """
organization = "acme"
repo = "widgets"
base = "main"

[defaults]
checkin_interval_s = 1

[[workers]]
task = "greet"
objective = "Make the greeting formal."
deliverable = "src/greet/hello.txt committed on feat/greet."
branch = "feat/greet"
claim = ["src/greet/"]
verify = ["grep -q formal src/greet/hello.txt"]
"""

# The worker keeps working until the test says so (its gate file): the ledger goes while the run observes it.
SCENARIO = """
[[task.greet]]
do = "run"
command = "while [ ! -e {gate} ]; do sleep 0.1; done"

[[task.greet]]
do = "write"
path = "src/greet/hello.txt"
content = "formal hello\\n"

[[task.greet]]
do = "commit"
message = "greet: formal"

[[task.greet]]
do = "result"
"""


def test_a_ledger_deleted_mid_run_stops_it_and_nothing_is_prompted_twice(world: Any, tmp_path: Path) -> None:
    log = tmp_path / "herdr-calls.log"
    shim = tmp_path / "herdr-logged"
    shim.write_text(f'#!/bin/sh\nprintf "%s %s\\n" "$1" "$2" >> {log}\nexec herdr "$@"\n')
    shim.chmod(0o755)
    world.env["ORCH_HERDR"] = str(shim)
    gate = tmp_path / "gate"
    world.write_scenarios(SCENARIO.replace("{gate}", str(gate)))
    plan = world.write_plan(PLAN)
    ledger = world.orch_home / "ledger.sqlite3"
    out, err = (tmp_path / "run.out").open("w"), (tmp_path / "run.err").open("w")
    run = subprocess.Popen([sys.executable, "-m", "orchestrator", "run", str(plan)], env=world.env, stdout=out, stderr=err, text=True)
    try:

        def prompted() -> bool:
            if not ledger.exists():
                return False
            engine = world.engine()
            try:
                return any(e.kind == "agent_prompt" and e.status is EffectStatus.CONFIRMED
                           for r in engine.ledger.list_runs() for e in engine.ledger.list_effects(r.run_id))  # fmt: skip
            finally:
                engine.close()

        eventually(prompted, lambda: (tmp_path / "run.err").read_text(), 120, 0.2)
        for suffix in ("", "-wal", "-shm"):
            Path(f"{ledger}{suffix}").unlink(missing_ok=True)
        code = run.wait(timeout=120)
    finally:
        gate.touch()
        if run.poll() is None:
            run.kill()
            run.wait()
    stderr = (tmp_path / "run.err").read_text()
    assert code == 1, stderr
    [folder] = (world.orch_home / "runs").iterdir()
    last = re.sub(r"stopped during \w+: ", "stopped during <stage>: ", stderr).splitlines()[-2:]
    assert last == [
        f"orch: run {folder.name.replace('_', ':', 1)} stopped during <stage>: the ledger {ledger} was deleted while this orch process "
        "used it; stopped so that nothing is made or sent twice",
        "hint: put the original ledger file back at that path, then run the command again (`orch resume RUN` for an `orch run` run); "
        "orch never carries on from a ledger that forgot what it did",
    ]

    resumed = world.orch("resume")

    assert (resumed.returncode, resumed.stderr.splitlines()[0]) == (1, (
        f"orch: the ledger {ledger} is missing, but {world.orch_home / 'runs'} holds 1 run folder(s) (the newest: {folder.name}): "
        "it was deleted or moved"
    ))  # fmt: skip
    assert not ledger.exists()  # no command (nor the worker's callback) made an empty one
    prompts = [line for line in log.read_text().splitlines() if line == "agent prompt"]
    assert len(prompts) == 1  # the packet, once
