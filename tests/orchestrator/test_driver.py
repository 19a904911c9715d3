"""One driver per run: a second orch process that would act on a run being driven is refused in one line naming the
holder, changes nothing, and a worker's callback is never refused nor kept waiting (issue 21)."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from herdr_sim.testing import eventually
from orchestrator import driver
from registry import Ledger, RunStatus, WorkerState

S = WorkerState
RUN = "w1:p1-20261130T080000Z"
ORCH = [sys.executable, "-m", "orchestrator"]
CALLBACK = f"[herdr-orchestration run={RUN} task=docs from=docs kind=update reply-to=w1:p2]\nhalf way"

# A herdr that holds every call until the test lets it go: the first orch process is inside a herdr call (as a real
# one is most of its life), holding the run's lock, while the test starts the second.
STUCK_HERDR = """#!/bin/sh
touch "$STUCK_MARK"
while [ ! -e "$STUCK_RELEASE" ]; do sleep 0.02; done
exit 1
"""


class World:
    """An ORCH_HOME with one run (one worker, working), a herdr that blocks, and the environment of the run's pane."""

    def __init__(self, root: Path, kind: str) -> None:
        self.root = root
        self.orch_home = root / "orch"
        self.mark, self.release = root / "herdr-called", root / "herdr-release"
        herdr = root / "herdr"
        herdr.write_text(STUCK_HERDR)
        herdr.chmod(0o755)
        self.env = {
            **os.environ, "ORCH_HOME": str(self.orch_home), "ORCH_HERDR": str(herdr), "HERDR_ENV": "1",
            "HERDR_PANE_ID": "w1:p1", "STUCK_MARK": str(self.mark), "STUCK_RELEASE": str(self.release),
        }  # fmt: skip
        with Ledger.open(self.orch_home / "ledger.sqlite3") as ledger:
            ledger.create_run(RUN, controller_target="w1:p1", fields={"controller_kind": kind, "workspace_id": "w1", "repo_tab_id": "w1:t1"})
            ledger.add_worker(RUN, "docs", name="docs", kind="codex", objective="Document it.", pane_id="w1:p2", reply_target="w1:p2")
            for before, after in ((S.PROVISIONING, S.READY), (S.READY, S.DISPATCHED), (S.DISPATCHED, S.WORKING)):
                ledger.transition(RUN, "docs", before, after)
        self.holder: subprocess.Popen[str] | None = None

    def events(self) -> int:
        with Ledger.open(self.orch_home / "ledger.sqlite3") as ledger:
            return len(ledger.events(RUN))

    def hold(self, *args: str) -> subprocess.Popen[str]:
        """Start the first orch process and wait until it is inside a herdr call (so it holds the run's lock)."""
        holder = self.holder = self.start(*args)
        eventually(lambda: self.mark.exists() or holder.poll() is not None, "the first orch process calls herdr", 120, 0.05)
        assert holder.poll() is None, holder.communicate()
        # Paused inside that call: orch's own 30 s limit on it must not end the holder while a loaded machine starts
        # the second processes (its lock is held all the same).
        os.kill(holder.pid, signal.SIGSTOP)
        return holder

    def start(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen([*ORCH, *args], env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)  # fmt: skip

    def orch(self, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return subprocess.run([*ORCH, *args], env=self.env, input=stdin, capture_output=True, text=True, timeout=60)

    def stop(self) -> None:
        self.release.touch()
        if self.holder is not None:
            if self.holder.poll() is None:
                os.kill(self.holder.pid, signal.SIGCONT)
            try:
                self.holder.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                self.holder.kill()
                self.holder.communicate()


@pytest.fixture
def agent_world(tmp_path: Path) -> Iterator[World]:
    world = World(tmp_path, "agent")
    yield world
    world.stop()


def _refusal(stderr: str, pid: int, command: str) -> str:
    """The refusal with the holder's pid and start time made stable."""
    text = stderr.replace(f"pid {pid} ", "pid <holder> ").replace(f"-INT {pid}`", "-INT <holder>`")
    return re.sub(r"since \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", "since <time>", text)


REFUSED = (
    f"orch: run {RUN} is being driven by another orch process: pid <holder> (`orch observe`, since <time>)\n"
    "hint: one orch process drives a run at a time, so nothing is sent twice: wait for it to end "
    "(or stop it: `kill -INT <holder>`), then try again\n"
)

DOORS = [
    ("observe", "--run", RUN, "--once"),
    ("answer", "--run", RUN, "docs", "use Python 3.11"),
    ("send", "--run", RUN, "--kind", "follow-up", "docs", "also the README"),
    ("approve", "--run", RUN, "docs"),
    ("dispatch", "--run", RUN),
    ("provision", "--run", RUN),
    ("verify", "--run", RUN),
    ("integrate", "--run", RUN),
    ("finish", "--run", RUN),
    ("retire", "--run", RUN),
    ("cancel", RUN),
    ("inbox", "add", "--run", RUN, "--check-in", CALLBACK),
    ("resume", RUN, "--settle", "1=sent"),
]


def test_every_door_on_a_run_being_driven_is_refused_naming_the_holder_and_changes_nothing(agent_world: World) -> None:
    holder = agent_world.hold("observe", "--run", RUN, "--once")
    before = agent_world.events()

    doors = [(door, agent_world.start(*door)) for door in DOORS]
    for door, started in doors:
        out, err = started.communicate(timeout=240)
        assert (started.returncode, out, _refusal(err, holder.pid, "observe")) == (1, "", REFUSED), door
    assert holder.poll() is None  # the refusals were all made while it held the lock
    assert agent_world.events() == before

    # --json: the same failure as one document on stdout.
    done = agent_world.orch("answer", "--run", RUN, "docs", "use Python 3.11", "--json")
    doc = json.loads(_refusal(done.stdout, holder.pid, "observe"))
    assert (done.returncode, doc) == (1, {
        "ok": False, "error": "RunDriven", "reason": REFUSED.splitlines()[0].removeprefix("orch: "),
        "problems": [REFUSED.splitlines()[0].removeprefix("orch: ")],
        "hint": REFUSED.splitlines()[1].removeprefix("hint: "), "exit_code": 1,
    })  # fmt: skip
    assert agent_world.events() == before


def test_a_workers_callback_is_recorded_while_the_run_is_being_driven(agent_world: World) -> None:
    agent_world.hold("observe", "--run", RUN, "--once")

    # The console script's fast path (orchestrator.entry), and the click command's (a named run, one message).
    fast = subprocess.run([str(Path(sys.executable).parent / "orch"), "inbox", "add", "--run", RUN, CALLBACK],
                          env=agent_world.env, capture_output=True, text=True, timeout=60)  # fmt: skip
    slow = agent_world.orch("inbox", "add", "--run", RUN, "--source", "test", "-", stdin=CALLBACK.replace("half", "most of the"))

    assert (fast.returncode, slow.returncode) == (0, 0), (fast.stderr, slow.stderr)
    with Ledger.open(agent_world.orch_home / "ledger.sqlite3") as ledger:
        assert [(m.verdict, m.source) for m in ledger.list_inbox(RUN)] == [("accepted", "cli"), ("accepted", "test")]


def test_the_lock_goes_with_its_holder_however_it_ends(agent_world: World) -> None:
    holder = agent_world.hold("observe", "--run", RUN, "--once")
    lock = agent_world.orch_home / "runs" / RUN.replace(":", "_") / driver.LOCK_FILE
    assert driver.holder(lock) is not None and driver.holder(lock).pid == holder.pid  # type: ignore[union-attr]

    holder.kill()  # SIGKILL: no clean-up ran
    holder.communicate()

    assert driver.holder(lock) is None
    agent_world.release.touch()  # the next driver's herdr calls fail at once (exit 1): it got past the lock
    again = agent_world.orch("answer", "--run", RUN, "docs", "use Python 3.11")
    assert "being driven" not in again.stderr, again.stderr


def test_two_resumes_of_one_run_at_once_the_second_is_refused(tmp_path: Path) -> None:
    # Issue 21: the second failed with "effect #15 is already confirmed; cannot mark it confirmed".
    world = World(tmp_path, "run")
    try:
        with Ledger.open(world.orch_home / "ledger.sqlite3") as ledger:
            ledger.set_run_status(RUN, RunStatus.INTERRUPTED, stopped_at="interrupted")
            # Left in flight by a crash: resume settles it by reading herdr back first (where the holder waits).
            ledger.intend(RUN, "docs", "agent_prompt", "docs:dispatch:1", {"target": "w1:p2"})
        holder = world.hold("resume", RUN)
        before = world.events()

        second = world.orch("resume", RUN)

        expected = REFUSED.replace("`orch observe`", "`orch resume`")
        assert (second.returncode, second.stdout, _refusal(second.stderr, holder.pid, "resume")) == (1, "", expected)
        assert world.events() == before
    finally:
        world.stop()


PLAN = """\
organization = "acme"
repo = "widgets"
base = "main"

[[workers]]
task = "docs"
objective = "Document it."
deliverable = "Commits."
branch = "docs/it"
claim = ["docs/**"]
"""


def test_a_second_orch_run_of_a_plan_with_an_unfinished_run_in_this_pane_is_refused_before_any_herdr_call(
    tmp_path: Path, git_repo_factory: Any
) -> None:
    # Issue 21: it took over the first run's worktrees and agents and sent the packets and answers again.
    git_repo_factory(tmp_path / "src" / "acme" / "widgets")
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN)
    world = World(tmp_path, "run")
    world.env["ORCH_SRC_ROOT"] = str(tmp_path / "src")
    with Ledger.open(world.orch_home / "ledger.sqlite3") as ledger:
        ledger.create_run("w1:p1-20261201T080000Z", controller_target="w1:p1", plan_path=str(plan), fields={"controller_kind": "run"})
        ledger.create_run("w1:p9-20261201T080000Z", controller_target="w1:p9", plan_path=str(plan))  # another pane's
    try:
        driven = world.orch("run", str(plan))  # its driver crashed: still active, nobody holds it
        with Ledger.open(world.orch_home / "ledger.sqlite3") as ledger:
            ledger.set_run_status("w1:p1-20261201T080000Z", RunStatus.INTERRUPTED, stopped_at="waiting for the person: docs")
            runs = len(ledger.list_runs())

        again = world.orch("run", str(plan), "--json")
    finally:
        world.stop()

    assert driven.returncode == 1
    assert driven.stderr == (
        "orch: run w1:p1-20261201T080000Z of " + str(plan) + " is unfinished (active); a second run would take over its worktrees and agents\n"
        "hint: `orch resume w1:p1-20261201T080000Z` continues it (nothing is made or sent twice); `orch cancel w1:p1-20261201T080000Z` ends it\n"
    )
    assert (again.returncode, json.loads(again.stdout)["reason"]) == (
        1, f"run w1:p1-20261201T080000Z of {plan} is unfinished (interrupted: waiting for the person: docs); a second run would take over its worktrees and agents")
    assert not world.mark.exists()  # no herdr call
    with Ledger.open(world.orch_home / "ledger.sqlite3") as ledger:
        assert len(ledger.list_runs()) == runs


def test_a_second_orch_run_while_the_first_drives_names_the_driver(tmp_path: Path, git_repo_factory: Any) -> None:
    git_repo_factory(tmp_path / "src" / "acme" / "widgets")
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN)
    world = World(tmp_path, "run")
    world.env["ORCH_SRC_ROOT"] = str(tmp_path / "src")
    with Ledger.open(world.orch_home / "ledger.sqlite3") as ledger:
        ledger.update_run(RUN, cause={"test": "plan"}, controller_kind="run")
    # RUN is the plan's unfinished run; make it this plan's (plan_path is set at creation only).


    with sqlite3.connect(world.orch_home / "ledger.sqlite3") as db:
        db.execute("UPDATE runs SET plan_path = ? WHERE run_id = ?", (str(plan), RUN))
    try:
        holder = world.hold("observe", "--run", RUN, "--once")
        world.mark.unlink()

        second = world.orch("run", str(plan))

        assert not world.mark.exists()
    finally:
        world.stop()
    assert (second.returncode, _refusal(second.stderr, holder.pid, "observe")) == (1, (
        f"orch: run {RUN} of {plan} is being driven by another orch process: pid <holder> (`orch observe`, since <time>)\n"
        "hint: one orch process drives a run at a time, so nothing is sent twice: wait for it to end, or stop it (Ctrl-C in its pane) "
        f"and continue with `orch resume {RUN}`\n"
    ))


