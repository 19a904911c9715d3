"""What a person sees: the Default_Ignorable_Code_Point derivation, blank-looking text and the confusable skeleton."""

from __future__ import annotations

import pytest

from packets.glyphs import header_in_skeleton, is_default_ignorable, looks_blank, skeleton

# Members and non-members of Default_Ignorable_Code_Point, from Unicode 14's DerivedCoreProperties.txt, one per source
# of the derivation: Cf, Other_Default_Ignorable_Code_Point, Variation_Selector, and each subtraction.
IGNORABLE = {
    0x00AD: True, 0x034F: True, 0x061C: True, 0x115F: True, 0x1160: True, 0x17B4: True, 0x17B5: True, 0x180B: True,
    0x180E: True, 0x180F: True, 0x200B: True, 0x200D: True, 0x2060: True, 0x2065: True, 0x3164: True, 0xFE00: True,
    0xFE0F: True, 0xFEFF: True, 0xFFA0: True, 0xFFF0: True, 0x1BCA0: True, 0x1D173: True, 0xE0000: True,
    0xE0001: True, 0xE0100: True, 0xE01EF: True, 0xE01F0: True, 0xE0FFF: True,
    # Cf, yet subtracted: interlinear annotation, Egyptian format controls, prepended concatenation marks.
    0xFFF9: False, 0xFFFB: False, 0x13430: False, 0x0600: False, 0x06DD: False, 0x070F: False, 0x110BD: False,
    # Neither: visible, whitespace, or blank-looking but assigned as a symbol.
    0x0020: False, 0x00A0: False, 0x0041: False, 0x0301: False, 0x2800: False, 0x3000: False, 0xE1000: False,
}  # fmt: skip


@pytest.mark.parametrize(("code", "expected"), IGNORABLE.items(), ids=[f"U+{c:04X}" for c in IGNORABLE])
def test_default_ignorable_follows_the_standards_derivation(code: int, expected: bool) -> None:
    assert is_default_ignorable(chr(code)) is expected


def test_blank_looking_text() -> None:
    assert looks_blank(" \u2800\u3164\n\u200b\u034f\ufe0f\t")
    assert not looks_blank(" \u2800x")


SAME = [
    ("precomposed", "hérdr-orchéstràtion", "herdr-orchestration"),
    ("greek-capitals", "ΗΕRDR", "herdr"),
    ("cyrillic", "һеrdr-оrсhеѕtrаtіоn", "herdr-orchestration"),
    ("coptic", "ⲟⲣⲥⲉ", "opce"),
    ("cherokee", "ᎻᎬᏒᎠᏒ", "herdr"),
    ("cherokee-small", "\uab8b\uab7c\uaba2\uab70\uaba2", "herdr"),
    ("small-capitals", "ʜᴇʀᴅʀ ꜰʀᴏᴍ", "herdr from"),
    ("full-width", "ｈｅｒｄｒ［ｒｕｎ＝", "herdr[run="),
    ("math-bold", "\U0001d421\U0001d41e\U0001d42b", "her"),
    ("armenian", "օոս", "onu"),
    ("digits-and-rn", "0rchestrat1on frorn", "orchestration from"),
    ("dashes-and-case", "REPLY\u2010TO", "reply-to"),
]


@pytest.mark.parametrize(("case", "disguised", "plain"), SAME, ids=[c[0] for c in SAME])
def test_lookalikes_share_the_plain_spellings_skeleton(case: str, disguised: str, plain: str) -> None:
    assert skeleton(disguised) == skeleton(plain)


@pytest.mark.parametrize(
    ("text", "header"),
    [
        ("[herdr-orchestration run=x", True),
        ('{"herdr-orchestration":{"kind":"answer"}}', True),
        ("herdr-orchestration:run: x", True),
        ("kind: answer task: x", True),
        ("from=w1:p1 reply-to=w1:p1", True),
        ("the herdr-orchestration skill", False),
        ("herdr-orchestration from SKILL.md", False),
        ("From: a Reply-To: b", False),
        ("kind: answer", False),
    ],
)
def test_header_in_skeleton(text: str, header: bool) -> None:
    assert header_in_skeleton(skeleton(text)) is header
