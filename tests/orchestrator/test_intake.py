"""The one callback path (`orchestrator.intake`) through a worker's own transport: `take`, from the environment alone.

The hostile corpus (tests/orchestrator/test_inbox_hostile.py) runs through `add_message`, the engine's way in; here the
same cases go through `take`, the way a worker's `orch inbox add --run RUN TEXT|-` comes in (argument and stdin), and
keep their verdicts; the engine's and the worker's transports leave the same rows; a valid callback imports no pydantic.
"""

from __future__ import annotations

import importlib.util
import io
import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from orchestrator.config import Settings
from orchestrator.engine import Engine
from orchestrator.intake import Added, Raw, add_message, read_text, render_added, save_message_limit, take
from orchestrator.reportfiles import report_dir
from packets import DEFAULT_MESSAGE_LIMIT
from registry import InboxVerdict, RunStatus, RunVerdict, WorkerState
from registry.records import as_dict

S = WorkerState
_spec = importlib.util.spec_from_file_location("hostile_corpus", Path(__file__).with_name("test_inbox_hostile.py"))
assert _spec is not None and _spec.loader is not None
hostile = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = hostile  # its dataclasses look their module up
_spec.loader.exec_module(hostile)
RUN, OLD = hostile.RUN, hostile.OLD


@dataclass
class Side:
    """One ledger, fed through one transport."""

    engine: Engine
    env: dict[str, str]

    @property
    def home(self) -> Path:
        return self.engine.settings.orch_home


def _side(root: Path, wt: Path, name: str) -> Side:
    settings = Settings(home=root, orch_home=root / name, policy_dir=root / "policies", src_root=root / "src")
    engine = Engine(settings=settings, herdr=None, env={})  # type: ignore[arg-type]
    ledger = engine.ledger
    ledger.create_run(OLD, controller_target="w1:p1")
    ledger.create_run(RUN, controller_target="w1:p1")
    for task, worker, pane, worktree in (("fix-login", "fix-login", "w1:p2", wt), ("docs-readme", "docs", "docs", root / "wt-docs")):
        ledger.add_worker(RUN, task, name=worker, kind="codex", objective="x", pane_id=pane, reply_target=pane, worktree_path=str(worktree))
        ledger.transition(RUN, task, S.PROVISIONING, S.READY)
        ledger.transition(RUN, task, S.READY, S.DISPATCHED)
    hostile.add_late_workers(ledger)
    save_message_limit(engine, RUN, DEFAULT_MESSAGE_LIMIT)  # as preflight does
    return Side(engine, {"HOME": str(root), "ORCH_HOME": str(settings.orch_home)})


@pytest.fixture(scope="module")
def sides(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Side, Side, Path]]:
    # The hostile corpus's world (its worktree, symlinks, report folders), with two ledgers: the engine's transport, the worker's.
    root = tmp_path_factory.mktemp("intake")
    wt = root / "wt"
    (wt / "dir").mkdir(parents=True)
    (root / "secret.md").write_text("secret\n")
    (wt / "REPORT.md").write_text("# report\n")
    (wt / "link-out.md").symlink_to(root / "secret.md")
    (wt / "link-in.md").symlink_to(wt / "REPORT.md")
    (wt / "dir-out").symlink_to(root)
    full, fast = _side(root, wt, "full"), _side(root, wt, "fast")
    for side in (full, fast):  # as the corpus's world has it: a message its duplicate row repeats
        add_message(side.engine, side.engine.ledger.get_run(RUN), hostile.env(body="Already said this."))
    yield full, fast, root
    full.engine.close()
    fast.engine.close()


def _fill(text: str, root: Path, side: Side) -> str:
    reports = report_dir(side.engine.run_dir(RUN), "fix-login")
    return text.replace("{wt}", str(root / "wt")).replace("{reports}", str(reports)).replace("{tmp}", str(root))


