"""A hostile worker text on a real terminal (tmux): `orch inbox list`, `observe`, `status` and `report` show it, never obey it.

The text reached the ledger the way no callback can any more (an older orch accepted it, or it was written there
directly), which is the point: the printing side must be safe whatever is stored. The same pane first prints the
text raw, as a control: there the erase-line sequence does wipe "tests FAILED".
"""

from __future__ import annotations

import hashlib
import os
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any
from pathlib import Path

import pytest

from herdr_sim.testing import eventually
from registry import InboxVerdict, Ledger, WorkerState

S = WorkerState
RUN = "w1:p1-20261130T080000Z"
# Erase the line and go back to its start, then: OSC 52 (write the clipboard), OSC 0 (retitle), a bidi override.
HOSTILE = "tests FAILED\x1b[2K\x1b[1Gtests passed \x1b]52;c;cHduZWQ=\x07\x1b]0;pwned\x07 \u202eevil\u202c"
ERASE = "tests FAILED\x1b[2K\x1b[1Gtests passed"  # the control, printed raw
SHOWN = "tests FAILED\\x1b[2K\\x1b[1Gtests passed \\x1b]52;c;cHduZWQ=\\x07\\x1b]0;pwned\\x07 \\u202eevil\\u202c"


def _tmux(socket: Path, *args: str) -> str:
    done = subprocess.run(["tmux", "-S", str(socket), *args], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, f"tmux {args}: {done.stderr}"
    return done.stdout


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[Callable[[Path], list[str]]]:
    """Run a script in a private tmux server 250 columns wide; return the screen and its history as lines."""
    socket = Path("/tmp") / f"orch-inert-{os.getpid()}-{abs(hash(str(tmp_path))) % 10**8}.sock"

    def run(script: Path) -> list[str]:
        # Keep the pane after the script ends, and let OSC 52 reach the clipboard if anything lets it through.
        config = tmp_path / "tmux.conf"
        config.write_text("set -g remain-on-exit on\nset -g set-clipboard on\nset -g allow-rename on\n")
        _tmux(socket, "-f", str(config), "-u", "new-session", "-d", "-x", "250", "-y", "50", "bash", "--noprofile", "--norc", str(script))
        eventually(lambda: _tmux(socket, "display-message", "-p", "#{pane_dead}").strip() == "1", "the script to finish")
        return _tmux(socket, "capture-pane", "-p", "-J", "-S", "-2000").splitlines()

    yield run
    subprocess.run(["tmux", "-S", str(socket), "kill-server"], capture_output=True, timeout=30)
    socket.unlink(missing_ok=True)


def _seed(home: Path, controller: str, worktree: Path, pane: str) -> None:
    with Ledger.open(home / "ledger.sqlite3") as ledger:
        ledger.create_run(RUN, controller_target=controller)
        ledger.add_worker(RUN, "fix-login", name="fix-login", kind="codex", objective="x", pane_id=pane, reply_target=pane,
                          worktree_path=str(worktree))  # fmt: skip
        for current, new in ((S.PROVISIONING, S.READY), (S.READY, S.DISPATCHED), (S.DISPATCHED, S.WORKING)):
            ledger.transition(RUN, "fix-login", current, new)
        raw = f"[herdr-orchestration run={RUN} task=fix-login from=fix-login kind=question reply-to={pane}]\n{HOSTILE}"
        stored = ledger.record_inbound(RUN, raw, source="old-orch", verdict=InboxVerdict.ACCEPTED, fingerprint=hashlib.sha256(raw.encode()).hexdigest(),
                                       task_label="fix-login", kind="question", sender="fix-login")  # fmt: skip
        ledger.transition(RUN, "fix-login", S.WORKING, S.QUESTION, cause={"inbox_id": stored.id}, pending_question=HOSTILE, last_callback_id=stored.id)


@pytest.mark.e2e
def test_hostile_text_is_shown_escaped_by_every_command_that_prints_it(make_world: Callable[..., object], terminal: Callable[[Path], list[str]], tmp_path: Path) -> None:
    world: Any = make_world()
    # The worker's agent is alive in its own pane: a worker whose pane is gone is failed at the check-in as closed
    # outside orch, and this test is about the question it still waits on being shown inert.
    pane = world.herdr("pane", "split", world.controller_pane, "--direction", "right", "--no-focus")["result"]["pane"]["pane_id"]
    world.herdr("agent", "start", "fix-login", "--kind", "codex", "--pane", pane)
    _seed(world.orch_home, world.controller_pane, tmp_path / "wt", pane)
    orch = " ".join(shlex.quote(word) for word in (sys.executable, "-m", "orchestrator"))
    hostile_callback = f"[herdr-orchestration run={RUN} task=fix-login from=fix-login kind=update reply-to={pane}]\n{HOSTILE}"
    script = tmp_path / "script.sh"
    script.write_text(
        "".join(f"export {key}={shlex.quote(value)}\n" for key, value in world.env.items())
        + f"printf '%s\\n' {shlex.quote(ERASE)}\n"
        + f"echo '== inbox add'; {orch} inbox add --run {RUN} {shlex.quote(hostile_callback)}\n"
        + f"echo '== inbox list'; {orch} inbox list --run {RUN}\n"
        + f"echo '== observe'; {orch} observe --once --run {RUN}\n"
        + f"echo '== status'; {orch} status --run {RUN}\n"
        + f"echo '== report'; {orch} report --run {RUN}\n"
        + f"echo '== report --markdown'; {orch} report --markdown --run {RUN}\n"
        + "echo '== done'\n"
    )

    screen = terminal(script)

    sections: dict[str, list[str]] = {}
    current = sections.setdefault("raw", [])
    for line in screen:
        if line.startswith("== "):
            current = sections.setdefault(line[3:], [])
        else:
            current.append(line)
    assert list(sections) == ["raw", "inbox add", "inbox list", "observe", "status", "report", "report --markdown", "done"]
    # The control: printed raw, the sequence erased "tests FAILED" and the reader sees a pass.
    assert sections["raw"] == ["tests passed"]
    assert sections["inbox add"] == [
        "kept aside #2 (injection): update from fix-login for task fix-login: body line 1, column 13: an escape sequence "
        "(CSI \\x1b[2K\\x1b[1Gtest); a message holds printable text, tabs and newlines only"
    ]
    assert f"    {SHOWN}" in sections["inbox list"]
    assert any(line.endswith(f": {SHOWN}") for line in sections["observe"]), sections["observe"]
    assert any(line.rstrip().endswith(SHOWN) for line in sections["status"]), sections["status"]
    assert any(f"fix-login question: {SHOWN}" in line for line in sections["report"]), sections["report"]
    assert any(f"fix-login question: {SHOWN}" in line for line in sections["report --markdown"]), sections["report --markdown"]
    # Nothing was obeyed: not one command line lost its "tests FAILED", the title is ours, the clipboard is empty.
    for name in ("inbox list", "observe", "status", "report", "report --markdown"):
        assert not any(line.lstrip().startswith("tests passed") for line in sections[name]), name
    socket = next(Path("/tmp").glob(f"orch-inert-{os.getpid()}-{abs(hash(str(tmp_path))) % 10**8}.sock"))
    assert _tmux(socket, "display-message", "-p", "#{pane_title}").strip() != "pwned"
    buffers = subprocess.run(["tmux", "-S", str(socket), "list-buffers"], capture_output=True, text=True, timeout=30)
    assert "cHduZWQ" not in buffers.stdout and "pwned" not in buffers.stdout
