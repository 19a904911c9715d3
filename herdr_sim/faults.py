"""Fault injection: queued failures that the next matching simulated command(s) consume."""

from __future__ import annotations

from pathlib import Path

from herdr_sim.paths import Paths
from herdr_sim.state import Fault, Store, World


def take(world: World, command: str) -> Fault | None:
    """Consume one use of the first fault queued for `<group> <sub>`."""
    for fault in world.faults:
        if fault.command == command:
            fault.times -= 1
            if fault.times <= 0:
                world.faults.remove(fault)
            return fault
    return None


def add(home: Path, command: str, *, code: str | None = None, message: str | None = None,
        drop_root_pane: bool = False, delay_ms: int | None = None, times: int = 1) -> None:
    """Queue a fault (Python API for tests)."""
    with Store(Paths(home)).transaction() as world:
        world.faults.append(Fault(command=command, code=code, message=message, drop_root_pane=drop_root_pane,
                                  delay_ms=delay_ms, times=times))


def clear(home: Path) -> None:
    """Drop every queued fault."""
    with Store(Paths(home)).transaction() as world:
        world.faults.clear()


def listed(home: Path) -> list[Fault]:
    """The queued faults."""
    return list(Store(Paths(home)).load().faults)
