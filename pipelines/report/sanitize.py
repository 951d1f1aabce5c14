"""Make text from logs, node, job and user names safe to show in a page, a ticket or a terminal:
escape sequences dropped, bidi and other control characters shown as codes, so a line cannot
pass for another or drive a terminal (docs/reliability.md, "Untrusted input")."""

from __future__ import annotations

import re
import unicodedata

# CSI (ESC [ ... final), OSC (ESC ] ... BEL or ESC \), DCS/SOS/PM/APC strings, two-byte ESC
# sequences, and the 8-bit C1 forms of CSI and OSC
_ANSI = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"
    r"|\x1b[ -/]*[0-~]"
    r"|\x9b[0-?]*[ -/]*[@-~]"
    r"|\x9d[^\x07\x9c]*[\x07\x9c]?"
)
_BIDI = re.compile("[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")
# C0 controls except tab and newline, DEL, C1 controls, a stray ESC
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_MD_SPECIAL = re.compile(r"([\\`|\[\]*_#~])")
_SLUG = re.compile(r"[^A-Za-z0-9_.-]+")


def sanitize(value: object, *, keep_newlines: bool = True, max_len: int | None = None) -> str:
    """``value`` as text with escape sequences removed and invisible controls made visible."""
    if value is None:
        return ""
    text = value if isinstance(value, str) else str(value)
    text = _ANSI.sub("", text)
    text = _BIDI.sub(lambda m: f"[U+{ord(m.group()):04X}]", text)
    text = text.replace("\r\n", "\n")
    text = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
    if not keep_newlines:
        text = text.replace("\n", " \u21b5 ")
    if max_len is not None and len(text) > max_len:
        text = text[: max(max_len - 1, 0)] + "\u2026"
    return text


def md_escape(value: object, *, max_len: int | None = None) -> str:
    """``sanitize`` for one Markdown table cell or line: no newlines, and ``| ` [ ] < > \\``
    (and emphasis characters) cannot start markup."""
    text = sanitize(value, keep_newlines=False, max_len=max_len)
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_SPECIAL.sub(r"\\\1", text)


def terminal(value: object, *, max_len: int | None = None) -> str:
    """``sanitize`` for one line of terminal output (nothing that moves the cursor)."""
    return sanitize(value, keep_newlines=False, max_len=max_len)


def slug(value: object) -> str:
    """An HTML id / URL fragment made of ``[A-Za-z0-9_.-]`` only (never empty)."""
    text = unicodedata.normalize("NFKC", sanitize(value))
    out = _SLUG.sub("_", text).strip("_")
    return out or "_"
