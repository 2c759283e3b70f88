"""One write per real file (pure): when two names of the loader configuration are one file
(`boot/loader.conf.local -> loader.conf`; where each name really is comes from `enable.remote.real_paths`),
the plan writes it once, or is refused when that cannot give the planned value."""

from __future__ import annotations

from dataclasses import replace

from bsdcrypt.enable.plan import Action, Note, Plan, WriteFile
from bsdcrypt.errors import ActError
from bsdcrypt.loader import conf as loaderconf


def _times(n: int) -> str:
    return "twice" if n == 2 else f"{n} times"


def merge_same_files(plan: Plan, files: list[tuple[str, bytes]], real: dict[str, str], name: str) -> Plan:
    """The plan with one write per real file, when two names of the loader configuration are one
    file (`boot/loader.conf.local -> loader.conf`): the loader then reads that file twice, and every
    name of it shows the one new content. Raises ActError (a refusal, one line) when the plan cannot
    hold: two different contents for one file, or, once every name shows the new content, a value of
    `name` other than the one the plan meant."""
    if not plan.writes:
        return plan
    names: dict[str, list[str]] = {}
    for path in [p for p, _ in files] + [w.edit.path for w in plan.writes]:
        if path in real and path not in names.get(real[path], []):
            names.setdefault(real[path], []).append(path)
    shared = {r: ps for r, ps in names.items() if len(ps) > 1}
    writes = {w.edit.path: w.edit for w in plan.writes}
    if not any(p in writes for ps in shared.values() for p in ps):
        return plan
    new: dict[str, bytes] = {}  # real file -> its one new content
    for w in plan.writes:
        r = real.get(w.edit.path)
        if r is None:
            continue
        if r in new and new[r] != w.edit.after:
            first = next(p for p in shared[r] if p in writes)
            raise ActError(
                f"{first} and {w.edit.path} are one file ({r}): the change would write it twice with different "
                f"content; make one of them a file of its own (or remove the link) and run again"
            )
        new[r] = w.edit.after
    planned = [(p, writes[p].after if p in writes else d) for p, d in files]
    planned += [(w.edit.path, w.edit.after) for w in plan.writes if w.edit.path not in dict(files)]
    seen = [(p, new.get(real.get(p, ""), d)) for p, d in planned]
    want = loaderconf.effective(loaderconf.loader_order(planned), name)
    got = loaderconf.effective(loaderconf.loader_order(seen), name)
    if (want and want.value) != (got and got.value):
        r, ps = next((r, ps) for r, ps in shared.items() if r in new)
        raise ActError(
            f"{' and '.join(ps)} are one file ({r}), so the loader reads it {_times(len(ps))}, and the change "
            f"would not give {name} the value planned; make them files of their own (or remove the link) and "
            "run again"
        )
    actions: list[Action] = []
    written: set[str] = set()
    for a in plan.actions:
        if isinstance(a, WriteFile) and a.edit.path in real:
            r = real[a.edit.path]
            if r in written:
                continue
            written.add(r)
        actions.append(a)
    for r, ps in shared.items():
        if r in new:
            actions.append(
                Note(
                    f"{' and '.join(ps)} are one file ({r}): it is written once, and the loader reads it "
                    f"{_times(len(ps))} (a link between loader configuration files is seldom meant)"
                )
            )
    return replace(plan, actions=actions)
