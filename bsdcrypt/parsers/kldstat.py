"""kldstat(8) and `kldstat -v` output -> list[KldFile].

Formats (sbin/kldstat/kldstat.c across versions):
  file line     "%2d %4d %p %-8zx %s"  (<= 12)  /  "%2d %4d %*p %8zx %s" (13+)  /  "-h": size humanized
  with -v       " (%s)\\n" path, "\\tContains modules:", "\\t\\tId Name" (or "\\t\\t Id Name"),
                module lines "\\t\\t%2d %s" / "\\t\\t%3d %s" (-d adds " (%d, %u, 0x%lx)"),
                newest: "\\tDependencies:" then "\\t\\t  depends on %s.%d (%d,%d) => %s"

The parser works on whitespace-separated tokens, so tabs vs spaces, lost indentation, `<br />`
line breaks and captures reflowed onto one line all parse alike.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from bsdcrypt.facts import KldFile
from bsdcrypt.parsers import clean_text

_INT = re.compile(r"^\d+$")
_ADDR = re.compile(r"^0x[0-9a-fA-F]+$")
_HEX = re.compile(r"^[0-9a-fA-F]+$")
_HUMAN = re.compile(r"^\d+(?:\.\d+)?[BKMGTPE]?$")


def _size(token: str) -> int | None:
    if _HEX.match(token):
        return int(token, 16)
    return None  # -h humanized ("31M") or unknown


def _is_size(token: str) -> bool:
    return bool(_HEX.match(token) or _HUMAN.match(token))


def _file_at(tokens: list[str], i: int) -> tuple[KldFile, int] | None:
    """A file record starting at tokens[i]: id refs 0xaddr size name [(path)]."""
    # isdecimal (_INT's \d) and the address's "0x" first: most tokens fail these without slicing five
    if i + 4 >= len(tokens) or not tokens[i].isdecimal() or not tokens[i + 2].startswith("0x"):
        return None
    tid, refs, addr, size, name = tokens[i : i + 5]
    if not (_INT.match(tid) and _INT.match(refs) and _ADDR.match(addr) and _is_size(size)):
        return None
    if name.startswith("(") or name.endswith(":"):
        return None
    n = 5
    path: str | None = None
    if i + 5 < len(tokens) and tokens[i + 5].startswith("("):
        # the path is printed as " (%s)"; paths have no spaces in practice
        j = i + 5
        parts = [tokens[j]]
        while not parts[-1].endswith(")") and j + 1 < len(tokens) and len(parts) < 8:
            j += 1
            parts.append(tokens[j])
        joined = " ".join(parts)
        if joined.endswith(")"):
            path = joined[1:-1] or None
            n = j - i + 1
    return KldFile(int(tid), int(refs), addr.lower(), _size(size), name, path), n


def parse_kldstat(text: str) -> list[KldFile]:
    """Parse `kldstat` or `kldstat -v` output. Garbage gives []. Never raises."""
    tokens = clean_text(text).split()
    files: list[KldFile] = []
    modules: list[str] = []
    state = "none"  # "none" | "file" | "modules"

    def close() -> None:
        if files and modules:
            last = files[-1]
            files[-1] = KldFile(last.id, last.refs, last.address, last.size, last.name, last.path,
                                tuple(modules))
        modules.clear()

    i = 0
    while i < len(tokens):
        tok = tokens[i]
        rec = _file_at(tokens, i) if tok.isdecimal() else None
        if rec is not None:
            close()
            files.append(rec[0])
            state = "file"
            i += rec[1]
            continue
        if tok == "Contains" and i + 1 < len(tokens) and tokens[i + 1] == "modules:":
            state = "modules" if files else "none"
            i += 2
            continue
        if tok == "Id" and i + 1 < len(tokens) and tokens[i + 1] == "Name" and state == "modules":
            i += 2
            continue
        if state == "modules" and _INT.match(tok) and i + 1 < len(tokens):
            name = tokens[i + 1]
            if not _INT.match(name) and not name.startswith("(") and not name.endswith(":"):
                modules.append(name)
                i += 2
                # `kldstat -d -v`: " (%d, %u, 0x%lx)" after the name
                if i < len(tokens) and tokens[i].startswith("("):
                    j = i
                    while j < len(tokens) and j - i < 4 and not tokens[j].endswith(")"):
                        j += 1
                    i = j + 1
                continue
        # anything else (headers, "Dependencies:", prompts, "....." truncation) ends a module list
        if state == "modules":
            close()
            state = "none"
        i += 1
    close()
    return _dedupe(files)


def _dedupe(files: list[KldFile]) -> list[KldFile]:
    """One entry per file id; a repeated id (several commands in one capture) is merged."""
    out: dict[int, KldFile] = {}
    for f in files:
        old = out.get(f.id)
        if old is not None and old.name == f.name:
            f = KldFile(f.id, f.refs, f.address, f.size if f.size is not None else old.size, f.name,
                        f.path or old.path, f.modules or old.modules)
        out[f.id] = f
    return list(out.values())


def file_containing(files: Iterable[KldFile], module: str) -> KldFile | None:
    """The file whose module list has `module` (exact name, as modfind(2) matches).

    A name without "/" also matches a bus-qualified module name: "aesni" finds "nexus/aesni".
    """
    files = list(files)
    for f in files:
        if module in f.modules:
            return f
    if "/" not in module:
        for f in files:
            if any(m.rsplit("/", 1)[-1] == module for m in f.modules):
                return f
    return None
