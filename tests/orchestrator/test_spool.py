"""A remote worker's callbacks (`orchestrator.spool`): spooled on its host, collected into the one intake exactly once.

The "remote" host is a folder with its own ORCH_HOME; ssh is stubbed at the one seam (`orchestrator.remote.Runner`,
the engine's `remote_runner`) by a runner that hands the remote command string to `sh -c` in the host's environment,
as sshd hands it to the user's shell, so the host's real `orch` (this checkout's) answers `inbox spooled` and `ack`.
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest

from orchestrator import entry, spool
from orchestrator.config import Settings
from orchestrator.engine import Engine
from orchestrator.errors import OrchError
from orchestrator.intake import save_message_limit
from orchestrator.plan import Host
from packets import DEFAULT_MESSAGE_LIMIT
from registry import InboxVerdict, WorkerState

S = WorkerState
_spec = importlib.util.spec_from_file_location("hostile_corpus", Path(__file__).with_name("test_inbox_hostile.py"))
assert _spec is not None and _spec.loader is not None
hostile = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = hostile
_spec.loader.exec_module(hostile)
RUN = hostile.RUN
ORCH = str(Path(sys.executable).parent / "orch")


class LocalRemote:
    """The ssh seam run locally: `sh -c COMMAND` in the host's environment only; ``fail`` scripts exit 255 per call."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = dict(env)
        self.commands: list[str] = []
        self.fail: set[int] = set()
        self.interrupt: set[int] = set()

    def __call__(self, argv: Sequence[str], *, env: Mapping[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
        assert argv[0] == "ssh" and argv[-2] == "--", argv
        self.commands.append(argv[-1])
        call = len(self.commands)
        if call in self.interrupt:
            raise KeyboardInterrupt  # the controller stopped mid-collection
        if call in self.fail:
            return subprocess.CompletedProcess(list(argv), 255, "", "ssh: connect to host box port 22: Connection refused")
        done = subprocess.run(["sh", "-c", argv[-1]], env=self.env, capture_output=True, text=True, timeout=timeout)
        return subprocess.CompletedProcess(list(argv), done.returncode, done.stdout, done.stderr)


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[Engine, LocalRemote, Path, dict[str, Host]]]:
    """A controller ledger with run RUN whose worker fix-login runs on host "box", and that host's own ORCH_HOME."""
    settings = Settings(home=tmp_path, orch_home=tmp_path / "controller", policy_dir=tmp_path / "policies", src_root=tmp_path / "src")
    box_home = tmp_path / "box-orch"
    host_env = {"HOME": str(tmp_path / "box"), "PATH": os.environ["PATH"]}
    # The controller's own process runs in pane w1:p3 of its herdr, which is a local worker's pane id too.
    engine = Engine(settings=settings, herdr=None, env={"HERDR_PANE_ID": "w1:p3"})  # type: ignore[arg-type]
    ledger = engine.ledger
    ledger.create_run(RUN, controller_target="w1:p1")
    ledger.add_worker(RUN, "docs-readme", name="docs", kind="codex", objective="x", pane_id="w1:p3", reply_target="w1:p3")
    ledger.add_worker(RUN, "fix-login", name="fix-login", kind="codex", objective="x", pane_id="w1:p2", reply_target="w1:p2", host="box")
    ledger.transition(RUN, "fix-login", S.PROVISIONING, S.READY)
    ledger.transition(RUN, "fix-login", S.READY, S.DISPATCHED)
    save_message_limit(engine, RUN, DEFAULT_MESSAGE_LIMIT)
    runner = LocalRemote(host_env)
    engine.remote_runner = runner
    hosts = {"box": Host(machine="box", ssh="me@box", checkout="/srv/acme/api", orch=ORCH, orch_home=str(box_home))}
    yield engine, runner, box_home, hosts
    engine.close()


def _send(box_home: Path, text: str, pane: str | None = None) -> str:
    """What the worker's packet runs on its host: `orch inbox add --spool --run RUN TEXT` (the console script), from
    herdr pane ``pane`` there (its HERDR_PANE_ID) when given."""
    prefix = spool.callback_prefix(Host(machine="box", ssh="me@box", checkout="/srv/x", orch=ORCH, orch_home=str(box_home)), RUN)
    env = {"HOME": str(box_home.parent / "box"), "PATH": os.environ["PATH"], **({"HERDR_PANE_ID": pane} if pane else {})}
    done = subprocess.run([*prefix, text], env=env, capture_output=True, text=True, timeout=60, check=True)
    return done.stdout


def test_the_packet_of_a_remote_worker_spools_on_its_host(tmp_path: Path) -> None:
    host = Host(machine="box", ssh="me@box", checkout="/srv/acme/api", orch="/opt/orch/bin/orch", orch_home="/var/orch")
    assert spool.callback_prefix(host, RUN) == ("env", "ORCH_HOME=/var/orch", "/opt/orch/bin/orch", "inbox", "add", "--spool", "--run", RUN)
    bare = Host(machine="box", ssh="me@box", checkout="/srv/acme/api")
    assert spool.callback_prefix(bare, RUN) == ("orch", "inbox", "add", "--spool", "--run", RUN)


def test_a_spooled_entry_is_written_whole_or_not_at_all(tmp_path: Path) -> None:
    folder = tmp_path / "spool" / "r"
    first = spool.write(folder, b"one", now_ns=2)
    second = spool.write(folder, "tw\u00f6".encode(), now_ns=1)
    (folder / ".00000000000000000003-1-deadbeef.tmp").write_bytes(b"half")  # a crash mid-write: never an entry
    (folder / "../../escape.msg").write_bytes(b"x")

    assert [(e.id, e.data, e.size, e.complete) for e in spool.pending(folder)] == [(second, "tw\u00f6".encode(), 4, True), (first, b"one", 3, True)]
    assert oct(folder.stat().st_mode & 0o777) == "0o700"
    assert spool.ack(folder, [first, "../../escape", "nonsense", first]) == 1
    assert [e.id for e in spool.pending(folder)] == [second]
    assert spool.pending(tmp_path / "none") == []


def test_a_message_over_the_largest_limit_keeps_its_size_hash_and_prefix(tmp_path: Path) -> None:
    big = b"x" * (spool.KEEP_BYTES + 5)
    kept, size, digest = spool.read_stream(io.BytesIO(big))
    ident = spool.write(tmp_path, kept, size=size, sha256=digest)
    (entry,) = spool.pending(tmp_path)

    assert (entry.id, entry.size, entry.complete, len(entry.data)) == (ident, len(big), False, spool.PREFIX_BYTES)
    raw = spool.to_raw(entry, DEFAULT_MESSAGE_LIMIT)
    assert (raw.size, raw.complete, raw.sha256) == (len(big), False, digest)


def test_spool_argv_is_the_callback_form_with_spool() -> None:
    assert entry.spool_argv(["inbox", "add", "--spool", "--run", RUN, "text"]) == (RUN, "text")
    assert entry.spool_argv(["inbox", "add", "--spool", "--run", RUN, "--", "--json"]) == (RUN, "--json")
    assert entry.spool_argv(["inbox", "add", "--run", RUN, "text"]) is None
    assert entry.spool_argv(["inbox", "add", "--spool", "--run", RUN, "-"]) is None
    assert entry.with_text_last(["inbox", "add", "--spool", "--run", RUN, "-x"]) == ["inbox", "add", "--spool", "--run", RUN, "--", "-x"]


def test_an_empty_spooled_message_is_refused_and_nothing_is_kept(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "ORCH_HOME": str(tmp_path / "o")}
    with pytest.raises(OrchError) as caught:
        spool.spool_message(env, RUN, "  \n", io.BytesIO())
    assert caught.value.message == "the message is empty"
    assert spool.pending(spool.folder(tmp_path / "o", RUN)) == []


def test_a_callback_spooled_while_the_controller_is_away_is_accepted_once(world: tuple[Engine, LocalRemote, Path, dict[str, Host]]) -> None:
    engine, runner, box_home, hosts = world
    said = _send(box_home, hostile.env(body="Parser done."))
    (entry_,) = spool.pending(spool.folder(box_home, RUN))
    assert said == f"spooled {entry_.id} for run {RUN} on this host: the controller judges it when it next checks in\n"

    run = engine.ledger.get_run(RUN)
    (found,) = spool.collect(engine, run, hosts=hosts)

    assert (found.host, found.already, found.problem) == ("box", 0, None)
    assert [(a.verdict, a.task, a.kind) for a in found.added] == [(InboxVerdict.ACCEPTED, "fix-login", "update")]
    assert [(m.source, m.verdict) for m in engine.ledger.list_inbox(RUN)] == [(f"spool:box:{entry_.id}", InboxVerdict.ACCEPTED)]
    assert spool.pending(spool.folder(box_home, RUN)) == []
    assert runner.commands == [
        f"env ORCH_HOME={box_home} {ORCH} inbox spooled --run {RUN} --json",
        f"env ORCH_HOME={box_home} {ORCH} inbox ack --run {RUN} {entry_.id}",
    ]
    assert spool.collect(engine, run, hosts=hosts) == [spool.Collected("box")]  # nothing left, nothing twice


def test_a_collection_stopped_after_the_ledger_write_records_nothing_twice(world: tuple[Engine, LocalRemote, Path, dict[str, Host]]) -> None:
    engine, runner, box_home, hosts = world
    _send(box_home, hostile.env(kind="result", body="Done.\nChecks: none"))
    run = engine.ledger.get_run(RUN)
    runner.interrupt = {2}  # killed between the ledger commit and the acknowledgement
    with pytest.raises(KeyboardInterrupt):
        spool.collect(engine, run, hosts=hosts)
    assert len(spool.pending(spool.folder(box_home, RUN))) == 1  # never removed before it is in the ledger

    (found,) = spool.collect(engine, run, hosts=hosts)

    assert (found.added, found.already, found.problem) == ((), 1, None)
    assert [m.verdict for m in engine.ledger.list_inbox(RUN)] == [InboxVerdict.ACCEPTED]
    assert spool.pending(spool.folder(box_home, RUN)) == []


def test_two_collectors_racing_on_one_spool_entry_record_it_once(world: tuple[Engine, LocalRemote, Path, dict[str, Host]]) -> None:
    # The ledger, not the run's driver lock, keeps a spooled message recorded once: collector A lists the entry, then
    # collector B (another process's ledger connection, holding no lock of A's) lists, records and acknowledges it
    # before A records it. A's recording is a no-op that says "already recorded"; its acknowledgement finds it gone.
    engine, runner, box_home, hosts = world
    _send(box_home, hostile.env(kind="result", body="Done.\nChecks: none"))
    other = Engine(settings=engine.settings, herdr=None, env={"HERDR_PANE_ID": "w1:p3"})  # type: ignore[arg-type]
    other.remote_runner = LocalRemote(runner.env)
    raced: list[list[spool.Collected]] = []
    listing = runner.__call__

    def first_lists_then_the_other_collects(argv: Sequence[str], *, env: Mapping[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
        done = listing(argv, env=env, timeout=timeout)
        if len(runner.commands) == 1:
            raced.append(spool.collect(other, other.ledger.get_run(RUN), hosts=hosts))
        return done

    engine.remote_runner = first_lists_then_the_other_collects
    try:
        (mine,) = spool.collect(engine, engine.ledger.get_run(RUN), hosts=hosts)
    finally:
        other.close()

    ((theirs,),) = raced
    assert [(a.verdict, a.task, a.kind, a.already_recorded) for a in theirs.added] == [(InboxVerdict.ACCEPTED, "fix-login", "result", False)]
    assert (mine.added, mine.already, mine.problem) == ((), 1, None)
    assert [(m.id, m.verdict) for m in engine.ledger.list_inbox(RUN)] == [(theirs.added[0].inbox_id, InboxVerdict.ACCEPTED)]
    assert [(e.kind, e.to_state) for e in engine.ledger.events(RUN, task_label="fix-login")][-2:] == [("inbox_recorded", None), ("transition", S.RESULT)]
    assert spool.pending(spool.folder(box_home, RUN)) == []


def test_an_unreachable_host_keeps_its_messages_for_the_next_check_in(world: tuple[Engine, LocalRemote, Path, dict[str, Host]]) -> None:
    engine, runner, box_home, hosts = world
    _send(box_home, hostile.env(body="one"))
    run = engine.ledger.get_run(RUN)
    runner.fail = {1}
    (found,) = spool.collect(engine, run, hosts=hosts)
    assert found == spool.Collected("box", problem="cannot list its spool: ssh: connect to host box port 22: Connection refused")
    assert engine.ledger.list_inbox(RUN) == []

    runner.fail = {3}  # listed and recorded, then the link drops before the acknowledgement
    (found,) = spool.collect(engine, run, hosts=hosts)
    assert len(found.added) == 1 and found.problem == (
        "cannot acknowledge its spool entries (collected again next time, recorded once): ssh: connect to host box port 22: Connection refused"
    )
    (again,) = spool.collect(engine, run, hosts=hosts)
    assert (again.added, again.already, again.problem) == ((), 1, None)
    assert len(engine.ledger.list_inbox(RUN)) == 1


def test_a_spooled_callback_is_judged_by_the_same_rule_and_never_by_the_controllers_pane(
    world: tuple[Engine, LocalRemote, Path, dict[str, Host]],
) -> None:
    # The collecting process runs in the controller's pane w1:p3, a local worker's: that pane (of another server) is
    # never read as where the remote worker's message came from (it would be kept aside as wrong_pane).
    engine, _runner, box_home, hosts = world
    _send(box_home, hostile.env(body="from the right worker"))
    _send(box_home, hostile.env(body="not mine", sender="someone-else"))
    (found,) = spool.collect(engine, engine.ledger.get_run(RUN), hosts=hosts)
    assert [(a.verdict, a.reason_code) for a in found.added] == [(InboxVerdict.ACCEPTED, None), (InboxVerdict.KEPT_ASIDE, "wrong_sender")]


def test_a_spooled_callback_imports_neither_click_nor_pydantic(tmp_path: Path) -> None:
    probe = (
        "import sys; sys.argv = ['orch', *sys.argv[1:]]\n"
        "from orchestrator.entry import main\n"
        "main()\n"
        "print(sorted(m for m in ('click', 'pydantic', 'tenacity', 'tabulate', 'pexpect', 'sqlite3') if m in sys.modules), file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe, "inbox", "add", "--spool", "--run", RUN, hostile.env(body="Fast.")],
                          capture_output=True, text=True, timeout=60, env={**os.environ, "HOME": str(tmp_path), "ORCH_HOME": str(tmp_path / "o")})  # fmt: skip
    (entry_,) = spool.pending(spool.folder(tmp_path / "o", RUN))
    assert (done.stdout, done.stderr) == (spool.render_spooled(entry_.id, RUN), "[]\n")
    assert entry_.data == hostile.env(body="Fast.").encode()


@pytest.mark.parametrize("text", ["-x", "--json", "two\nlines $(x) ;"])
def test_click_spools_what_the_console_script_spools(tmp_path: Path, text: str) -> None:
    # `-` (stdin) and a text shaped like an option go through click; the same bytes are spooled either way.
    env = {**os.environ, "HOME": str(tmp_path), "ORCH_HOME": str(tmp_path / "o")}
    for argv, stdin in ((["inbox", "add", "--spool", "--run", RUN, "--", text], None), (["inbox", "add", "--spool", "--run", RUN, "-"], text)):
        done = subprocess.run([ORCH, *argv], input=stdin, capture_output=True, text=True, timeout=60, env=env)
        assert done.returncode == 0, done.stderr
    assert [e.data for e in spool.pending(spool.folder(tmp_path / "o", RUN))] == [text.encode()] * 2
    refused = subprocess.run([ORCH, "inbox", "add", "--spool", "--check-in", "--run", RUN, "x"], capture_output=True, text=True, timeout=60, env=env)
    assert (refused.returncode, refused.stdout, refused.stderr) == (
        1, "", "orch: --spool needs --run RUN_ID and takes no --check-in\nhint: a remote worker's packet gives the exact command\n",
    )


def _controller_with_box(tmp_path: Path, path: Sequence[S] = (S.PROVISIONING, S.READY, S.DISPATCHED, S.WORKING)) -> tuple[Engine, LocalRemote, Path]:
    """A controller (fake herdr, fake clock) whose run RUN has its worker fix-login on host "box" (its own fake herdr
    and ORCH_HOME, reached through the local ssh seam), moved along ``path``, with the plan naming the host."""
    from fake_herdr import FakeHerdr

    from orchestrator.clock import FakeClock

    herdr = FakeHerdr(cwd=tmp_path, version="0.8.2")
    box_herdr = FakeHerdr(cwd=tmp_path, version="0.8.2")  # the box's own server: the worker's agent runs there
    pane = box_herdr.tab_create(workspace="w1").root_pane.pane_id
    box_herdr.add_agent(pane, "fix-login", "codex", status="working")
    settings = Settings(home=tmp_path, orch_home=tmp_path / "controller", policy_dir=tmp_path / "policies", src_root=tmp_path / "src")
    engine = Engine(settings=settings, herdr=herdr, clock=FakeClock())
    engine.host_herdrs["box"] = box_herdr
    box_home = tmp_path / "box-orch"
    runner = LocalRemote({"HOME": str(tmp_path / "box"), "PATH": os.environ["PATH"]})
    engine.remote_runner = runner
    engine.ledger.create_run(RUN, controller_target="w1:p1")
    engine.ledger.add_worker(RUN, "fix-login", name="fix-login", kind="codex", objective="x", pane_id=pane, reply_target="w1:p2", host="box")
    for before, after in zip(path, path[1:], strict=False):
        engine.ledger.transition(RUN, "fix-login", before, after)
    save_message_limit(engine, RUN, DEFAULT_MESSAGE_LIMIT)
    engine.run_dir(RUN).mkdir(parents=True, exist_ok=True)
    (engine.run_dir(RUN) / "plan.toml").write_text(f"""organization = "acme"
repo = "widgets"
base = "origin/main"

[hosts.box]
machine = "box"
ssh = "me@box"
checkout = "/srv/acme/widgets"
orch = "{ORCH}"
orch_home = "{box_home}"

[[workers]]
task = "fix-login"
objective = "Fix it."
deliverable = "Commits."
branch = "fix/login"
claim = ["src/**"]
host = "box"
""")
    return engine, runner, box_home


def test_a_wait_collects_a_remote_spool_between_check_ins_and_wakes_for_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestrator.door import SPOOL_POLL_S, wait_run

    engine, runner, box_home = _controller_with_box(tmp_path)
    clock = engine.clock
    advance = clock.sleep
    polls: list[float] = []

    def sleep(seconds: float) -> None:
        advance(seconds)
        polls.append(seconds)
        if len(polls) == 2:  # the worker calls back on its host while the controller waits (its check-in not due)
            _send(box_home, hostile.env(body="Parser done"))

    monkeypatch.setattr(clock, "sleep", sleep)
    try:
        waited = wait_run(engine, engine.ledger.get_run(RUN), as_json=True)
    finally:
        engine.close()

    # The first check-in at once (lifecycle due, it collects too); between check-ins the wait collects at its next
    # poll (1 s) and every SPOOL_POLL_S after: the callback spooled at 2 s is home at 6 s and wakes it.
    assert (waited.woke, waited.waited_s) == ("callback", 1 + SPOOL_POLL_S)
    assert [(o.task, o.what, o.text) for o in waited.observations] == [("fix-login", "update", "Parser done")]
    listed = [c for c in runner.commands if " inbox spooled " in c]
    assert len(listed) == 4  # the first check-in's, the wait's at 1 s and at 6 s, the check-in's it made due


class _Integrating(Exception):
    """Stands for integration: the test stops `orch finish` there and looks at what it was about to judge."""


def test_finish_collects_the_spools_once_more_before_it_judges_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestrator import door

    # The worker's work was judged (rejected) at the last check-in; it calls back on its host after that check-in.
    engine, runner, box_home = _controller_with_box(tmp_path, (S.PROVISIONING, S.READY, S.DISPATCHED, S.RESULT, S.VERIFYING, S.REJECTED))
    _send(box_home, hostile.env(body="One more thing: the parser also needs the fix in lexer.py"))
    assert len(spool.pending(spool.folder(box_home, RUN))) == 1
    seen: list[list[tuple[str | None, str]]] = []

    def integrate(engine: Engine, run: object) -> None:
        seen.append([(m.task_label, m.source) for m in engine.ledger.list_inbox(RUN)])
        raise _Integrating

    monkeypatch.setattr(door, "integrate_run", integrate)
    try:
        with pytest.raises(_Integrating):
            door.finish_run(engine, engine.ledger.get_run(RUN))
        assert spool.pending(spool.folder(box_home, RUN)) == []  # brought home, acknowledged there
    finally:
        engine.close()
    ((message,),) = seen
    assert message[0] == "fix-login" and message[1].startswith("spool:box:")


def test_a_host_the_last_collection_cannot_reach_is_named_in_the_report_until_it_is_reached(tmp_path: Path) -> None:
    from orchestrator.report import build_report, render_markdown
    from packets.inert import markdown_code

    engine, runner, box_home = _controller_with_box(tmp_path, (S.PROVISIONING, S.READY, S.DISPATCHED, S.FAILED))
    _send(box_home, hostile.env(body="late word"))
    runner.fail = {1}
    try:
        run = engine.ledger.get_run(RUN)
        assert spool.collect_last(engine, run) == (0, [spool.kept_text("box", "cannot list its spool: ssh: connect to host box port 22: Connection refused")])
        report = build_report(engine.ledger, RUN)
        assert report.spools_kept == (
            "host box was not collected from before the run was judged (cannot list its spool: ssh: connect to host box port 22: Connection refused); "
            "messages its workers spooled after the last check-in are kept there",
        )
        assert f"Spool: {markdown_code(report.spools_kept[0])}" in render_markdown(report, engine.ledger.list_workers(RUN))
        assert len(spool.pending(spool.folder(box_home, RUN))) == 1  # kept there

        assert spool.collect_last(engine, run) == (1, [])  # reached at last: collected, and the report says no more
        assert build_report(engine.ledger, RUN).spools_kept == ()
        assert spool.collect_last(engine, run) == (0, [])
    finally:
        engine.close()


def test_orch_run_collects_the_spools_once_more_before_it_integrates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestrator import run as person
    from orchestrator.progress import Progress

    engine, runner, box_home = _controller_with_box(tmp_path, (S.PROVISIONING, S.READY, S.DISPATCHED, S.FAILED))
    listed: list[str] = []

    def late(argv: Sequence[str], *, env: Mapping[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
        done = runner(argv, env=env, timeout=timeout)
        if " inbox spooled " in argv[-1] and not listed:
            listed.append(argv[-1])  # the worker calls back on its host just after the check-in's collection
            _send(box_home, hostile.env(body="Late word from the box"))
        return done

    engine.remote_runner = late
    seen: list[list[tuple[str | None, str]]] = []

    def integrate(engine: Engine, run: object) -> None:
        seen.append([(m.task_label, m.source) for m in engine.ledger.list_inbox(RUN)])
        raise _Integrating

    monkeypatch.setattr(person, "integrate_run", integrate)
    try:
        with pytest.raises(_Integrating):
            person.drive(engine, engine.ledger.get_run(RUN), Progress(io.StringIO(), live=False), interval_s=0)
        assert spool.pending(spool.folder(box_home, RUN)) == []
    finally:
        engine.close()
    ((message,),) = seen
    assert message[0] == "fix-login" and message[1].startswith("spool:box:")


def test_orch_run_says_which_host_its_last_collection_could_not_reach(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestrator import run as person
    from orchestrator.progress import Progress
    from orchestrator.report import build_report

    engine, runner, box_home = _controller_with_box(tmp_path, (S.PROVISIONING, S.READY, S.DISPATCHED, S.FAILED))
    runner.fail = {2}  # the check-in's listing answers; the last collection's does not
    said = io.StringIO()

    def integrate(engine: Engine, run: object) -> None:
        raise _Integrating

    monkeypatch.setattr(person, "integrate_run", integrate)
    try:
        with pytest.raises(_Integrating):
            person.drive(engine, engine.ledger.get_run(RUN), Progress(said, live=False), interval_s=0)
        kept = build_report(engine.ledger, RUN).spools_kept
    finally:
        engine.close()
    refused = "cannot list its spool: ssh: connect to host box port 22: Connection refused"
    assert kept == (spool.kept_text("box", refused),)
    assert spool.kept_text("box", refused) in said.getvalue()


def test_resume_accepts_once_a_callback_spooled_while_orch_run_was_stopped(tmp_path: Path) -> None:
    from orchestrator.progress import Progress
    from orchestrator.run import resume_run
    from registry import RunStatus

    # `orch run` was interrupted (Ctrl-C) while its worker on the box worked; the worker asks while nothing runs.
    engine, runner, box_home = _controller_with_box(tmp_path)
    made = engine.herdr.workspace_create(label="acme/widgets")
    engine.ledger.update_run(RUN, controller_kind="run", workspace_id=made.workspace.workspace_id, repo_tab_id=made.tab.tab_id)
    engine.ledger.set_run_status(RUN, RunStatus.INTERRUPTED, stopped_at="interrupted during observe")
    _send(box_home, hostile.env(kind="question", body="Which parser: the old or the new one?"))
    try:
        outcome = resume_run(engine, RUN, Progress(io.StringIO(), live=False), interval_s=0)
        inbox = engine.ledger.list_inbox(RUN)
        worker = engine.ledger.get_worker(RUN, "fix-login")
    finally:
        engine.close()

    # Accepted once through the one intake, acted on (the worker waits on the person), and gone from the box's spool.
    assert [(m.task_label, m.kind, m.verdict, m.source.startswith("spool:box:")) for m in inbox] == [("fix-login", "question", InboxVerdict.ACCEPTED, True)]
    assert (worker.state, worker.pending_question) == (S.QUESTION, "Which parser: the old or the new one?")
    assert outcome.finished is False
    assert spool.pending(spool.folder(box_home, RUN)) == []


def test_a_flooded_spool_is_listed_in_batches_oldest_first(tmp_path: Path) -> None:
    ids = [spool.write(tmp_path, bytes([65 + n]) * 10, now_ns=n) for n in range(5)]
    assert [e.id for e in spool.pending(tmp_path, most=3)] == ids[:3]
    assert [e.id for e in spool.pending(tmp_path, budget=25)] == ids[:3]  # past 25 bytes after the third
    assert [e.id for e in spool.pending(tmp_path, budget=1)] == ids[:1]  # one always


def test_the_pane_check_compares_a_sender_only_with_its_own_hosts_workers(world: tuple[Engine, LocalRemote, Path, dict[str, Host]]) -> None:
    # box: fix-login in w1:p2 and api in w1:p5; the controller: docs-readme in w1:p3. Ids of two servers collide.
    engine, _runner, box_home, hosts = world
    engine.ledger.add_worker(RUN, "api", name="api", kind="codex", objective="x", pane_id="w1:p5", reply_target="w1:p5", host="box")
    engine.ledger.transition(RUN, "docs-readme", S.PROVISIONING, S.READY)
    engine.ledger.transition(RUN, "docs-readme", S.READY, S.DISPATCHED)
    _send(box_home, hostile.env(body="from api's pane"), pane="w1:p5")  # another worker's pane on the same host
    _send(box_home, hostile.env(body="from a pane docs-readme has on the controller"), pane="w1:p3")
    (found,) = spool.collect(engine, engine.ledger.get_run(RUN), hosts=hosts)
    assert [(a.verdict, a.reason_code) for a in found.added] == [(InboxVerdict.KEPT_ASIDE, "wrong_pane"), (InboxVerdict.ACCEPTED, None)]
    assert found.added[0].reason == 'sent from pane "w1:p5", worker "api"\'s pane, not from worker "fix-login"\'s (w1:p2)'

    # A local callback run from a pane id orch never saw here (herdr renumbers a moved pane) that a box worker holds
    # there is no impersonation: that id is the box's.
    from orchestrator.intake import Intake

    intake = Intake.of(engine, engine.ledger.get_run(RUN))
    intake.pane = "w1:p2"
    added = intake.add(hostile.env(body="docs done", task="docs-readme", sender="docs", reply_to="w1:p3"))
    assert (added.verdict, added.reason_code) == (InboxVerdict.ACCEPTED, None)


def test_a_remote_workers_report_is_read_on_its_host_by_the_same_reader(tmp_path: Path) -> None:
    # `orch inbox report`, as the controller runs it over ssh: inside the roots only, no symlink followed.
    root = tmp_path / "wt"
    root.mkdir()
    (root / "REPORT.md").write_text("# Done\n")
    (root / "link.md").symlink_to(root / "REPORT.md")
    (tmp_path / "secret.md").write_text("secret\n")

    def read(path: Path) -> dict[str, object]:
        done = subprocess.run([ORCH, "inbox", "report", "--root", str(root), "--json", "--", str(path)], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return dict(json.loads(done.stdout))

    assert read(root / "REPORT.md") == {"path": str(root / "REPORT.md"), "text": "# Done\n", "reason": None}
    assert read(root / "link.md")["reason"] == "a symbolic link (orch follows none)"
    assert read(tmp_path / "secret.md")["reason"] == "outside the worker's checkout and its report directory"
