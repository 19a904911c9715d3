"""Report files read safely: pinned roots, no symlink followed anywhere, regular files only, bounded, never blocking."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from orchestrator.reportfiles import ROOTS_FILE, open_report, pin_roots, pinned_roots


@pytest.fixture
def world(tmp_path: Path) -> tuple[Path, Path, tuple[tuple[str, str], ...]]:
    """A run folder, a worktree with a report, a secret outside, and the roots pinned before the worker runs."""
    folder, wt = tmp_path / "run", tmp_path / "wt"
    (wt / "sub").mkdir(parents=True)
    (wt / "REPORT.md").write_text("# ok\n")
    (wt / "sub" / "deep.md").write_text("deep\n")
    (tmp_path / "secret.md").write_text("secret\n")
    pin_roots(folder, "t", str(wt))
    return tmp_path, wt, pinned_roots(folder, "t", str(wt))


def _read(path: Path | str, roots: tuple[tuple[str, str], ...], **kw: object) -> tuple[str | None, str | None]:
    opened = open_report(str(path), roots, **kw)  # type: ignore[arg-type]
    return opened.text, opened.reason


def test_a_plain_report_inside_a_root_is_read(world: tuple[Path, Path, tuple[tuple[str, str], ...]]) -> None:
    _, wt, roots = world
    assert _read(wt / "REPORT.md", roots) == ("# ok\n", None)
    assert _read(wt / "sub" / "deep.md", roots) == ("deep\n", None)
    assert _read(str(wt) + "//sub/./deep.md", roots) == ("deep\n", None)


def test_what_is_never_read(world: tuple[Path, Path, tuple[tuple[str, str], ...]], tmp_path: Path) -> None:
    root, wt, roots = world
    (wt / "link.md").symlink_to(root / "secret.md")
    (wt / "dirlink").symlink_to(root)
    (wt / "inner-link.md").symlink_to(wt / "REPORT.md")
    os.mkfifo(wt / "fifo.md")
    (wt / "zero.md").symlink_to("/dev/zero")
    (wt / "big.md").write_text("x" * 11)
    os.link(wt / "REPORT.md", wt / "hard.md")
    cases = {
        "REPORT.md": "not an absolute path",
        str(root / "secret.md"): "outside the worker's checkout and its report directory",
        str(wt / ".." / "secret.md"): 'contains ".." or a NUL',
        str(wt / "link.md"): "a symbolic link (orch follows none)",
        str(wt / "inner-link.md"): "a symbolic link (orch follows none)",
        str(wt / "dirlink" / "secret.md"): "a symbolic link or a file on its way where a directory should be (orch follows no link)",
        str(wt / "fifo.md"): "not a regular file (a directory, FIFO, socket or device)",
        str(wt / "zero.md"): "a symbolic link (orch follows none)",
        str(wt / "sub"): "not a regular file (a directory, FIFO, socket or device)",
        str(wt / "big.md"): "11 bytes, more than the 10-byte limit",
        str(wt / "hard.md"): "a file with 2 hard links (a report is a file of its own)",
        str(wt / "missing.md"): "No such file or directory",
    }
    assert {path: _read(path, roots, limit=10)[1] for path in cases} == cases


def test_a_root_swapped_for_a_symlink_after_pinning_moves_nothing(world: tuple[Path, Path, tuple[tuple[str, str], ...]]) -> None:
    root, wt, roots = world
    (root / "elsewhere").mkdir()
    (root / "elsewhere" / "REPORT.md").write_text("outside\n")
    wt.rename(root / "wt-old")
    wt.symlink_to(root / "elsewhere")
    assert pinned_roots(root / "run", "t", str(wt)) == roots  # pinned once, before the worker ran
    assert _read(wt / "REPORT.md", roots) == (None, "a symbolic link or a file on its way where a directory should be (orch follows no link)")
    pin_roots(root / "run", "t", str(wt))  # a later packet (a follow-up) keeps what was pinned first
    assert (root / "run" / ROOTS_FILE).read_text().count(str(root / "elsewhere")) == 0


def test_workers_pinned_at_once_each_keep_their_roots(tmp_path: Path) -> None:
    # Dispatch saves a fleet's packets from one thread per worker; each must find its own roots pinned afterwards
    # (the file was read, added to and replaced without a lock: a worker's roots were lost, a temp file name collided).
    tasks = [f"w{i}" for i in range(24)]
    start = threading.Barrier(len(tasks))

    def pin(task: str) -> None:
        start.wait()
        pin_roots(tmp_path / "run", task, str(tmp_path / task))

    threads = [threading.Thread(target=pin, args=(task,)) for task in tasks]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for task in tasks:
        assert pinned_roots(tmp_path / "run", task, None)[0] == (str(tmp_path / task), str(tmp_path / task))
    assert sorted(path.name for path in (tmp_path / "run").iterdir()) == [ROOTS_FILE]


def test_a_root_named_through_a_symlink_is_read_at_its_real_path(tmp_path: Path) -> None:
    (tmp_path / "real" / "wt").mkdir(parents=True)
    (tmp_path / "real" / "wt" / "R.md").write_text("r\n")
    (tmp_path / "alias").symlink_to(tmp_path / "real")
    pin_roots(tmp_path / "run", "t", str(tmp_path / "alias" / "wt"))
    roots = pinned_roots(tmp_path / "run", "t", None)
    assert _read(tmp_path / "alias" / "wt" / "R.md", roots) == ("r\n", None)
    assert _read(tmp_path / "real" / "wt" / "R.md", roots) == ("r\n", None)


def test_a_read_that_outlasts_its_deadline_stops(world: tuple[Path, Path, tuple[tuple[str, str], ...]]) -> None:
    _, wt, roots = world
    ticks = iter([0.0, 0.0, 10.0, 10.0])
    assert _read(wt / "REPORT.md", roots, timeout_s=5.0, clock=lambda: next(ticks)) == (None, "not read within 5 s")


def test_racing_swaps_never_read_outside_never_hang_never_raise(world: tuple[Path, Path, tuple[tuple[str, str], ...]]) -> None:
    """A thread swaps the report (and its directory) for a symlink out, a FIFO, a big file, while orch reads it."""
    root, wt, roots = world
    (root / "secret.md").write_text("SECRET\n")
    target = wt / "sub" / "race.md"
    stop = threading.Event()

    def swap() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            tmp = wt / "sub" / f".swap{n % 4}"
            for leftover in (tmp,):
                if leftover.is_symlink() or leftover.exists():
                    leftover.unlink()
            match n % 4:
                case 0:
                    tmp.symlink_to(root / "secret.md")
                case 1:
                    os.mkfifo(tmp)
                case 2:
                    tmp.write_text("y" * 300_000)
                case _:
                    tmp.write_text("fine\n")
            os.replace(tmp, target)

    thread = threading.Thread(target=swap, daemon=True)
    thread.start()
    seen: set[str | None] = set()
    try:
        for _ in range(3000):
            text, reason = _read(target, roots)
            assert text in (None, "fine\n"), text[:40] if text else text
            assert "SECRET" not in (text or "")
            seen.add(text if text is not None else reason)
    finally:
        stop.set()
        thread.join(timeout=5)
    assert not thread.is_alive()
    assert "fine\n" in seen and len(seen) >= 2, seen
