"""The fleet scheduler end to end: the concurrency cap holds at every herdr call, `after` chains, skipped dependants."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

from registry import WorkerState

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
        *(f"schedule: part-{n}: queued, waiting for a slot (2 of 2 in use: part-1, part-2)" for n in range(3, 7)),
    ]
    rows = [line.split()[:4] for line in status.splitlines() if line.startswith("part-")]
    assert rows == [*([f"part-{n}", f"part-{n}", "codex", "ready"] for n in (1, 2)), *([f"part-{n}", f"part-{n}", "codex", "queued"] for n in range(3, 7))]


CHAIN = """
organization = "acme"
repo = "widgets"
base = "main"

[defaults]
checkin_interval_s = 1

[integration]
enabled = true
branch = "chore/integrate-chain"

[[workers]]
task = "a"
objective = "Write part a."
deliverable = "src/a/ committed on feat/chain-a."
branch = "feat/chain-a"
claim = ["src/a/"]
verify = ["{verify_a}"]

[[workers]]
task = "b"
objective = "Build on part a."
deliverable = "src/b/ committed on feat/chain-b."
branch = "feat/chain-b"
claim = ["src/b/"]
after = ["a"]
verify = ["test -f src/b/seen-a.txt"]

[[workers]]
task = "c"
objective = "Build on part b."
deliverable = "src/c/ committed on feat/chain-c."
branch = "feat/chain-c"
claim = ["src/c/"]
after = ["b"]
verify = ["test -f src/c/seen-b.txt"]
"""

# b and c copy what their predecessor left in the checkout they start from: the file is there only if the worktree
# started from the integration branch after the predecessor was merged.
CHAIN_SCENARIOS = """
[[task.a]]
do = "write"
path = "src/a/a.txt"
content = "from a\\n"

[[task.a]]
do = "commit"

[[task.a]]
do = "verify"

[[task.a]]
do = "result"
""" + "".join(
    f"""
[[task.{me}]]
do = "run"
command = "mkdir -p src/{me} && cp src/{pred}/{pred_file} src/{me}/seen-{pred}.txt"

[[task.{me}]]
do = "commit"

[[task.{me}]]
do = "verify"

[[task.{me}]]
do = "result"
"""
    for me, pred, pred_file in (("b", "a", "a.txt"), ("c", "b", "seen-a.txt"))
)


def test_a_chain_starts_each_worker_from_the_integration_branch_holding_its_predecessor(world: Any) -> None:
    world.write_scenarios(CHAIN_SCENARIOS)
    plan = world.write_plan(CHAIN.replace("{verify_a}", "test -f src/a/a.txt"))

    done = world.orch("run", str(plan), "--json", timeout=600)

    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    assert (outcome["finished"], outcome["report"]["verdict"]) == (True, "PASS"), outcome["report"]["verdict_reasons"]
    # b's checkout held a's change when b started (it copied it), and c's held b's (which carried a's text on).
    assert world.repo.git("show", "feat/chain-b:src/b/seen-a.txt") == "from a"
    assert world.repo.git("show", "feat/chain-c:src/c/seen-b.txt") == "from a"
    engine = world.engine()
    workers = {w.task_label: w for w in engine.ledger.list_workers(outcome["run_id"])}
    # Each dependant's base is the integration branch commit that merged its predecessor.
    assert workers["b"].base_sha == workers["a"].integrated_sha
    assert workers["c"].base_sha == workers["b"].integrated_sha
    order = [line.split(" ", 1)[1] for line in done.stderr.splitlines() if ": started: " in line or ": integrated: " in line]
    assert [line.split(":")[0] + ":" + line.split(":")[1] for line in order] == ["a: started", "a: integrated", "b: started", "b: integrated", "c: started"]
    engine.close()


def test_a_rejected_predecessor_skips_its_whole_chain_and_the_report_says_why(world: Any) -> None:
    world.write_scenarios(CHAIN_SCENARIOS)
    plan = world.write_plan(CHAIN.replace("{verify_a}", "test -f src/a/missing.txt"))

    done = world.orch("run", str(plan), "--json", timeout=600)

    outcome = json.loads(done.stdout)
    assert (done.returncode, outcome["finished"], outcome["report"]["verdict"]) == (11, True, "FAIL"), done.stderr
    run_id = outcome["run_id"]
    shown = world.orch("report", "--run", run_id).stdout
    workers_line, blockers_line = (line for line in shown.splitlines() if line.startswith(("Workers:", "Blockers:")))
    assert workers_line == "Workers: a=retained/rejected, b=retired/skipped, c=retired/skipped"
    assert blockers_line == (
        "Blockers: b skipped: after a, which was rejected; "
        "c skipped: after b, which was skipped (the chain a -> b -> c began when a was rejected)"
    )
    # Neither dependant was ever started: no agent, pane or worktree was made for them.
    engine = world.engine()
    effects = {e.task_label for e in engine.ledger.list_effects(run_id)}
    assert effects & {"b", "c"} == set()
    assert world.repo.git("branch", "--list", "feat/chain-b", "feat/chain-c") == ""
    engine.close()


TWO = """
organization = "acme"
repo = "widgets"
base = "main"