# Every call says which orch process made it (its parent), then waits, as in STUCK_HERDR.
LOGGING_HERDR = """#!/bin/sh
echo "$PPID" >> "$HERDR_CALLERS"
while [ ! -e "$STUCK_RELEASE" ]; do sleep 0.02; done
exit 1
"""


def _exec_after(barrier: Any, argv: list[str], env: dict[str, str], out: Path) -> None:
    """A child of the test: wait at the barrier with its sibling, then become `orch ARGV` (same pid), output to ``out``."""
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    barrier.wait()
    os.execve(sys.executable, [sys.executable, *argv[1:]], env)


@pytest.mark.parametrize("command", ["run", "preflight"])
def test_two_orch_runs_of_one_plan_started_at_the_same_instant_in_one_pane_one_proceeds_the_other_is_refused_naming_it(
    tmp_path: Path, git_repo_factory: Any, command: str
) -> None:
    # Issue 21: both found no unfinished run of the plan (the check is before preflight, the run recorded after it),
    # and both went on to start the plan; two runs a second apart each made its worktrees and sent its packets.
    # `orch preflight`, the agent controller's first call that makes anything, took no lock at all: two at once
    # each recorded a run of the plan and made its workspace.
    import multiprocessing

    git_repo_factory(tmp_path / "src" / "acme" / "widgets")
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN)
    herdr, callers, release = tmp_path / "herdr", tmp_path / "callers", tmp_path / "release"
    herdr.write_text(LOGGING_HERDR)
    herdr.chmod(0o755)
    callers.touch()
    env = {
        **os.environ, "ORCH_HOME": str(tmp_path / "orch"), "ORCH_HERDR": str(herdr), "HERDR_ENV": "1", "HERDR_PANE_ID": "w1:p1",
        "ORCH_SRC_ROOT": str(tmp_path / "src"), "HERDR_CALLERS": str(callers), "STUCK_RELEASE": str(release),
    }  # fmt: skip
    forks = multiprocessing.get_context("fork")
    barrier = forks.Barrier(2)
    outs = [tmp_path / "first.out", tmp_path / "second.out"]
    procs = [forks.Process(target=_exec_after, args=(barrier, [*ORCH, command, str(plan)], env, out)) for out in outs]
    try:
        for proc in procs:
            proc.start()

        def settled() -> bool:
            calling = set(callers.read_text().split())
            return any(p.exitcode is not None for p in procs) and len(calling) >= 1 or len(calling) >= 2

        eventually(settled, "one orch run is refused and the other calls herdr, or both call herdr", 120, 0.05)
        calling = set(callers.read_text().split())
        ended = [(p, out) for p, out in zip(procs, outs, strict=True) if p.exitcode is not None]
        assert len(ended) == 1 and len(calling) == 1, (calling, [out.read_text() for out in outs])
        (loser, said), (winner,) = ended[0], [p for p in procs if p.exitcode is None]
        assert calling == {str(winner.pid)}  # the refused one made no herdr call: nothing of its was made or sent
        assert (loser.exitcode, _refusal(said.read_text(), winner.pid, command)) == (1, (
            f"orch: a run of {plan} is being started in pane w1:p1 by another orch process: pid <holder> (`orch {command}`, since <time>)\n"
            "hint: one orch process drives a run at a time, so nothing is sent twice: wait for it to end "
            "(or stop it: `kill -INT <holder>`), then try again\n"
        ))  # fmt: skip
    finally:
        release.touch()
        for proc in procs:
            proc.join(60)
            if proc.exitcode is None:
                proc.kill()
                proc.join()
    with Ledger.open(tmp_path / "orch" / "ledger.sqlite3") as ledger:
        assert len(ledger.list_runs()) <= 1  # the winner's preflight met a herdr that answers nothing: no run at all


