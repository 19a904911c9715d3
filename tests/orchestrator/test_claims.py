"""Claim patterns decide what a worker may change: each row is (pattern, path, covered?)."""

from __future__ import annotations

import pytest

from orchestrator import claims


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("docs/api.md", "docs/api.md", True),
        ("docs/api.md", "docs/api.md.bak", False),
        ("docs/", "docs/api.md", True),
        ("docs/", "docs/deep/x.md", True),
        ("docs", "docs/deep/x.md", True),
        ("docs", "docsx/y.md", False),
        ("./docs//api.md", "docs/api.md", True),
        ("src/*.py", "src/a.py", True),
        ("src/*.py", "src/pkg/a.py", False),
        ("src/**/*.py", "src/a.py", True),
        ("src/**/*.py", "src/pkg/deep/a.py", True),
        ("src/**", "src/pkg/deep/a.py", True),
        ("**/test_*.py", "tests/unit/test_x.py", True),
        ("**/test_*.py", "test_x.py", True),
        ("src/?.py", "src/a.py", True),
        ("src/?.py", "src/ab.py", False),
        ("a+b/(c).md", "a+b/(c).md", True),
    ],
)
def test_claim_pattern_coverage(pattern: str, path: str, expected: bool) -> None:
    assert claims.matches(path, pattern) is expected


def test_outside_lists_uncovered_paths_sorted() -> None:
    assert claims.outside(["src/z.py", "README.md", "docs/a.md", "setup.cfg"], ["docs/", "src/*.py"]) == ["README.md", "setup.cfg"]


def test_empty_claim_covers_nothing() -> None:
    assert claims.outside(["a.txt"], []) == ["a.txt"]
