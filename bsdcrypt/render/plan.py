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
    lines = [f"bsdcrypt plan for {host}:"]
    for a in plan.actions:
        if isinstance(a, Note):
            lines.append(f"  - {a.text}")
        elif isinstance(a, Refuse) and not a.needs_root:
            lines.append(f"  ! refused: {a.reason}.")
            lines.append(f"    what to do: {a.advice}")
        elif isinstance(a, RunCommand):
            lines.append(f"  $ {' '.join(a.argv)}    # {a.why}")
        elif isinstance(a, WriteFile):
            lines.append(f"  > {a.edit.path}    # {a.why}")
    for a in plan.actions:
        if isinstance(a, Refuse) and a.needs_root:
            lines.append(f"  ! not as this user: {a.reason}; {a.advice}.")
    diffs = [w.edit.diff() for w in plan.writes]
    return "\n".join(lines) + "\n" + ("\n" + "".join(diffs) if diffs else "")