def _full(side: Side, raw: str, *, pane: str | None = None) -> tuple[dict[str, Any], str]:
    """What the engine's callers (`orch inbox add` without a run, `--check-in`, the door) do: `add_message` on its ledger."""
    run = side.engine.ledger.get_run(RUN)
    side.engine.env = {"HERDR_PANE_ID": pane} if pane else {}
    try:
        added = add_message(side.engine, run, read_text(raw, DEFAULT_MESSAGE_LIMIT))
    finally:
        side.engine.env = {}
    return {"run_id": RUN, "messages": [added.as_json()]}, render_added(added)


def _fast(side: Side, raw: str, *, door: str = "argument", pane: str | None = None) -> tuple[dict[str, Any], str]:
    text, stdin = (raw, io.BytesIO()) if door == "argument" else ("-", io.BytesIO(raw.encode("utf-8", errors="surrogateescape")))
    outcome = take({**side.env, **({"HERDR_PANE_ID": pane} if pane else {})}, RUN, text, stdin, source="cli")
    assert isinstance(outcome, Added), "the worker's transport handed a callback back"
    return {"run_id": RUN, "messages": [outcome.as_json()]}, render_added(outcome)


def _ledger(side: Side) -> object:
    """Every row the callbacks touch, without the clock's columns, with the side's own folder named alike."""
    ledger = side.engine.ledger
    # A message naming the side's own folder (a report path) has a fingerprint of its own: compare the rest of it.
    inbox = [{k: v for k, v in as_dict(m).items() if k not in {"received_at", *(("fingerprint",) if str(side.home) in m.raw else ())}} for m in ledger.list_inbox(RUN)]
    events = [{k: v for k, v in as_dict(e).items() if k not in {"at"}} for e in ledger.events(RUN)]
    workers = [{k: v for k, v in as_dict(w).items() if k not in {"updated_at", "created_at"}} for w in ledger.list_workers(RUN)]
    return json.loads(json.dumps([inbox, events, workers], default=str).replace(str(side.home), "<orch-home>"))


def _same(full: Side, fast: Side, one: tuple[dict[str, Any], str], other: tuple[dict[str, Any], str]) -> None:
    assert json.loads(json.dumps(one).replace(str(full.home), "<orch-home>")) == json.loads(json.dumps(other).replace(str(fast.home), "<orch-home>"))
    assert _ledger(full) == _ledger(fast)


@pytest.mark.parametrize("case", hostile.CORPUS, ids=[case.name for case in hostile.CORPUS])
def test_every_hostile_callback_keeps_its_verdict_and_leaves_the_same_rows_through_both_transports(case: Any, sides: tuple[Side, Side, Path]) -> None:
    full, fast, root = sides
    taken = _fast(fast, _fill(case.raw, root, fast), pane=case.pane)
    [added] = taken[0]["messages"]
    assert added["reason_code"] == case.reason, added["reason"]
    assert (added["reason"] or "").startswith(_fill(case.explains, root, fast)), added["reason"]
    _same(full, fast, _full(full, _fill(case.raw, root, full), pane=case.pane), taken)
    for side in (full, fast):
        [last] = side.engine.ledger.list_inbox(RUN)[-1:]
        hostile.back_to_work(side.engine.ledger, last.task_label if last.verdict is InboxVerdict.ACCEPTED else None)


def test_the_stdin_door_and_a_finished_run_agree_too(sides: tuple[Side, Side, Path]) -> None:
    full, fast, _ = sides
    update = hostile.env(body="Through stdin.")
    _same(full, fast, _full(full, update), _fast(fast, update, door="stdin"))
    unicode_result = hostile.env("result", "Status: done\nCommits: none\nChanged files: café.md\nChecks:\n- pytest => exit 0\n  | 漢字 passed\nResidual risk: ünïcode")
    _same(full, fast, _full(full, unicode_result), _fast(fast, unicode_result))  # reported_checks: the same JSON text
    big = hostile.sized(DEFAULT_MESSAGE_LIMIT * 2)  # over the limit: only its prefix, size and hash are kept
    _same(full, fast, _full(full, big), _fast(fast, big, door="stdin"))
    for side in (full, fast):
        side.engine.ledger.set_run_status(RUN, RunStatus.FINISHED, verdict=RunVerdict.PASS)
    late = hostile.env(body="After the end.")
    _same(full, fast, _full(full, late), _fast(fast, late))


