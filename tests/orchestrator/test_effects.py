"""The effect table: every kind orch makes has a read-back, and every read-back the table names exists."""

from __future__ import annotations

import ast
from pathlib import Path

from orchestrator.effects import EFFECTS, settler

SOURCES = Path(__file__).resolve().parents[2] / "orchestrator"


def _kinds_made() -> set[str]:
    """Every effect kind a phase passes to `engine.once` (or provision's `rnd.once`, which prefixes the task)."""
    found = set()
    for path in SOURCES.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "once":
                index = 1 if isinstance(node.func.value, ast.Name) and node.func.value.id == "rnd" else 2
                if len(node.args) > index and isinstance(node.args[index], ast.Constant) and isinstance(node.args[index].value, str):
                    found.add(node.args[index].value)
    return found


def test_every_kind_a_phase_makes_is_in_the_table_and_every_table_kind_is_made() -> None:
    assert _kinds_made() == set(EFFECTS)


def test_every_kind_names_a_settle_function_that_exists() -> None:
    for kind, spec in EFFECTS.items():
        assert spec.settle.startswith("orchestrator."), kind
        assert callable(settler(kind)), kind
        assert settler(kind).__doc__, f"{spec.settle} says in one line what read-back proves"
