"""Two names of one loader file (a link between loader files): one write per real file
(enable/plan.merge_same_files, enable/remote.real_paths), or a refusal."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bsdcrypt.enable.act import perform
from bsdcrypt.enable.plan import PlanInput, plan_disable, plan_enable
from bsdcrypt.enable.remote import read_loader_files
from bsdcrypt.errors import ActError
from bsdcrypt.hosts.local import LocalHost
from bsdcrypt.loader.conf import EditError, FileEdit, effective, is_yes

from .conftest import write

# ---- two names of one loader file ------------------------------------------------------------------


def _apply(files: list[tuple[str, bytes]], real: dict[str, str], plan: object) -> list[tuple[str, bytes]]:
    """What the host holds after the plan's writes, read back through every name."""
    disk = {real[p]: d for p, d in files}
    for w in plan.writes:  # type: ignore[attr-defined]
        disk[real[w.edit.path]] = w.edit.after
    return [(p, disk[real[p]]) for p, _ in files]


_ALIAS_LINES = st.sampled_from(
    [b'aesni_load="NO"', b'aesni_load="YES"', b"aesni_load=no", b"# c", b"", b"a=1", b'aesni_load="NO" # x']
)


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(lines=st.lists(_ALIAS_LINES, max_size=5), other=st.lists(_ALIAS_LINES, max_size=3), alias=st.sampled_from(
    ["local", "confd", "both"]))
def test_property_two_names_of_one_file_round_trip_or_are_refused(
    lines: list[bytes], other: list[bytes], alias: str
) -> None:
    """loader.conf.local (and/or a loader.conf.d file) a link to loader.conf: enable then disable gives the
    original back, with one write per real file, or enable is refused."""
    from bsdcrypt.enable.merge import merge_same_files

    conf, local, confd = "/r/boot/loader.conf", "/r/boot/loader.conf.local", "/r/boot/loader.conf.d/x.conf"
    data = b"\n".join(lines) + b"\n"
    files = [(conf, data), (confd, data if alias in ("confd", "both") else b"\n".join(other) + b"\n"),
             (local, data if alias in ("local", "both") else b"")]
    real = {conf: conf, confd: conf if alias in ("confd", "both") else confd, local: conf if alias != "confd" else local}
    inp = PlanInput(driver="aesni", state="loaded", attached=True, accelerates_aes=True, is_root=True)
    try:
        enable = merge_same_files(plan_enable(inp, files, persist=True, root="/r"), files, real, "aesni_load")
    except (ActError, EditError):
        return
    assert len({real[w.edit.path] for w in enable.writes}) == len(enable.writes)  # one write per real file
    after = _apply(files, real, enable)
    assert is_yes(effective(after, "aesni_load"))
    disable = merge_same_files(plan_disable(after), after, real, "aesni_load")  # never refused after an enable
    assert len({real[w.edit.path] for w in disable.writes}) == len(disable.writes)
    assert _apply(after, real, disable) == files


def test_a_link_between_loader_files_is_written_once_and_round_trips_on_disk(root: Path) -> None:
    conf = root / "boot" / "loader.conf"
    write(conf, b'zfs_load="YES"\naesni_load="NO"\n')
    (root / "boot" / "loader.conf.local").symlink_to("loader.conf")
    from bsdcrypt.enable.merge import merge_same_files
    from bsdcrypt.enable.remote import real_paths

    host = LocalHost()
    inp = PlanInput(driver="aesni", state="loaded", attached=True, accelerates_aes=True, is_root=True)
    for make in (lambda f: plan_enable(inp, f, persist=True, root=str(root)), plan_disable):
        files = read_loader_files(host, str(root))
        real = real_paths(host, [p for p, _ in files], str(root))
        assert set(real.values()) == {str(conf)}
        plan = merge_same_files(make(files), files, real, "aesni_load")
        assert len(plan.writes) == 1 and any("are one file" in n and "twice" in n for n in plan.notes)
        perform(host, plan, root=str(root))
    assert conf.read_bytes() == b'zfs_load="YES"\naesni_load="NO"\n'
    assert (root / "boot" / "loader.conf.local").is_symlink()


def test_two_names_of_one_file_that_cannot_hold_are_refused() -> None:
    from bsdcrypt.enable.merge import merge_same_files
    from bsdcrypt.enable.plan import Plan, WriteFile

    conf, local, confd = "/r/boot/loader.conf", "/r/boot/loader.conf.local", "/r/boot/loader.conf.d/x.conf"
    yes = b'aesni_load="YES"\n'
    files = [(conf, yes), (confd, yes), (local, b"")]
    real = {conf: conf, confd: conf, local: local}
    twice = Plan([WriteFile(FileEdit(conf, yes, b"a=1\n"), "w"), WriteFile(FileEdit(confd, yes, b"b=2\n"), "w")])
    with pytest.raises(ActError, match=rf"^{conf} and {confd} are one file \({conf}\): the change would write it twice"):
        merge_same_files(twice, files, real, "aesni_load")
    # planned per name: loader.conf emptied, the loader.conf.d name still saying YES; but it is the same file
    lost = Plan([WriteFile(FileEdit(conf, yes, b""), "w")])
    with pytest.raises(ActError, match=r"so the loader reads it twice, and the change would not give aesni_load"):
        merge_same_files(lost, files, real, "aesni_load")
    separate = {conf: conf, confd: confd, local: local}
    assert merge_same_files(lost, files, separate, "aesni_load") is lost  # no shared file: the plan as it is
