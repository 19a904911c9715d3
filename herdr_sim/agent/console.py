"""The agent's TUI-like terminal: raw-ish tty mode, bracketed paste, submissions on Enter, Ctrl-C, and a transcript."""

from __future__ import annotations

import os
import re
import select
import sys
import termios
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, UTC
from pathlib import Path

PASTE_START = b"\x1b[200~"
PASTE_END = b"\x1b[201~"
PROMPT = "\u203a "
_CSI = re.compile(rb"\x1b\[[0-9;?]*[ -/]*[@-~]")


@dataclass(frozen=True)
class Submit:
    """Text submitted with Enter (pasted and/or typed)."""

    text: str


@dataclass(frozen=True)
class Interrupt:
    """Ctrl-C."""


@dataclass(frozen=True)
class EndOfInput:
    """The tty closed, or Ctrl-D on an empty line."""


Event = Submit | Interrupt | EndOfInput


def _paste_summary(pasted: bytes, placeholder: Callable[[str, int], str | None] | None = None, count: int = 1) -> bytes:
    """What the input line shows for a paste: the text itself if one line, else a summary like real agent TUIs."""
    text = pasted.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n").rstrip("\n")
    lines = text.split("\n")
    if len(lines) == 1:
        return lines[0].encode()
    own = placeholder(text, count) if placeholder is not None else None
    return (own or f"[Pasted: {lines[0]} +{len(lines) - 1} lines]").encode()


class InputParser:
    """Turn tty bytes into events, as a line editor with bracketed paste would; returns what to echo."""

    def __init__(self, placeholder: Callable[[str, int], str | None] | None = None) -> None:
        self._placeholder = placeholder
        self._pastes = 0
        self._pending = b""
        self._line = bytearray()
        self._in_paste = False
        self._paste_from = 0

    def feed(self, data: bytes) -> tuple[list[Event], bytes]:
        """Consume bytes; return the completed events and the bytes to echo on screen."""
        buf = self._pending + data
        self._pending = b""
        events: list[Event] = []
        echo = bytearray()
        i = 0
        while i < len(buf):
            if self._in_paste:
                end = buf.find(PASTE_END, i)
                if end < 0:
                    # Keep a possible partial end marker for the next read.
                    keep = next((k for k in range(len(PASTE_END) - 1, 0, -1) if buf.endswith(PASTE_END[:k])), 0)
                    self._line += buf[i : len(buf) - keep]
                    self._pending = buf[len(buf) - keep :]
                    break
                self._line += buf[i:end]
                self._in_paste = False
                self._pastes += 1
                echo += _paste_summary(bytes(self._line[self._paste_from :]), self._placeholder, self._pastes)
                i = end + len(PASTE_END)
                continue
            byte = buf[i : i + 1]
            if byte == b"\x1b":
                rest = buf[i:]
                if rest.startswith(PASTE_START):
                    self._in_paste = True
                    self._paste_from = len(self._line)
                    i += len(PASTE_START)
                    continue
                match = _CSI.match(rest)
                if match is None:
                    if len(rest) < len(PASTE_START) and (PASTE_START.startswith(rest) or rest == b"\x1b" or rest.startswith(b"\x1b[")):
                        self._pending = rest
                        break
                    i += 1  # a lone Escape key
                    continue
                i += match.end()  # arrow keys and the like: ignored
                continue
            if byte in (b"\r", b"\n"):
                text = self._line.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")
                self._line.clear()
                echo += b"\r\n"
                events.append(Submit(text))
            elif byte == b"\x03":
                self._line.clear()
                echo += b"^C\r\n"
                events.append(Interrupt())
            elif byte == b"\x04":
                if not self._line:
                    events.append(EndOfInput())
            elif byte in (b"\x7f", b"\x08"):
                if self._line:
                    del self._line[-1]
                    echo += b"\b \b"
            elif byte >= b" " or byte == b"\t":
                self._line += byte
                echo += byte
            i += 1
        return events, bytes(echo)


