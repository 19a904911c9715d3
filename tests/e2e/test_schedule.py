"""The fleet scheduler end to end: the concurrency cap holds at every herdr call, `after` chains, skipped dependants."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

SIX = """
organization = "acme"
repo = "widgets"
base = "main"

[defaults]
concurrency = 2
checkin_interval_s = 1
""" + "".join(
    f"""
[[workers]]
task = "part-{n}"
objective = "Write part {n}."
deliverable = "src/part{n}/ committed on feat/part-{n}."
branch = "feat/part-{n}"
claim = ["src/part{n}/"]
verify = ["ls src/part{n}"]
"""
    for n in range(1, 7)
)

# Before every herdr command orch runs, count the run's agents herdr knows (the simulator's own `agent list`) and
# the command, one JSON line each, then run the command: the cap is sampled at every call orch makes.
WRAPPER = """#!{python}
import json, os, subprocess, sys
real = {real!r}
listed = subprocess.run([real, "agent", "list"], capture_output=True, text=True, env=os.environ)
agents = [a.get("name") for a in json.loads(listed.stdout)["result"]["agents"]] if listed.returncode == 0 else None
with open({log!r}, "a") as log:
    log.write(json.dumps({{"argv": sys.argv[1:], "agents": agents}}) + "\\n")
os.execv(real, [real, *sys.argv[1:]])
"""


def _wrap_herdr(world: Any, tmp_path: Path) -> Path:
    real = next(Path(d) / "herdr" for d in world.env["PATH"].split(os.pathsep) if (Path(d) / "herdr").exists())
    log = tmp_path / "herdr-calls.jsonl"
    wrapper = tmp_path / "herdr-sampled"
    wrapper.write_text(WRAPPER.format(python=sys.executable, real=str(real), log=str(log)))
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    world.env["ORCH_HERDR"] = str(wrapper)
    return log


def test_six_workers_with_concurrency_two_never_have_more_than_two_agents_and_finish_pass(world: Any, tmp_path: Path) -> None:
    log = _wrap_herdr(world, tmp_path)
    plan = world.write_plan(SIX)

    done = world.orch("run", str(plan), "--json", timeout=600)

    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    assert (outcome["finished"], outcome["report"]["verdict"]) == (True, "PASS")
    tasks = {f"part-{n}" for n in range(1, 7)}
    samples = [json.loads(line) for line in log.read_text().splitlines()]
    assert samples and all(s["agents"] is not None for s in samples)
    counts = [len(tasks & set(s["agents"])) for s in samples]
    assert max(counts) == 2, max(counts)
    # Every worker ran: each one's agent existed at some sampled call.
    assert {name for s in samples for name in s["agents"]} >= tasks
    # The live display showed the queued workers (plain log lines on a pipe) before they started.
    queued = [line for line in done.stderr.splitlines() if line.endswith(": queued")]
    assert sorted(line.split(" ", 1)[1] for line in queued) == [f"part-{n}: queued" for n in range(3, 7)]


def test_orch_provision_starts_only_as_many_as_the_cap_and_status_shows_the_rest_queued(world: Any) -> None:
    plan = world.write_plan(SIX)
    preflight = world.orch("preflight", str(plan))
    assert preflight.returncode == 0, preflight.stdout + preflight.stderr
    run_id = preflight.stdout.strip().splitlines()[-1]

    provisioned = world.orch("provision", "--run", run_id)
    status = world.orch("status", "--run", run_id).stdout

    assert provisioned.returncode == 0, provisioned.stdout + provisioned.stderr
    schedule = [line for line in provisioned.stdout.splitlines() if line.startswith(("provision ", "schedule: "))]
    assert schedule == [
        f"provision {run_id} (workspace w1): 2 ready, 0 failed, 4 queued",
        "schedule: part-1: started (slot 1 of 2)",
        "schedule: part-2: started (slot 2 of 2)",
        *(f"schedule: part-{n}: queued: waiting for a slot (2 of 2 in use: part-1, part-2)" for n in range(3, 7)),
    ]
    rows = [line.split()[:4] for line in status.splitlines() if line.startswith("part-")]
    assert rows == [*([f"part-{n}", f"part-{n}", "codex", "ready"] for n in (1, 2)), *([f"part-{n}", f"part-{n}", "codex", "queued"] for n in range(3, 7))]
