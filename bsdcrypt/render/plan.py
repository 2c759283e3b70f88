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


def render_plan(plan: Plan, host: str) -> str:
    """The plan as text. Host text in it (names, paths, loader.conf lines in the diff) goes through
    bsdcrypt.text: control characters shown as escapes, each piece cut at a limit."""
    from bsdcrypt.text import LINE_LIMIT, MESSAGE_LIMIT, visible, visible_lines

    def v(text: str) -> str:
        return visible(text, MESSAGE_LIMIT)

    lines = [f"bsdcrypt plan for {v(host)}:"]
    for a in plan.actions:
        if isinstance(a, Note):
            lines.append(f"  - {v(a.text)}")
        elif isinstance(a, Refuse) and not a.needs_root:
            lines.append(f"  ! refused: {v(a.reason)}.")
            lines.append(f"    what to do: {v(a.advice)}")
        elif isinstance(a, RunCommand):
            lines.append(f"  $ {v(' '.join(a.argv))}    # {v(a.why)}")
        elif isinstance(a, WriteFile):
            lines.append(f"  > {v(a.edit.path)}    # {v(a.why)}")
    for a in plan.actions:
        if isinstance(a, Refuse) and a.needs_root:
            lines.append(f"  ! not as this user: {v(a.reason)}; {v(a.advice)}.")
    # The diff's own lines stay lines; anything else a loader.conf line holds (ESC, a lone CR) shows.
    diffs = [visible_lines(w.edit.diff(), LINE_LIMIT) for w in plan.writes]
    return "\n".join(lines) + "\n" + ("\n" + "".join(diffs) if diffs else "")
