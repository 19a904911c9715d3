"""The live progress view of `orch run`: one line per worker on a terminal, plain log lines otherwise."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TextIO


from packets import inert

# Cursor up one line and clear it: the only escape codes used, and only when the stream is a terminal.
_UP_AND_CLEAR = "\x1b[1A\x1b[2K"


@dataclass(frozen=True, kw_only=True)
class Row:
    """What the view shows of one worker."""

    task: str
    state: str
    last_callback: str | None
    since: datetime


def _elapsed(delta: timedelta) -> str:
    seconds = max(0, int(delta.total_seconds()))
    minutes, seconds = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{seconds:02d}s"


HEADERS = ("task", "state", "last callback", "elapsed")


def format_rows(rows: Sequence[Row], now: datetime) -> list[str]:
    """Aligned lines under a header line: task, state, last callback, time since the worker's row started."""
    if not rows:
        return []
    table = [HEADERS, *((r.task, r.state, r.last_callback or "-", _elapsed(now - r.since)) for r in rows)]
    widths = [max(len(line[i]) for line in table) for i in range(3)]
    return [f"{a:<{widths[0]}}  {b:<{widths[1]}}  {c:<{widths[2]}}  {d}".rstrip() for a, b, c, d in table]


class Progress:
    """Redraws the worker lines in place on a terminal; elsewhere prints a line only when something changed."""

    def __init__(self, stream: TextIO, *, live: bool | None = None) -> None:
        self.stream = stream
        self.live = stream.isatty() if live is None else live
        self._drawn = 0
        self._last: dict[str, tuple[str, str | None]] = {}

    def update(self, rows: Sequence[Row], now: datetime) -> None:
        """Show the current rows."""
        if self.live:
            self.stream.write(_UP_AND_CLEAR * self._drawn)
            lines = format_rows(rows, now)
            self.stream.write("".join(line + "\n" for line in lines))
            self._drawn = len(lines)
        else:
            for row in rows:
                key = (row.state, row.last_callback)
                if self._last.get(row.task) != key:
                    self._last[row.task] = key
                    callback = f" (last callback: {row.last_callback})" if row.last_callback else ""
                    self.stream.write(f"{now:%H:%M:%S} {row.task}: {row.state}{callback}\n")
        self.stream.flush()

    def note(self, line: str, now: datetime) -> None:
        """A one-off message (a question surfaced, a worker failed) above the live lines."""
        if self.live:
            self.stream.write(_UP_AND_CLEAR * self._drawn)
            self._drawn = 0
        # Notes quote worker text: escaped, and continuation lines indented so none can pass for a progress line.
        self.stream.write(f"{now:%H:%M:%S} {inert(line).replace(chr(10), chr(10) + '    ')}\n")
        self.stream.flush()
