"""The ledger defended (issue 21, 23): read-only commands create nothing, and a ledger that vanished or was replaced
under recorded runs stops orch with one line instead of starting over (which would send every packet again)."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.clock import FakeClock
from orchestrator.config import Settings
from orchestrator.engine import Engine, LedgerLost
from orchestrator.errors import OrchError
from orchestrator.herdr import HerdrCli
from orchestrator.progress import Progress
from orchestrator.run import resume_run
from registry import Ledger, RunStatus

RUN = "w1:p1-20261130T080000Z"
ORCH = [sys.executable, "-m", "orchestrator"]
CALLBACK = f"[herdr-orchestration run={RUN} task=docs from=docs kind=update reply-to=w1:p2]\nhalf way"


def _orch(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ORCH, *args], env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else ["(absent)"]


NO_RUN = ("orch: no run in {home}/ledger.sqlite3\nhint: start one with `orch run PLAN` (step by step: `orch preflight PLAN`)\n")
NO_UNFINISHED = "orch: no unfinished run in the ledger\nhint: start one with `orch run PLAN` (step by step: `orch preflight PLAN`)\n"
NO_SUCH_RUN = f"orch: no run {RUN} in {{home}}/ledger.sqlite3\nhint: `orch status --all` lists the runs\n"
# Each read-only command (and each that finds nothing to act on) on an empty ORCH_HOME: exit code, stdout, stderr.
EMPTY_HOME = {
    ("status",): (1, "", NO_RUN),
    ("status", "--all"): (0, "no runs\n", ""),
    ("status", "--all", "--json"): (0, '{\n  "runs": []\n}\n', ""),
    ("report",): (1, "", NO_RUN),
    ("report", "--run", RUN): (1, "", NO_SUCH_RUN),
    ("inbox", "list"): (1, "", NO_UNFINISHED),
    ("packet", "show", "docs"): (1, "", NO_UNFINISHED),
    ("observe", "--once"): (1, "", NO_UNFINISHED),
    ("resume",): (1, "", "orch: no unfinished run in the ledger: a run stopped before it was recorded created nothing in herdr or git\n"
                          "hint: re-run `orch run PLAN`: it starts from the beginning\n"),
    ("inbox", "add", "--run", RUN, CALLBACK): (1, "", NO_SUCH_RUN),
    ("plan", "check", "{plan}", "--json"): (0, None, ""),
}  # fmt: skip


@pytest.mark.parametrize("args", list(EMPTY_HOME), ids=lambda a: " ".join(a)[:40])
def test_commands_on_an_empty_orch_home_create_nothing(tmp_path: Path, args: tuple[str, ...]) -> None:
    # Issue 23: `orch status` on a fresh ORCH_HOME created the ledger (and its folder) just to say there was no run.
    home = tmp_path / "state"
    home.mkdir()
    env = {**os.environ, "ORCH_HOME": str(home), "HERDR_ENV": "1", "HERDR_PANE_ID": "w1:p1", "ORCH_HERDR": "/nonexistent/herdr"}
    plan = Path(__file__).resolve().parents[2] / "examples" / "plan.toml"
    argv = [a.format(plan=plan) for a in args]

    done = _orch(env, *argv)

    code, stdout, stderr = EMPTY_HOME[args]
    if stdout is None:  # plan check: its whole output is pinned by tests/orchestrator/test_cli_plan.py's goldens
        stdout = done.stdout
    assert (done.returncode, done.stdout, done.stderr) == (code, stdout, stderr.format(home=home))
    assert _files(home) == []
    shutil.rmtree(home)
    _orch(env, *argv)
    assert _files(home) == ["(absent)"]


def _settings(tmp_path: Path) -> Settings:
    return Settings(home=tmp_path, orch_home=tmp_path / "orch", policy_dir=tmp_path / "policies", src_root=tmp_path / "src")


def _recorded(tmp_path: Path) -> Path:
    """A ledger with one interrupted `orch run` run, and that run's folder (as preflight leaves it)."""
    settings = _settings(tmp_path)
    with Ledger.open(settings.orch_home / "ledger.sqlite3") as ledger:
        ledger.create_run(RUN, controller_target="w1:p1", fields={"controller_kind": "run", "workspace_id": "w1", "repo_tab_id": "w1:t1"})
        ledger.set_run_status(RUN, RunStatus.INTERRUPTED, stopped_at="interrupted during observe")
    folder = settings.orch_home / "runs" / RUN.replace(":", "_")
    folder.mkdir(parents=True)
    (folder / "plan.toml").write_text("organization = 'acme'\n")
    return settings.orch_home / "ledger.sqlite3"


