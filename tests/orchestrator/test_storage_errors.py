"""Every storage error (disk full, read-only, locked, damaged) is one `orch:` line with a hint, never a traceback, and
`orch run` meets it before any herdr call (issue 21)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import registry.core
from orchestrator.cli import cli
from registry import Ledger

RUN = "w1:p1-20261130T080000Z"
ORCH = [sys.executable, "-m", "orchestrator"]
CALLBACK = f"[herdr-orchestration run={RUN} task=docs from=docs kind=update reply-to=w1:p2]\nhalf way"
# A herdr that must never be called: it leaves a mark if it is.
MARKING_HERDR = '#!/bin/sh\ntouch "$HERDR_CALLED"\nexit 1\n'


def _home(tmp_path: Path) -> Path:
    home = tmp_path / "orch"
    with Ledger.open(home / "ledger.sqlite3") as ledger:
        ledger.create_run(RUN, controller_target="w1:p1", fields={"controller_kind": "run"})
        ledger.add_worker(RUN, "docs", name="docs", kind="codex", objective="Document it.", pane_id="w1:p2", reply_target="w1:p2")
    (home / "runs" / RUN.replace(":", "_")).mkdir(parents=True)
    (home / "runs" / RUN.replace(":", "_") / "limits.json").write_text('{"message_limit_bytes": 65536}\n')
    return home


def test_a_damaged_ledger_is_one_line_for_every_kind_of_command(tmp_path: Path) -> None:
    home = _home(tmp_path)
    (home / "ledger.sqlite3").write_bytes(b"not a database, a person's notes " * 200)
    for suffix in ("-wal", "-shm"):
        Path(f"{home / 'ledger.sqlite3'}{suffix}").unlink(missing_ok=True)
    env = {**os.environ, "ORCH_HOME": str(home), "HERDR_PANE_ID": "w1:p1"}
    expected = (
        f"orch: the ledger in {home} cannot be used: the file is not a ledger (not an SQLite database) (SQLite: file is not a database)\n"
        f"hint: orch never rewrites it: put the real ledger back, or move {home} aside to start afresh\n"
    )
    for argv in (
        [*ORCH, "status"], [*ORCH, "resume"], [*ORCH, "inbox", "list", "--run", RUN],
        [str(Path(sys.executable).parent / "orch"), "inbox", "add", "--run", RUN, CALLBACK],  # a worker's callback (fast path)
    ):  # fmt: skip
        done = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
        assert (done.returncode, done.stderr) == (1, expected), argv


def _with_connection(monkeypatch: pytest.MonkeyPatch, setup: Callable[[sqlite3.Connection], Any]) -> None:
    """The storage seam: every ledger connection orch opens gets ``setup`` run on it (a full disk, a read-only file)."""
    real = registry.core.connect

    def connect(path: Path, busy_timeout_ms: int, *, create: bool = True) -> sqlite3.Connection:
        db = real(path, busy_timeout_ms, create=create)
        setup(db)
        return db

    monkeypatch.setattr(registry.core, "connect", connect)


def _invoke(home: Path, *args: str) -> Any:
    return CliRunner().invoke(cli, list(args), env={"ORCH_HOME": str(home), "HERDR_PANE_ID": "w1:p1"}, catch_exceptions=False)


def test_a_full_disk_is_one_line_and_records_nothing_half_way(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A real SQLITE_FULL: the file may not grow by a page (PRAGMA max_page_count), as on a disk with no space left.
    home = _home(tmp_path)
    with Ledger.open(home / "ledger.sqlite3") as ledger:
        before = len(ledger.list_inbox(RUN))
    _with_connection(monkeypatch, lambda db: db.execute(f"PRAGMA max_page_count = {db.execute('PRAGMA page_count').fetchone()[0]}"))

    done = _invoke(home, "inbox", "add", "--run", RUN, "--source", "test", CALLBACK + "\n" + "x" * 60000)

    assert (done.exit_code, done.stderr) == (1, (
        f"orch: the ledger in {home} cannot be used: the disk is full (SQLite: database or disk is full)\n"
        f"hint: free space on the disk that holds {home}, then run the command again\n"
    ))  # fmt: skip
    monkeypatch.undo()
    with Ledger.open(home / "ledger.sqlite3") as ledger:
        assert len(ledger.list_inbox(RUN)) == before


def test_a_read_only_ledger_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Tests run as root, whom chmod does not stop: the connection is made read-only at the storage seam instead
    # (SQLite's own query_only switch: writes fail with the real SQLITE_READONLY a read-only file gives).
    home = _home(tmp_path)
    _with_connection(monkeypatch, lambda db: db.execute("PRAGMA query_only = ON"))

    done = _invoke(home, "inbox", "add", "--run", RUN, "--source", "test", CALLBACK)

    assert (done.exit_code, done.stderr) == (1, (
        f"orch: the ledger in {home} cannot be used: it is read-only (SQLite: attempt to write a readonly database)\n"
        f"hint: make {home} and the ledger in it writable for you (or point ORCH_HOME at a writable folder), then run the command again\n"
    ))  # fmt: skip


def test_a_locked_ledger_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = _home(tmp_path)
    holder = sqlite3.connect(home / "ledger.sqlite3", isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # a backup tool or an sqlite3 shell in a long write
    _with_connection(monkeypatch, lambda db: db.execute("PRAGMA busy_timeout = 50"))
    try:
        done = _invoke(home, "inbox", "add", "--run", RUN, "--source", "test", CALLBACK)
    finally:
        holder.execute("ROLLBACK")
        holder.close()

    assert (done.exit_code, done.stderr) == (1, (
        f"orch: the ledger in {home} cannot be used: another process holds it locked (SQLite: database is locked)\n"
        "hint: another program has the ledger open in a long write (an `sqlite3` shell, a backup tool?): close it, then run the command again\n"
    ))  # fmt: skip


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


def test_orch_run_meets_an_unwritable_orch_home_before_any_herdr_call(tmp_path: Path, git_repo_factory: Any) -> None:
    # /sys refuses new folders even to root (EPERM): a real unwritable ORCH_HOME without root tricks.
    git_repo_factory(tmp_path / "src" / "acme" / "widgets")
    (tmp_path / "plan.toml").write_text(PLAN)
    herdr = tmp_path / "herdr"
    herdr.write_text(MARKING_HERDR)
    herdr.chmod(0o755)
    home = Path("/sys/orch-test-unwritable")
    env = {
        **os.environ, "ORCH_HOME": str(home), "ORCH_HERDR": str(herdr), "HERDR_CALLED": str(tmp_path / "called"),
        "ORCH_SRC_ROOT": str(tmp_path / "src"), "HERDR_ENV": "1", "HERDR_PANE_ID": "w1:p1",
    }  # fmt: skip

    done = subprocess.run([*ORCH, "run", str(tmp_path / "plan.toml")], env=env, capture_output=True, text=True, timeout=60)

    assert (done.returncode, done.stderr) == (1, (
        f"orch: cannot write {home}: Operation not permitted\n"
        "hint: make it writable for you (or point ORCH_HOME at a writable folder), then run the command again\n"
    ))  # fmt: skip
    assert not (tmp_path / "called").exists()
