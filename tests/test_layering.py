"""The import rules of the architecture, checked by walking every module's imports."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# package -> top-level packages it must never import
FORBIDDEN = {
    "packets": {"orchestrator", "registry", "herdr_sim"},
    "registry": {"orchestrator", "packets", "herdr_sim"},
    "herdr_sim": {"orchestrator", "packets", "registry"},
}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_imports_only_what_the_architecture_allows(package: str) -> None:
    offenders = {
        str(path.relative_to(ROOT)): sorted(_imports(path) & FORBIDDEN[package])
        for path in sorted((ROOT / package).rglob("*.py"))
        if _imports(path) & FORBIDDEN[package]
    }
    assert offenders == {}


def test_every_module_opens_with_a_docstring() -> None:
    missing = [
        str(path.relative_to(ROOT))
        for package in ("orchestrator", "packets", "registry", "herdr_sim")
        for path in sorted((ROOT / package).rglob("*.py"))
        if ast.get_docstring(ast.parse(path.read_text())) is None
    ]
    assert missing == []