class Console:
    """The tty of the pane: puts it in a raw-ish mode, reads events, prints the transcript (and logs it)."""

    def __init__(self, log_path: Path | None, placeholder: Callable[[str, int], str | None] | None = None) -> None:
        self._fd = sys.stdin.fileno()
        self._saved: list | None = None  # type: ignore[type-arg]
        self._parser = InputParser(placeholder)
        self._keys = b""
        self._status: str | None = None
        self._queue: deque[Event] = deque()
        self._log_path = log_path
        if log_path is not None:
            log_path.parent.mkdir(parents=True, exist_ok=True)

    def __enter__(self) -> Console:
        if os.isatty(self._fd):
            self._saved = termios.tcgetattr(self._fd)
            mode = termios.tcgetattr(self._fd)
            # Like a TUI: no line discipline, no echo, Ctrl-C as a byte, CR kept as CR; output post-processing stays on.
            mode[0] &= ~(termios.ICRNL | termios.INLCR | termios.IGNCR | termios.IXON)
            mode[3] &= ~(termios.ICANON | termios.ECHO | termios.ISIG | termios.IEXTEN)
            mode[6][termios.VMIN] = 1
            mode[6][termios.VTIME] = 0
            termios.tcsetattr(self._fd, termios.TCSANOW, mode)
        self.raw_write("\x1b[?2004h")
        return self

    def __exit__(self, *exc: object) -> None:
        self.restore()

    def restore(self) -> None:
        """Disable bracketed paste and give the shell its terminal back."""
        self.raw_write("\x1b[?2004l")
        if self._saved is not None:
            termios.tcsetattr(self._fd, termios.TCSANOW, self._saved)
            self._saved = None

    def raw_write(self, text: str) -> None:
        """Write to the screen without logging."""
        sys.stdout.write(text)
        sys.stdout.flush()

    def say(self, text: str) -> None:
        """Print transcript lines (and append them to the debug log), keeping a busy line at the bottom."""
        status = self._status
        self.status(None)
        self.raw_write(text + "\n")
        self.log(text)
        self.status(status)

    def status(self, text: str | None) -> None:
        """Show (or, with None, erase) the one-line busy indicator under the transcript, as agent TUIs do."""
        if self._status is not None:
            self.raw_write("\r\x1b[2K")
        self._status = text
        if text is not None:
            self.raw_write(text)

    def title(self, text: str) -> None:
        """Set the terminal title (OSC 2), which herdr reads for detection."""
        self.raw_write(f"\x1b]2;{text}\x07")

    def draw(self, lines: list[str], *, replacing: int = 0, clear_screen: bool = False) -> int:
        """Draw a modal block (erasing the previous ``replacing`` lines of it first); returns its height."""
        if clear_screen:
            self.raw_write("\x1b[2J\x1b[H")
        elif replacing:
            self.raw_write(f"\x1b[{replacing}A\r\x1b[J")
        self.raw_write("".join(line + "\n" for line in lines))
        self.log("\n".join(lines))
        return len(lines)

    def erase(self, height: int, *, clear_screen: bool = False) -> None:
        """Take a modal block off the screen (the whole screen for a start-up dialog)."""
        self.raw_write("\x1b[2J\x1b[H" if clear_screen else f"\x1b[{height}A\r\x1b[J")

    def read_key(self) -> str:
        """Block for one key as a TUI menu reads it: enter, esc, up, down, ctrl+c, ctrl+d, paste, or the character."""
        while True:
            key = self._next_key()
            if key is not None:
                return key
            ready, _, _ = select.select([self._fd], [], [], None if not self._keys else 0.05)
            if not ready:
                if self._keys == b"\x1b":  # nothing followed: the Escape key itself
                    self._keys = b""
                    return "esc"
                continue
            try:
                data = os.read(self._fd, 65536)
            except OSError:
                data = b""
            if not data:
                return "ctrl+d"
            self._keys += data

    def _next_key(self) -> str | None:
        buf = self._keys
        if not buf:
            return None
        if buf.startswith(PASTE_START):
            end = buf.find(PASTE_END)
            if end < 0:
                return None
            self._keys = buf[end + len(PASTE_END) :]
            return "paste"
        if buf.startswith(b"\x1b"):
            for seq, name in ((b"\x1b[A", "up"), (b"\x1bOA", "up"), (b"\x1b[B", "down"), (b"\x1bOB", "down")):
                if buf.startswith(seq):
                    self._keys = buf[len(seq) :]
                    return name
            match = _CSI.match(buf)
            if match is not None:
                self._keys = buf[match.end() :]
                return "other"
            if len(buf) == 1 or PASTE_START.startswith(buf[: len(PASTE_START)]):
                return None  # maybe the start of a sequence: wait a moment
            self._keys = buf[1:]
            return "esc"
        self._keys = buf[1:]
        byte = buf[:1]
        return {b"\r": "enter", b"\n": "enter", b"\x03": "ctrl+c", b"\x04": "ctrl+d"}.get(byte, byte.decode("latin-1"))

    def log(self, text: str) -> None:
        """Append lines to the debug log only (nothing on screen)."""
        if self._log_path is not None:
            stamp = datetime.now(UTC).isoformat(timespec="milliseconds")
            with self._log_path.open("a") as log:
                log.writelines(f"{stamp} {line}\n" for line in text.splitlines() or [""])

    def discard_input(self) -> None:
        """Drop whatever was typed or pasted so far, as an agent does that was not reading its input yet."""
        if os.isatty(self._fd):
            termios.tcflush(self._fd, termios.TCIFLUSH)
        self._queue.clear()

    def prompt(self, mark: str = PROMPT) -> None:
        """Show the input prompt (the kind's own mark)."""
        self.raw_write(mark)

    def poll(self, timeout: float | None) -> Event | None:
        """Next input event, waiting up to timeout seconds (None: forever)."""
        while not self._queue:
            ready, _, _ = select.select([self._fd], [], [], timeout)
            if not ready:
                return None
            try:
                data = os.read(self._fd, 65536)
            except OSError:
                data = b""
            if not data:
                self._queue.append(EndOfInput())
                break
            events, echo = self._parser.feed(data)
            if echo:
                sys.stdout.buffer.write(echo)
                sys.stdout.flush()
            self._queue.extend(events)
        return self._queue.popleft()
