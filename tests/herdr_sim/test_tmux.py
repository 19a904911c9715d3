"""The private tmux server's one-client reads: titles and screens together give what separate clients give."""

from __future__ import annotations

from pathlib import Path

import pytest

from herdr_sim.testing import eventually
from herdr_sim.tmux import Tmux

pytestmark = pytest.mark.e2e


def test_titles_and_screens_from_one_client_are_what_separate_clients_read(tmp_path: Path) -> None:
    tmux = Tmux(tmp_path / "tmux.sock", 40, 6)
    tmux.start()
    try:
        a, _ = tmux.new_pane("a", str(tmp_path), {"PS1": "$ "})
        b, _ = tmux.new_pane("b", str(tmp_path), {"PS1": "$ "})
        tmux.send_literal(a, "printf '\\033]2;%s\\007' 'the title'; echo one; echo two")
        tmux.send_keys(a, ["Enter"])
        gone = "%99"

        def alone(pane: str) -> str:
            return "\n".join(tmux.capture(pane, history=False, joined=False, ansi=False))

        eventually(lambda: tmux.titles().get(a) == "the title" and alone(a).endswith("two\n$\n\n"), "the commands done")

        titles, screens = tmux.titles_and_screens([a, b])
        assert titles == tmux.titles() and screens == {a: alone(a), b: alone(b)}
        assert screens[a] == "$ printf '\\033]2;%s\\007' 'the title'; ec\nho one; echo two\none\ntwo\n$\n\n"
        # tmux stops the sequence at a capture that fails: that pane's screen and the ones after it are not there.
        assert tmux.titles_and_screens([b, gone, a]) == (titles, {b: alone(b)})
        assert tmux.titles_and_screens([]) == (titles, {})
    finally:
        tmux.kill()
    # No server: nothing live, nothing read (as titles() says then).
    assert tmux.titles_and_screens([a]) == ({}, {})


def test_a_pane_shell_neither_reads_nor_rewrites_the_callers_bash_history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Issue 21: an interactive bash truncates $HISTFILE (default ~/.bash_history) to HISTFILESIZE (500) when it starts
    # and rewrites it when it exits; the simulator's pane shells ran with the caller's HOME and so cut their history.
    history = tmp_path / ".bash_history"
    history.write_text("".join(f"echo line {n}\n" for n in range(5000)))
    before = history.read_bytes()
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("HISTFILE", raising=False)
    tmux = Tmux(tmp_path / "tmux.sock", 60, 6)
    tmux.start()
    try:
        pane, _ = tmux.new_pane("a", str(tmp_path), {"PS1": "$ "})
        tmux.send_literal(pane, 'echo "[$HISTFILE]"; history | wc -l; exit')
        tmux.send_keys(pane, ["Enter"])
        eventually(lambda: pane not in tmux.panes(), "the shell exited")
    finally:
        tmux.kill()
    assert history.read_bytes() == before