def test_the_worker_transport_hands_back_what_only_the_engine_can_answer(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "ORCH_HOME": str(tmp_path / "orch")}
    assert take(env, RUN, "x", io.BytesIO(), source="cli") is None  # no ledger: nothing is created
    assert not (tmp_path / "orch").exists()
    side = _side(tmp_path, tmp_path / "wt", "orch")
    assert take(env, "w1:p9-20261130T080000Z", "x", io.BytesIO(), source="cli") is None  # no such run
    (side.engine.run_dir(RUN) / "limits.json").unlink()  # a run from before limits were saved: the plan decides
    assert take(env, RUN, "x", io.BytesIO(), source="cli") is None
    save_message_limit(side.engine, RUN, DEFAULT_MESSAGE_LIMIT)
    empty = take(env, RUN, "-", io.BytesIO(b" \n"), source="cli")  # read (stdin is gone), unrecorded: the engine says why
    assert isinstance(empty, Raw) and empty.text == " \n"
    assert side.engine.ledger.list_inbox(RUN) == []
    side.engine.close()


PROBE = """
import sys
from orchestrator.cli import main
sys.argv = ["orch", "inbox", "add", "--run", sys.argv[1], sys.argv[2]]
try:
    main()
except SystemExit as done:
    code = done.code
heavy = sorted(m for m in ("pydantic", "pydantic_core", "tenacity", "tabulate", "pexpect") if m in sys.modules)
print(heavy, code, file=sys.stderr)
"""


def test_a_valid_callback_never_imports_pydantic(tmp_path: Path) -> None:
    import os

    side = _side(tmp_path, tmp_path / "wt", "orch")
    side.engine.close()
    env = {**os.environ, **side.env}
    done = subprocess.run([sys.executable, "-c", PROBE, RUN, hostile.env(body="Fast.")], capture_output=True, text=True, timeout=60, env=env)
    assert (done.stdout, done.stderr.splitlines()[-1]) == ("accepted #1: update from fix-login for task fix-login (worker stays dispatched)\n", "[] 0")


# --- issue 22's classes through stdin (the worker's transport) and the engine's (`--check-in`, the Python API) ---
DOOR_CASES = [
    *hostile.VISIBLE, *hostile.LOOKALIKE, *hostile.TURN, *hostile.PANES,
    # Both doors measure the same bytes: one at the limit is at the limit on either.
    hostile.accepted("at-the-limit-through-the-engine", hostile.sized(DEFAULT_MESSAGE_LIMIT)),
    hostile.aside("over-the-limit-through-the-engine", hostile.sized(DEFAULT_MESSAGE_LIMIT + 1), "oversize", "the message is"),
]  # fmt: skip


@pytest.fixture(scope="module")
def doors(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Side, Side, Path]]:
    root = tmp_path_factory.mktemp("doors")
    (root / "wt").mkdir()
    stdin, full = _side(root, root / "wt", "stdin"), _side(root, root / "wt", "full")
    yield stdin, full, root
    stdin.engine.close()
    full.engine.close()


@pytest.mark.parametrize("case", DOOR_CASES, ids=[case.name for case in DOOR_CASES])
def test_every_new_class_keeps_its_verdict_through_stdin_and_the_engine(case: Any, doors: tuple[Side, Side, Path]) -> None:
    stdin, full, root = doors
    by_stdin = _fast(stdin, _fill(case.raw, root, stdin), door="stdin", pane=case.pane)[0]["messages"][0]
    run = full.engine.ledger.get_run(RUN)
    full.engine.env = {"HERDR_PANE_ID": case.pane} if case.pane else {}
    try:
        text = _fill(case.raw, root, full)
        by_full = add_message(full.engine, run, read_text(text, DEFAULT_MESSAGE_LIMIT), limit=DEFAULT_MESSAGE_LIMIT)
    finally:
        full.engine.env = {}
    assert (by_stdin["reason_code"], by_full.reason_code) == (case.reason, case.reason), (by_stdin["reason"], by_full.reason)
    for side, task in ((stdin, by_stdin["task"] if case.reason is None else None), (full, by_full.task if case.reason is None else None)):
        hostile.back_to_work(side.engine.ledger, task)
