"""Linux /proc/cpuinfo feature flags (for bench comparisons with Linux hosts).

x86 prints `flags\\t\\t: fpu vme ... aes ...`, arm64 prints `Features\\t: fp asimd evtstrm aes pmull ...`;
the probe greps the first such line. `lscpu`'s `Flags:` line has the same list.
"""

from __future__ import annotations

import re

from bsdcrypt.parsers import clean_text

_LINE = re.compile(r"^\s*(?:flags|Features|Flags)\s*:\s*(.*)$")
_FLAG = re.compile(r"^[a-z0-9_.]+$")


_MODEL = re.compile(r"^\s*model name\s*:")  # the model is the stripped rest (no `(.*?)\s*$`: it backtracks)


def parse_cpuinfo_model(text: str) -> str | None:
    """The `model name` of the first CPU (x86); None when absent. Never raises."""
    for line in clean_text(text).splitlines():
        m = _MODEL.match(line)
        if m and (model := line[m.end():].strip()):
            return model
    return None


def parse_cpuinfo_flags(text: str) -> frozenset[str] | None:
    """The flag set of the first `flags`/`Features` line; None when there is none. Never raises."""
    for line in clean_text(text).splitlines():
        m = _LINE.match(line)
        if m:
            flags = frozenset(f for f in m.group(1).split() if _FLAG.match(f))
            return flags if flags else None
    return None