def _engine(tmp_path: Path, mode: str = "existing") -> Engine:
    engine = Engine(settings=_settings(tmp_path), herdr=HerdrCli("herdr-that-is-never-run"), clock=FakeClock(), env={"HERDR_PANE_ID": "w1:p1"})
    engine.ledger_mode = mode
    return engine


def test_a_ledger_deleted_under_recorded_runs_is_named_and_never_recreated(tmp_path: Path) -> None:
    ledger = _recorded(tmp_path)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{ledger}{suffix}").unlink(missing_ok=True)
    runs = tmp_path / "orch" / "runs"
    expected = (
        f"the ledger {ledger} is missing, but {runs} holds 1 run folder(s) (the newest: w1_p1-20261130T080000Z): it was deleted or moved",
        "put it back at that path (orch then carries on, making and sending nothing twice); orch never starts over from an empty "
        f"ledger, which would send every packet again. To start afresh on purpose, move {tmp_path / 'orch'} aside",
    )
    for mode in ("existing", "new-runs"):
        engine = _engine(tmp_path, mode)
        with pytest.raises(LedgerLost) as raised:
            resume_run(engine, None, Progress(io.StringIO())) if mode == "existing" else engine.ledger
        assert (raised.value.message, raised.value.hint) == expected
        engine.close()
    assert not ledger.exists()

    # A worker's callback (its fast path, then the full path) neither creates a ledger nor is recorded in a new one.
    env = {**os.environ, "ORCH_HOME": str(tmp_path / "orch")}
    done = subprocess.run([str(Path(sys.executable).parent / "orch"), "inbox", "add", "--run", RUN, CALLBACK], env=env,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert (done.returncode, done.stderr.splitlines()[0]) == (1, f"orch: {expected[0]}")
    assert not ledger.exists()


def test_resume_on_a_ledger_that_forgot_the_run_says_so_instead_of_nothing_was_made(tmp_path: Path) -> None:
    # Issue 21: deleted mid-run, the next callback made an empty ledger; resume then said "a run stopped before it was
    # recorded created nothing in herdr or git" (false) and its hint, followed, sent the packets again.
    ledger = _recorded(tmp_path)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{ledger}{suffix}").unlink(missing_ok=True)
    Ledger.open(ledger).close()  # the empty one an older orch made
    folder = tmp_path / "orch" / "runs" / RUN.replace(":", "_")
    engine = _engine(tmp_path)

    for run_id in (None, RUN):
        with pytest.raises(LedgerLost) as raised:
            resume_run(engine, run_id, Progress(io.StringIO()))
        assert (raised.value.message, raised.value.hint) == (
            f"the ledger {ledger} does not know run {folder.name}, whose folder {folder} exists: the ledger was replaced or reset",
            "put back the ledger that recorded it; orch does not act on a run it cannot read back, so nothing is sent twice. "
            f"(If orch was stopped at the very moment it recorded that run, nothing was made for it: move {folder} aside.)",
        )
    engine.close()


@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_a_ledger_deleted_or_replaced_under_a_live_process_stops_it(tmp_path: Path, how: str) -> None:
    ledger = _recorded(tmp_path)
    engine = _engine(tmp_path, "open")
    assert engine.ledger.get_run(RUN).status is RunStatus.INTERRUPTED
    if how == "deleted":
        ledger.unlink()
    else:
        other = tmp_path / "other.sqlite3"
        Ledger.open(other).close()
        os.replace(other, ledger)

    with pytest.raises(LedgerLost) as raised:
        engine.ledger.get_run(RUN)

    assert (raised.value.message, raised.value.hint) == (
        f"the ledger {ledger} was {'deleted' if how == 'deleted' else 'replaced by another file'} while this orch process used it; "
        "stopped so that nothing is made or sent twice",
        "put the original ledger file back at that path, then run the command again (`orch resume RUN` for an `orch run` run); "
        "orch never carries on from a ledger that forgot what it did",
    )
    # A thread opening its own connection now is refused the same way (provisioning runs workers on threads).
    engine._local = type(engine._local)()
    with pytest.raises(LedgerLost):
        _ = engine.ledger
    engine.close()


def test_resume_with_nothing_recorded_still_says_running_the_plan_again_is_right(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    with pytest.raises(OrchError) as raised:
        resume_run(engine, None, Progress(io.StringIO()))
    assert raised.value.message == "no unfinished run in the ledger: a run stopped before it was recorded created nothing in herdr or git"
    assert not (tmp_path / "orch").exists()
    engine.close()