def test_a_start_lock_released_for_good_leaves_nothing_and_can_be_taken_again(tmp_path: Path) -> None:
    lock = tmp_path / "home" / "starting" / "abc.lock"
    driver.acquire(lock, "", command="orch run", since="2026-11-30T08:00:00Z", doing="a run is being started")

    driver.release(lock, remove=True)

    assert list(tmp_path.iterdir()) == [tmp_path / "home"] and list((tmp_path / "home").iterdir()) == []
    driver.acquire(lock, "", command="orch run", since="2026-11-30T08:00:01Z")
    assert (holder := driver.holder(lock)) is not None and holder.pid == os.getpid()
    driver.release(lock)


def test_a_lock_file_removed_between_open_and_lock_is_opened_afresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lock = tmp_path / "starting" / "abc.lock"
    real_flock = driver.fcntl.flock
    removed: list[int] = []

    def flock_after_removal(fd: int, op: int) -> None:
        if not removed:  # the last holder tidied the file away just after we opened it: our inode is stale
            removed.append(fd)
            lock.unlink()
        real_flock(fd, op)

    monkeypatch.setattr(driver.fcntl, "flock", flock_after_removal)
    driver.acquire(lock, "", command="orch run", since="2026-11-30T08:00:00Z")

    assert os.fstat(driver._HELD[str(lock)][0]).st_ino == os.stat(lock).st_ino
    driver.release(lock, remove=True)
