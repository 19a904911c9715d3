"""Real processes raced on one ledger: each is forked, lined up on a barrier, and reports one outcome on a queue."""

from __future__ import annotations

import multiprocessing
import traceback
from collections.abc import Callable
from multiprocessing.synchronize import Barrier
from typing import Any

Outcome = tuple[Any, ...]


def reporting(body: Callable[[int, Barrier], tuple[Any, ...]]) -> Callable[[int, Barrier, Any], None]:
    """A process target: ``body(index, barrier)`` and its outcome ``(index, *body's, None)``, or ``(index, None...,
    traceback)`` when it raised, so a failing process fails the test with its own traceback instead of hanging it."""

    def target(index: int, barrier: Barrier, results: Any) -> None:
        try:
            results.put((index, *body(index, barrier), None))
        except BaseException:
            results.put((index, None, traceback.format_exc()))

    return target


def race(target: Callable[[int, Barrier, Any], None], processes: int, wait_s: float) -> list[Outcome]:
    """Fork ``processes`` runs of ``target`` (no connection may be open across the fork: SQLite forbids it), wait for
    each outcome, sorted by index; every process must end with exit code 0 and no traceback."""
    context = multiprocessing.get_context("fork")
    barrier, results = context.Barrier(processes), context.Queue()
    started = [context.Process(target=target, args=(index, barrier, results)) for index in range(processes)]
    for process in started:
        process.start()
    try:
        outcomes = sorted((results.get(timeout=wait_s * 2) for _ in started), key=lambda outcome: outcome[0])
    finally:  # a child that died without reporting must not leave the others running
        for process in started:
            process.join(wait_s)
            if process.is_alive():
                process.terminate()
                process.join(wait_s)
    assert [(outcome[0], outcome[-1]) for outcome in outcomes] == [(index, None) for index in range(processes)]
    assert [process.exitcode for process in started] == [0] * processes
    return outcomes
