"""Pure parsers: text a FreeBSD-family host printed -> plain data (bsdcrypt.facts).

Every parser takes `str` (callers decode bytes with errors="replace"), never raises on
arbitrary input, and reports what the text did not show as None / empty, never a guess.
"""

from __future__ import annotations

import re

_BR = re.compile(r"<br\s*/?>", re.IGNORECASE)


def clean_text(text: str) -> str:
    """Undo the usual capture damage: HTML `<br />` line breaks, NULs and literal `\\000`."""
    # the regex is slow on long texts (dmesg.boot): only where it can match; one search of the text in
    # lower case costs less than two of "<b" and "<B" (a two-character needle skips little)
    if "<br" in text.lower():
        text = _BR.sub("\n", text)
    if "\\" in text and "\\000" in text:  # a one-character test first: memchr, not a substring search
        text = text.replace("\\000", "")
    return text.replace("\x00", "") if "\x00" in text else text


def decimal(text: str | None, digits: int = 20) -> int | None:
    """An unsigned ASCII decimal of 1..`digits` digits as an int, else None (never raises). int()
    alone takes other scripts' digits ('١٢'), raises on '²' (str.isdigit() says yes) and on numbers
    over 4300 digits: host text goes through this instead."""
    if text is None or not 0 < len(text) <= digits or not (text.isascii() and text.isdigit()):
        return None
    return int(text)
