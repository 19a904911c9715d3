"""herdr's bijective base-32 ids (CONTRACT §1)."""

from __future__ import annotations

import pytest

from herdr_sim.ids import b32, from_b32


@pytest.mark.parametrize(("n", "text"), [(1, "1"), (9, "9"), (10, "A"), (31, "Z"), (32, "0"), (33, "11"),
                                         (64, "10"), (65, "21")])
def test_b32_matches_contract_examples(n: int, text: str) -> None:
    assert b32(n) == text
    assert from_b32(text) == n
