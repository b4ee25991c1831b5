"""Text from a message made safe to print: control characters shown as escapes, never sent to the terminal.

A dead letter's id, type and key come from whoever published the message: a raw message may carry an ESC
(a terminal escape sequence that recolours or rewrites the screen), a BEL, a newline that fakes a table row,
or a bidirectional override that shows the text in another order. ``visible`` writes each such character
as its Python escape (``\\x1b``, ``\\n``, ``\\u202e``), so what an operator reads is what the message holds.
"""

from __future__ import annotations

import re

__all__ = ["visible"]

# C0 controls, DEL, C1 controls, the line and paragraph separators (what warren/topology/headers.py refuses in an
# id, type or key), and the bidirectional embeddings, overrides and isolates.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_SHORT = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    return _SHORT.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def visible(text: str) -> str:
    """``text`` with every control, separator and bidi-override character written as an escape."""
    return _UNSAFE.sub(_escape, text)
