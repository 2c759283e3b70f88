"""enable/disable's plan: as text for a person (the actions, then each file's diff) and as data for JSON."""

from __future__ import annotations

from typing import Any

from bsdcrypt.enable.plan import Note, Plan, Refuse, RunCommand, WriteFile


def plan_to_dict(plan: Plan) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for a in plan.actions:
        if isinstance(a, RunCommand):
            out.append({"action": "run", "argv": list(a.argv), "why": a.why})
        elif isinstance(a, WriteFile):
            out.append(
                {
                    "action": "write",
                    "path": a.edit.path,
                    "create": not a.edit.existed,
                    "why": a.why,
                    "diff": a.edit.diff(),
                }
            )
        elif isinstance(a, Refuse):
            out.append({"action": "refuse", "reason": a.reason, "advice": a.advice})
        elif isinstance(a, Note):
            out.append({"action": "note", "text": a.text})
    return out


def render_plan(plan: Plan, host: str, width: int | None = None) -> str:
    """The plan as text. Host text in it (names, paths, loader.conf lines in the diff) goes through
    bsdcrypt.text: control characters shown as escapes, each piece cut at a limit. With a width (a
    terminal), each action wraps under its own text; a command keeps its line, its comment goes under
    it; the diff is never wrapped (its lines are the file's)."""
    from bsdcrypt.render.fit import usable, wrap
    from bsdcrypt.text import LINE_LIMIT, MESSAGE_LIMIT, visible, visible_lines

    w = usable(width)

    def v(text: str) -> str:
        return visible(text, MESSAGE_LIMIT)

    def add(first: str, text: str, rest: str = "    ") -> None:
        lines.extend([first + text] if w is None or len(first + text) <= w else wrap(text, w, first, rest))

    def command(first: str, text: str, why: str) -> None:
        line = f"{first}{text}    # {why}"
        if w is None or len(line) <= w:
            lines.append(line)
        else:
            add(first, text, "      ")
            add("      # ", why, "        ")

    lines = [f"bsdcrypt plan for {v(host)}:"]
    for a in plan.actions:
        if isinstance(a, Note):
            add("  - ", v(a.text))
        elif isinstance(a, Refuse) and not a.needs_root:
            add("  ! refused: ", f"{v(a.reason)}.")
            add("    what to do: ", v(a.advice), "      ")
        elif isinstance(a, RunCommand):
            command("  $ ", v(" ".join(a.argv)), v(a.why))
        elif isinstance(a, WriteFile):
            command("  > ", v(a.edit.path), v(a.why))
    for a in plan.actions:
        if isinstance(a, Refuse) and a.needs_root:
            add("  ! not as this user: ", f"{v(a.reason)}; {v(a.advice)}.")
    # The diff's own lines stay lines; anything else a loader.conf line holds (ESC, a lone CR) shows.
    diffs = [visible_lines(write.edit.diff(), LINE_LIMIT) for write in plan.writes]
    return "\n".join(lines) + "\n" + ("\n" + "".join(diffs) if diffs else "")
