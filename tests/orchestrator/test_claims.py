"""Claim patterns decide what a worker may change (rows of (pattern, path, covered?)), and when two claims are disjoint."""

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


# --- disjointness proofs (a plan's claims in one checkout) --------------------------------------------------------------------------------------------------------

# (a, b, may they overlap?): False only where orch can prove no path falls under both.
OVERLAPS = [
    ("src/api/**", "tests/api/x.py", False),
    ("docs/", "src/", False),
    ("docs/a.md", "docs/b.md", False),
    ("docs/*.md", "src/*.md", False),
    ("src/a*", "src/b*", False),
    ("src/*.py", "src/x.py/y.md", True),  # "*.py" may name a directory
    ("src/*.py", "src/x/y.py", False),
    ("src/*", "src/x/y.py", True),
    ("src/**/*.py", "src/**/*.md", True),  # so may "x.py" below any depth
    ("docs", "docs/api.md", True),  # a claim on a directory covers what is below it
    ("docs/api.md", "docs/api.md", True),
    ("**", "anything", True),
    ("**/test_*.py", "src/app.py", True),  # orch cannot prove this pair disjoint, so it counts as overlapping
    ("src/?.py", "src/ab.py", False),
    ("src/?.py", "src/a.py", True),
    ("src/[ab].py", "src/c.py", False),
    ("a*z", "ab*", True),
    ("a*z", "b*", False),
    ("x*.md", "*.py", False),
]


@pytest.mark.parametrize(("a", "b", "expected"), OVERLAPS)
def test_claim_overlap_is_conservative(a: str, b: str, expected: bool) -> None:
    assert claims.may_overlap(a, b) is expected
    assert claims.may_overlap(b, a) is expected


@pytest.mark.parametrize(("a", "b", "expected"), [row for row in OVERLAPS if not row[2]])
def test_a_disjointness_proof_holds_for_the_verifier_grammar(a: str, b: str, expected: bool) -> None:
    # Any path the verifier (claims.matches) puts under both would break a proof; try the likely ones.
    candidates = {a, b, *(p.replace("*", "x").replace("?", "a") for p in (a, b)), f"{a.rstrip('/')}/x", f"{b.rstrip('/')}/x"}
    assert [path for path in sorted(candidates) if claims.matches(path, a) and claims.matches(path, b)] == []
