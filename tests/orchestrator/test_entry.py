"""The `orch` console script: a worker's callback without click answers exactly as the click CLI does."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from orchestrator import cli, entry
from orchestrator.config import Settings
from orchestrator.engine import Engine
from orchestrator.intake import save_message_limit
from packets import DEFAULT_MESSAGE_LIMIT
from registry import RunStatus, RunVerdict, WorkerState
from registry.records import as_dict

S = WorkerState
_spec = importlib.util.spec_from_file_location("hostile_corpus", Path(__file__).with_name("test_inbox_hostile.py"))
assert _spec is not None and _spec.loader is not None
hostile = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = hostile  # its dataclasses look their module up
_spec.loader.exec_module(hostile)
RUN = hostile.RUN


def _home(root: Path, name: str) -> Path:
    """A ledger with run RUN and two dispatched workers (as test_intake builds it), and its saved message limit."""
    settings = Settings(home=root, orch_home=root / name, policy_dir=root / "policies", src_root=root / "src")
    engine = Engine(settings=settings, herdr=None, env={})  # type: ignore[arg-type]
    ledger = engine.ledger
    ledger.create_run(hostile.OLD, controller_target="w1:p1")
    ledger.create_run(RUN, controller_target="w1:p1")
    for task, worker, pane in (("fix-login", "fix-login", "w1:p2"), ("docs-readme", "docs", "docs")):
        ledger.add_worker(RUN, task, name=worker, kind="codex", objective="x", pane_id=pane, reply_target=pane, worktree_path=str(root / "wt"))
        ledger.transition(RUN, task, S.PROVISIONING, S.READY)
        ledger.transition(RUN, task, S.READY, S.DISPATCHED)
    save_message_limit(engine, RUN, DEFAULT_MESSAGE_LIMIT)
    engine.close()
    return settings.orch_home


def _rows(home: Path) -> Any:
    settings = Settings(home=home.parent, orch_home=home, policy_dir=home.parent / "policies", src_root=home.parent / "src")
    engine = Engine(settings=settings, herdr=None, env={})  # type: ignore[arg-type]
    try:
        ledger = engine.ledger
        inbox = [{k: v for k, v in as_dict(m).items() if k not in {"received_at"}} for m in ledger.list_inbox(RUN)]
        events = [{k: v for k, v in as_dict(e).items() if k not in {"at"}} for e in ledger.events(RUN)]
        workers = [{k: v for k, v in as_dict(w).items() if k not in {"updated_at", "created_at"}} for w in ledger.list_workers(RUN)]
    finally:
        engine.close()
    return json.loads(json.dumps([inbox, events, workers], default=str).replace(str(home), "<orch-home>"))


Main = Callable[[], None]


def _call(main: Main, home: Path, argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    monkeypatch.setenv("ORCH_HOME", str(home))
    monkeypatch.setattr(sys, "argv", ["orch", *argv])
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    out, err = capsys.readouterr()
    return code, out.replace(str(home), "<orch-home>"), err.replace(str(home), "<orch-home>")


@pytest.fixture
def homes(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    (tmp_path / "wt").mkdir()
    yield _home(tmp_path, "click"), _home(tmp_path, "entry")


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["inbox", "add", "--run", RUN, "[h]\nx"], (RUN, "[h]\nx")),
        (["inbox", "add", "--run", RUN, "-"], None),  # stdin: click's
        (["inbox", "add", "--run", RUN, "--json", "x"], None),
        (["inbox", "add", "--run", RUN, "x", "--json"], None),
        (["inbox", "add", "--run", RUN, "--check-in"], None),
        (["inbox", "add", f"--run={RUN}", "x"], None),
        (["inbox", "add", "--run", "--json", "x"], None),
        (["inbox", "add", "--run", RUN, ""], None),
        (["inbox", "add", "--run", RUN, "--", "x"], (RUN, "x")),
        (["inbox", "add", "--run", RUN, "--", "-"], None),  # stdin all the same
        # A worker's text that looks like an option is still its text (issue 22: the argv door never drops).
        (["inbox", "add", "--run", RUN, "-x"], (RUN, "-x")),
        (["inbox", "add", "--run", RUN, "--json"], None),  # the option itself (no TEXT given)
        (["inbox", "add", "--run", RUN, "--", "--json"], (RUN, "--json")),
        (["inbox", "add", "--run", RUN, "--json\n"], (RUN, "--json\n")),
        (["inbox", "add", "--run", RUN, "--", "--help"], (RUN, "--help")),
        (["inbox", "add", "x", "--run", RUN], None),
        (["-v", "inbox", "add", "--run", RUN, "x"], None),
        (["inbox", "list", "--run", RUN, "x"], None),
    ],
)
def test_only_the_callback_form_packets_write_skips_click(argv: list[str], expected: tuple[str, str] | None) -> None:
    assert entry.callback_argv(argv) == expected


def test_every_hostile_callback_gets_the_same_output_exit_and_rows_as_through_click(
    homes: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    through_click, direct = homes
    root = through_click.parent
    texts = [case.raw.replace("{wt}", str(root / "wt")).replace("{tmp}", str(root)) for case in hostile.CORPUS if "{reports}" not in case.raw]
    texts += [hostile.env("result", "Status: done\nCommits: none\nChanged files: café.md\nChecks:\n- t => exit 0\nResidual risk: ü"),
              hostile.sized(DEFAULT_MESSAGE_LIMIT * 2), hostile.env(body="\x1b[2Jcleared?")]  # fmt: skip
    assert len(texts) > 20
    for text in texts:
        argv = ["inbox", "add", "--run", RUN, text]
        assert _call(cli.main, through_click, argv, monkeypatch, capsys) == _call(entry.main, direct, argv, monkeypatch, capsys), text[:80]
    assert _rows(through_click) == _rows(direct)


def test_what_the_intake_hands_back_is_answered_by_click(
    homes: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    through_click, direct = homes
    cases = [
        ["inbox", "add", "--run", "w9:p9-20261130T080000Z", hostile.env(body="No such run.")],  # the full path says so
        ["inbox", "add", "--run", RUN, "   "],  # empty: one clear line, nothing recorded
        ["inbox", "add", "--run", RUN, "--json", hostile.env(body="As JSON.")],  # not the callback form at all
    ]
    for argv in cases:
        one, other = _call(cli.main, through_click, argv, monkeypatch, capsys), _call(entry.main, direct, argv, monkeypatch, capsys)
        assert one == other
    assert one[0] == 0 and json.loads(one[1])["messages"][0]["verdict"] == "accepted"
    for home in homes:
        settings = Settings(home=home.parent, orch_home=home, policy_dir=tmp_path, src_root=tmp_path)
        engine = Engine(settings=settings, herdr=None, env={})  # type: ignore[arg-type]
        engine.ledger.set_run_status(RUN, RunStatus.FINISHED, verdict=RunVerdict.PASS)
        engine.close()
    late = ["inbox", "add", "--run", RUN, hostile.env(body="After the end.")]
    assert _call(cli.main, through_click, late, monkeypatch, capsys) == _call(entry.main, direct, late, monkeypatch, capsys)
    nowhere = tmp_path / "no-ledger-here"
    assert _call(cli.main, nowhere, late, monkeypatch, capsys) == _call(entry.main, nowhere, late, monkeypatch, capsys)
    assert _rows(through_click) == _rows(direct)


def test_a_callback_through_the_console_script_imports_neither_click_nor_pydantic(homes: tuple[Path, Path]) -> None:
    _, home = homes
    probe = (
        "import sys; sys.argv = ['orch', *sys.argv[1:]]\n"
        "from orchestrator.entry import main\n"
        "main()\n"
        "print(sorted(m for m in ('click', 'pydantic', 'tenacity', 'tabulate', 'pexpect') if m in sys.modules), file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe, "inbox", "add", "--run", RUN, hostile.env(body="Fast.")],
                          capture_output=True, text=True, timeout=60, env={**os.environ, "ORCH_HOME": str(home)})  # fmt: skip
    assert (done.stdout, done.stderr) == ("accepted #1: update from fix-login for task fix-login (worker stays dispatched)\n", "[]\n")


DASHED = ["-x", "--json\n", "--help me", "--check-in=1", f"--run={hostile.OLD}", "-\n" + hostile.env(), "--" + hostile.env(), "-rf /", "--\n--"]


@pytest.mark.parametrize("text", DASHED, ids=range(len(DASHED)))
def test_a_callback_that_looks_like_an_option_is_recorded_through_either_door(
    text: str, homes: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    through_click, direct = homes
    # The fast path (entry), and click when the fast path hands the call over (here: stdout not UTF-8 is simulated by
    # calling click's main with the command line entry gives it).
    code, out, err = _call(entry.main, direct, ["inbox", "add", "--run", RUN, text], monkeypatch, capsys)
    assert (code, err) == (0, ""), err
    assert out.startswith("kept aside #1 (malformed_header): malformed header: the first line must start with"), out
    argv = entry.with_text_last(["inbox", "add", "--run", RUN, text])
    assert _call(cli.main, through_click, argv, monkeypatch, capsys) == (code, out, err)
    assert _rows(through_click) == _rows(direct)
    [message] = _rows(direct)[0]
    assert (message["raw"], message["reason_code"]) == (text, "malformed_header")


def test_click_alone_reads_a_dashed_text_as_text_too(
    homes: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    through_click, _ = homes
    code, out, _err = _call(cli.main, through_click, ["inbox", "add", "--run", RUN, "--source", "cli", "-x"], monkeypatch, capsys)
    assert code == 0 and "malformed_header" in out
