"""Fixture loading for the parser table tests."""

from __future__ import annotations

from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "parsers"


def load(category: str, name: str) -> str:
    """The fixture's output: everything after the `# ---` header line."""
    text = (FIXTURES / category / name).read_text(encoding="utf-8", errors="replace")
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines[:10]):
        if line.rstrip("\r\n") == "# ---":
            return "".join(lines[i + 1 :])
    raise AssertionError(f"{category}/{name}: no '# ---' header line")


def names(category: str) -> list[str]:
    return sorted(p.name for p in (FIXTURES / category).glob("*.txt"))
