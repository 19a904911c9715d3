"""Time as a dependency: the engine asks a Clock, so tests run on a fake one and never sleep."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    """What the engine needs from time."""

    def now(self) -> datetime:
        """The current UTC time."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes backwards."""
        ...

    def sleep(self, seconds: float) -> None:
        """Wait (a fake clock just advances)."""
        ...


class SystemClock:
    """The real clock."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class FakeClock:
    """A clock that moves only when told to (or when something sleeps on it)."""

    def __init__(self, start: datetime = datetime(2026, 11, 30, 8, 0, 0, tzinfo=UTC)) -> None:
        self._now = start
        self._mono = 0.0
        self.slept: list[float] = []

    def now(self) -> datetime:
        return self._now

    def monotonic(self) -> float:
        return self._mono

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.advance(seconds)

    def advance(self, seconds: float) -> None:
        """Move time forward."""
        self._now += timedelta(seconds=seconds)
        self._mono += seconds
