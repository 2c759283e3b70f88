"""userland/flow.py's seam to the CLI: the plan is shown, the question asked only when it may be, and
nothing is written unless the answer is yes (rc.conf under a temporary --root, on this machine's sh)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bsdcrypt.hosts.local import LocalHost
from bsdcrypt.userland import flow

VALUE = "0x2000000200000000:0x0"


def _talk(answers: list[bool], can_ask: bool, seen: dict[str, Any]) -> flow.Talk:
    seen.update(lines=[], plans=[], asked=0, warnings=[])

    def confirm() -> bool:
        seen["asked"] += 1
        return answers.pop(0)

    return flow.Talk(out=lambda line="": seen["lines"].append(line), on_plan=seen["plans"].append,
                     confirm=confirm, can_ask=can_ask, warn=seen["warnings"].append)


def _apply(root: Path, talk: flow.Talk) -> int:
    (root / "etc").mkdir(exist_ok=True)
    return flow.plan_and_act(LocalHost(), talk, {}, "rc", "tor", VALUE, [], dry_run=False, yes=False, root=str(root))


def test_without_a_terminal_it_asks_nothing_and_changes_nothing(tmp_path: Path) -> None:
    seen: dict[str, Any] = {}
    assert _apply(tmp_path, _talk([], can_ask=False, seen=seen)) == flow.EXIT_REFUSED
    assert seen["asked"] == 0 and len(seen["plans"]) == 1 and seen["plans"][0].changes_something
    assert any("without confirmation" in line for line in seen["lines"])
    assert not (tmp_path / "etc" / "rc.conf").exists()


def test_a_declined_question_changes_nothing(tmp_path: Path) -> None:
    seen: dict[str, Any] = {}
    assert _apply(tmp_path, _talk([False], can_ask=True, seen=seen)) == 1
    assert seen["asked"] == 1 and not (tmp_path / "etc" / "rc.conf").exists()


def test_yes_writes_the_services_env(tmp_path: Path) -> None:
    seen: dict[str, Any] = {}
    assert _apply(tmp_path, _talk([True], can_ask=True, seen=seen)) == 0, seen
    assert f'tor_env="OPENSSL_ia32cap={VALUE}"' in (tmp_path / "etc" / "rc.conf").read_text()
    assert seen["warnings"] == []
