"""Worker text made inert: every character that could drive a terminal or hide text is shown escaped, the rest kept."""

from __future__ import annotations

import pytest

from packets import inert, inert_line

CASES = [
    ("plain", "tests passed: 12", "tests passed: 12", "tests passed: 12"),
    ("lines-and-tabs", "a\tb\nc", "a\tb\nc", "a\\tb\\nc"),
    ("cursor-up-erase", "tests FAILED\x1b[1A\x1b[2Kok", "tests FAILED\\x1b[1A\\x1b[2Kok", "tests FAILED\\x1b[1A\\x1b[2Kok"),
    ("carriage-return", "FAILED\rpassed", "FAILED\\rpassed", "FAILED\\rpassed"),
    ("osc-52", "\x1b]52;c;eA==\x07", "\\x1b]52;c;eA==\\x07", "\\x1b]52;c;eA==\\x07"),
    ("osc-8-st", "\x1b]8;;u\x1b\\x", "\\x1b]8;;u\\x1b\\x", "\\x1b]8;;u\\x1b\\x"),
    ("c1-csi", "\x9b2K", "\\x9b2K", "\\x9b2K"),
    ("nul-bell-backspace-del", "\x00\x07\x08\x7f", "\\x00\\x07\\x08\\x7f", "\\x00\\x07\\x08\\x7f"),
    ("bidi", "a\u202eb\u2066c", "a\\u202eb\\u2066c", "a\\u202eb\\u2066c"),
    ("zero-width-and-bom", "\u200b\u200d\ufeff\u00ad", "\\u200b\\u200d\\ufeff\\xad", "\\u200b\\u200d\\ufeff\\xad"),
    ("separators", "a\u2028b\u2029", "a\\u2028b\\u2029", "a\\u2028b\\u2029"),
    ("tags", "\U000e0041\U000e007f", "\\U000e0041\\U000e007f", "\\U000e0041\\U000e007f"),
    ("lone-surrogate", "a\udcffb", "a\\udcffb", "a\\udcffb"),
    ("printable-unicode-kept", "café 漢字 🙂 Ελληνικά", "café 漢字 🙂 Ελληνικά", "café 漢字 🙂 Ελληνικά"),
    ("backslash-kept", "C:\\x1b is text", "C:\\x1b is text", "C:\\x1b is text"),
    # issue 22: what draws as nothing or as something else is shown too.
    ("variation-selectors", "ok\ufe0f\U000e0100", "ok\\ufe0f\\U000e0100", "ok\\ufe0f\\U000e0100"),
    ("fillers-and-blanks", "\u3164\u115f\uffa0\u2800\u034f", "\\u3164\\u115f\\uffa0\\u2800\\u034f", "\\u3164\\u115f\\uffa0\\u2800\\u034f"),
    ("combining-flood", "e" + "\u0301" * 6, "e" + "\u0301" * 4 + "\\u0301" * 2, "e" + "\u0301" * 4 + "\\u0301" * 2),
]


@pytest.mark.parametrize(("case", "text", "block", "line"), CASES, ids=[c[0] for c in CASES])
def test_inert_escapes_what_a_terminal_would_obey(case: str, text: str, block: str, line: str) -> None:
    assert (inert(text), inert_line(text)) == (block, line)
    assert all(ch.isprintable() or ch in "\n\t" for ch in inert(text))
