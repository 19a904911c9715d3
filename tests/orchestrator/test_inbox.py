"""Callback intake: the ledger view, one-line verdicts, worker updates and `orch inbox list` output, through the real CLI."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from orchestrator.cli import cli
from registry import Ledger, WorkerState

S = WorkerState
RUN = "w1:p1-20261130T080000Z"
OLD = "w1:p1-20261129T080000Z"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    orch_home = tmp_path / "orch"
    with Ledger.open(orch_home / "ledger.sqlite3") as ledger:
        ledger.create_run(OLD, controller_target="w1:p1")
        ledger.create_run(RUN, controller_target="w1:p1")
        ledger.add_worker(RUN, "feature-a", name="feature-a", kind="codex", objective="x", pane_id="w1:pa", reply_target="w1:pa")
        ledger.transition(RUN, "feature-a", S.PROVISIONING, S.READY)
        ledger.transition(RUN, "feature-a", S.READY, S.DISPATCHED)
    return orch_home


def orch(home: Path, *args: str, input: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), input=input, env={"ORCH_HOME": str(home)})
    return result.exit_code, result.stdout, result.stderr


def env(kind: str, body: str, *, run: str = RUN, sender: str = "feature-a") -> str:
    return f"[herdr-orchestration run={run} task=feature-a from={sender} kind={kind} reply-to=w1:pa]\n{body}"


def test_view_names_runs_workers_and_accepted_fingerprints(home: Path) -> None:
    from orchestrator.config import Settings
    from orchestrator.engine import Engine
    from orchestrator.intake import Intake, add_message

    engine = Engine(settings=Settings(home=home, orch_home=home, policy_dir=home, src_root=home), herdr=None)  # type: ignore[arg-type]
    run = engine.ledger.get_run(RUN)
    added = add_message(engine, run, env("update", "hello"))
    view = Intake.of(engine, run).view()
    assert (view.run_id, view.other_run_ids, [w.worker_name for w in view.workers]) == (RUN, frozenset({OLD}), ["feature-a"])
    assert view.accepted_fingerprints == {engine.ledger.get_inbound(added.inbox_id).fingerprint}
    engine.close()


def test_add_prints_one_line_and_exits_0_even_when_kept_aside(home: Path) -> None:
    assert orch(home, "inbox", "add", "--run", RUN, env("question", "Formal?")) == (
        0, "accepted #1: question from feature-a for task feature-a (worker dispatched -> question)\n", "",
    )  # fmt: skip
    assert orch(home, "inbox", "add", "--run", RUN, "-", input=env("result", "Status: done", run=OLD)) == (
        0, f'kept aside #2 (stale_run): result from feature-a for task feature-a: run "{OLD}" is an earlier or finished run; the current run is "{RUN}"\n', "",
    )  # fmt: skip
    code, out, _ = orch(home, "inbox", "add", "--run", RUN, env("question", "Formal?"))
    assert (code, out) == (
        0, "kept aside #3 (duplicate): question from feature-a for task feature-a: the same question from \"feature-a\""
        f" for task \"feature-a\" was already accepted (fingerprint {_fp(home)[:12]})\n",
    )  # fmt: skip
    code, out, _ = orch(home, "inbox", "add", "--run", RUN, "hello there")
    assert (code, out.split(": ")[0]) == (0, "kept aside #4 (malformed_header)")
    with Ledger.open(home / "ledger.sqlite3") as ledger:
        worker = ledger.get_worker(RUN, "feature-a")
        assert (worker.state, worker.pending_question, worker.last_callback_id) == (S.QUESTION, "Formal?", 1)


def _fp(home: Path) -> str:
    with Ledger.open(home / "ledger.sqlite3") as ledger:
        return ledger.get_inbound(1).fingerprint


def test_add_exits_1_when_nothing_can_be_recorded(home: Path) -> None:
    assert orch(home, "inbox", "add", "--run", "w9:p9-20260101T000000Z", env("update", "x")) == (
        1, "", f"orch: no run w9:p9-20260101T000000Z in {home / 'ledger.sqlite3'}\nhint: `orch status --all` lists the runs\n",
    )  # fmt: skip
    assert orch(home, "inbox", "add", "--run", RUN)[0] == 1


def test_list_shows_every_message_with_its_verdict(home: Path) -> None:
    orch(home, "inbox", "add", "--run", RUN, env("update", "Parser done"))
    orch(home, "inbox", "add", "--run", RUN, env("update", "late news", sender="mallory"))
    code, out, _ = orch(home, "inbox", "list", "--run", RUN)
    assert code == 0
    stamps = [line.split()[1] for line in out.splitlines() if line.startswith("#")]
    assert out == (
        f"Inbox of run {RUN}: 2 messages\n"
        f"#1 {stamps[0]} accepted update task=feature-a from=feature-a [new]\n"
        "    Parser done\n"
        f"#2 {stamps[1]} kept aside (wrong_sender) update task=feature-a from=mallory [new]\n"
        '    sender "mallory" is not "feature-a", the worker registered for task "feature-a"\n'
    )
    listing = json.loads(orch(home, "inbox", "list", "--run", RUN, "--json")[1])
    assert [(m["id"], m["verdict"], m["reason_code"]) for m in listing["messages"]] == [(1, "accepted", None), (2, "kept_aside", "wrong_sender")]


def _ledger_bytes(home: Path) -> int:
    return sum(path.stat().st_size for path in home.glob("ledger.sqlite3*"))


@pytest.mark.parametrize("megabytes", [1, 10])
def test_oversize_callback_is_kept_aside_and_grows_the_ledger_by_less_than_1_mb(home: Path, megabytes: int) -> None:
    import hashlib

    raw = env("result", "Status: done\n" + "x" * (megabytes * 1024 * 1024))
    size, digest = len(raw.encode()), hashlib.sha256(raw.encode()).hexdigest()
    before = _ledger_bytes(home)

    result = CliRunner().invoke(cli, ["inbox", "add", "--run", RUN, "-"], input=raw.encode(), env={"ORCH_HOME": str(home)})

    assert (result.exit_code, result.stdout, result.stderr) == (0, (
        f"kept aside #1 (oversize): the message is {size} bytes, over the 65536-byte limit (sha256 {digest}); "
        "large content belongs in a report file, sent by path\n"), "",
    )  # fmt: skip
    assert _ledger_bytes(home) - before < 1024 * 1024  # bench/oversize.py times it
    with Ledger.open(home / "ledger.sqlite3") as ledger:
        stored = ledger.get_inbound(1)
        assert (stored.raw, stored.fingerprint, stored.kind, stored.task_label) == (raw[:2048], digest, None, None)
        assert ledger.get_worker(RUN, "feature-a").state is S.DISPATCHED


def test_the_plan_sets_the_limit_and_both_doors_apply_it(home: Path) -> None:
    from orchestrator.config import Settings
    from orchestrator.engine import Engine
    from orchestrator.intake import message_limit, save_message_limit

    engine = Engine(settings=Settings(home=home, orch_home=home, policy_dir=home, src_root=home), herdr=None)  # type: ignore[arg-type]
    save_message_limit(engine, RUN, 2048)
    assert message_limit(engine, engine.ledger.get_run(RUN)) == 2048
    engine.close()
    big = env("update", "y" * 2000)
    assert orch(home, "inbox", "add", "--run", RUN, big)[1].startswith(f"kept aside #1 (oversize): the message is {len(big)} bytes, over the 2048-byte limit")
    assert orch(home, "inbox", "add", "--run", RUN, "-", input=big)[1].startswith(f"kept aside #2 (oversize): the message is {len(big)} bytes, over the 2048-byte limit")
    assert orch(home, "inbox", "add", "--run", RUN, env("update", "y" * 1800))[1].startswith("accepted #3")


def test_a_callback_reads_the_saved_limit_and_loads_no_plan_code(home: Path) -> None:
    import subprocess
    import sys

    run_dir = home / "runs" / RUN.replace(":", "_")
    run_dir.mkdir(parents=True)
    (run_dir / "plan.toml").write_text("not even a plan: a callback must not read it\n")
    (run_dir / "limits.json").write_text('{"message_limit_bytes": 4096}\n')
    probe = (
        "import sys; sys.argv = ['orch', *sys.argv[1:]]\n"
        "from orchestrator.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith(('orchestrator.plan', 'orchestrator.policy'))), file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe, "inbox", "add", "--run", RUN, env("update", "z" * 5000)],
                          capture_output=True, text=True, timeout=60, env={**os.environ, "ORCH_HOME": str(home)})  # fmt: skip
    assert done.stdout.startswith("kept aside #1 (oversize): the message is 5106 bytes, over the 4096-byte limit")
    assert done.stderr.splitlines()[-1] == "[]"


def test_a_result_that_arrived_before_the_packet_was_recorded_moves_the_worker_once_it_is(tmp_path: Path) -> None:
    from datetime import timedelta

    from orchestrator.clock import FakeClock
    from orchestrator.config import Settings
    from orchestrator.engine import Engine
    from orchestrator.intake import catch_up
    from registry import InboxVerdict

    clock = FakeClock()
    settings = Settings(home=tmp_path, orch_home=tmp_path / "orch", policy_dir=tmp_path, src_root=tmp_path)
    engine = Engine(settings=settings, herdr=None, clock=clock)  # type: ignore[arg-type]
    ledger = engine.ledger
    run = ledger.create_run(RUN, controller_target="w1:p1")
    ledger.add_worker(RUN, "feature-a", name="feature-a", kind="codex", objective="x", pane_id="w1:pa")
    ledger.transition(RUN, "feature-a", S.PROVISIONING, S.READY)
    sent_at = clock.now()
    clock.advance(2)
    # The callback lands while the ledger still says ready (a crash right after the packet went out): kept on the worker.
    result = ledger.record_inbound(RUN, "raw", source="test", verdict=InboxVerdict.ACCEPTED, fingerprint="f", task_label="feature-a", kind="result")
    ledger.update_worker(RUN, "feature-a", fact="callback", last_callback_id=result.id)
    ledger.transition(RUN, "feature-a", S.READY, S.DISPATCHED)

    assert catch_up(engine, run, "feature-a", sent_at + timedelta(seconds=5)).state is S.DISPATCHED  # older than the prompt: no
    assert catch_up(engine, run, "feature-a", sent_at).state is S.RESULT
    engine.close()