[defaults]
concurrency = 1

[[workers]]
task = "first"
objective = "Write the first part."
deliverable = "src/first/ committed on feat/first."
branch = "feat/first"
claim = ["src/first/"]

[[workers]]
task = "second"
objective = "Write the second part."
deliverable = "src/second/ committed on feat/second."
branch = "feat/second"
claim = ["src/second/"]
"""


def test_the_agent_controllers_check_in_frees_the_slot_of_a_finished_worker_and_starts_the_queued_one(world: Any) -> None:
    # second takes its packet and stays at work: a worker that went on to send its result (which moves it to
    # `result`) before the state is read below would show a state no check-in put it in.
    world.write_scenarios('[[task.second]]\ndo = "stall"\n')
    plan = world.write_plan(TWO)
    run_id = world.orch("preflight", str(plan)).stdout.strip().splitlines()[-1]
    provisioned = world.orch("provision", "--run", run_id, "--json")
    assert [(w["task"], w["state"]) for w in json.loads(provisioned.stdout)["workers"]] == [("first", "ready"), ("second", "queued")]
    # The controller's own steps (dispatch, the result, verify) are not what is tested here: record first as accepted.
    engine = world.engine()
    for old, new in (("ready", "dispatched"), ("dispatched", "working"), ("working", "result"), ("result", "verifying"), ("verifying", "accepted")):
        engine.ledger.transition(run_id, "first", WorkerState(old), WorkerState(new), cause={"test": "accepted by hand"})

    seen = world.orch("observe", "--run", run_id, "--once")

    assert seen.returncode == 0, seen.stderr
    lines = [line.strip() for line in seen.stdout.splitlines() if line.startswith("  [")]
    assert lines == [
        "[1] first slot freed: accepted: agent exited to free its slot (pane and checkout kept until retirement)",
        "[1] second started: admitted to slot 1 of 1",
    ]
    agents = {a["name"] for a in world.herdr("agent", "list")["result"]["agents"]}
    assert agents == {"second"}
    assert engine.ledger.get_worker(run_id, "second").state in (WorkerState.DISPATCHED, WorkerState.WORKING)  # its packet was taken
    engine.close()


SIBLINGS = """
organization = "acme"
repo = "widgets"
base = "main"

[defaults]
checkin_interval_s = 1

[[workers]]
task = "owner"
objective = "Write part a."
deliverable = "src/a/ committed on feat/shared."
branch = "feat/shared"
claim = ["src/a/"]

[[workers]]
task = "sibling"
objective = "Write part b."
deliverable = "src/b/ committed on feat/shared."
branch = "feat/shared"
claim = ["src/b/"]
"""

# The sibling also edits a file inside the owner's claim, in its own (attributed) commit. It does so once the owner
# has committed: before, the owner's `git add -- src/a/` would take the file into its own commit (its claim), and the
# sibling would be rejected for a changed file its diff lacks instead (the verifier names that too).
SIBLING_SCENARIOS = """
[[task.sibling]]
do = "write"
path = "src/b/b.txt"
content = "b\\n"

[[task.sibling]]
do = "run"
command = "until git log --format=%B | grep -qx 'Orch-Task: owner'; do sleep 0.1; done"

[[task.sibling]]
do = "write"
path = "src/a/not-mine.txt"
content = "b was here\\n"

[[task.sibling]]
do = "commit"

[[task.sibling]]
do = "result"
"""


def test_a_sibling_that_edits_its_siblings_claim_is_not_accepted_and_the_file_is_named(world: Any) -> None:
    world.write_scenarios(SIBLING_SCENARIOS)
    plan = world.write_plan(SIBLINGS)

    done = world.orch("run", str(plan), "--json", timeout=600)

    outcome = json.loads(done.stdout)
    assert (outcome["finished"], outcome["report"]["verdict"]) == (False, "PARTIAL"), done.stderr
    engine = world.engine()
    workers = {w.task_label: w for w in engine.ledger.list_workers(outcome["run_id"])}
    assert (workers["owner"].final_disposition, workers["sibling"].final_disposition) == (WorkerState.ACCEPTED, WorkerState.BLOCKED)
    [verdict] = [item for item in outcome["report"]["verification"] if item["task"] == "sibling"]
    assert verdict["reasons"] == ["edited outside its claim: src/a/not-mine.txt (claimed by owner) (integration paused for a decision)"]
    # Each worker's completion metadata is its own: the owner's head is its own commit, carrying its own trailer.
    owner_head = workers["owner"].head_sha
    assert world.repo.git("log", "-1", "--format=%(trailers:key=Orch-Task,valueonly)", owner_head) == "owner"
    assert world.repo.git("diff-tree", "--no-commit-id", "--name-only", "-r", owner_head).splitlines() == ["src/a/sim-owner.txt"]
    engine.close()
