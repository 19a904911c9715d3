"""Fixtures for the registry tests: a stepping fake clock, a ledger on tmp_path and a run in it."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from registry import Ledger, Run

START = datetime(2026, 11, 30, 8, 0, 0, tzinfo=UTC)
RUN_ID = "w1:p1-20261130T080000Z"


class FakeClock:
    """Returns START, START+1s, START+2s, … so every ledger write has a distinct, predictable time."""

    def __init__(self, start: datetime = START) -> None:
        self.current = start - timedelta(seconds=1)

    def __call__(self) -> datetime:
        self.current += timedelta(seconds=1)
        return self.current


def at(seconds: int) -> datetime:
    """START plus seconds: the time of the (seconds+1)-th clock reading."""
    return START + timedelta(seconds=seconds)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def ledger_path(tmp_path: Path) -> Path:
    return tmp_path / "orch" / "ledger.sqlite3"


@pytest.fixture
def ledger(ledger_path: Path, clock: FakeClock) -> Iterator[Ledger]:
    with Ledger.open(ledger_path, now=clock) as opened:
        yield opened


@pytest.fixture
def run(ledger: Ledger) -> Run:
    return ledger.create_run(RUN_ID, controller_target="w1:p1", organization="acme", repo="shop")
