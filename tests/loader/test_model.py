"""The loader followed from file to file (bsdcrypt.loader.model), and enable/status agreeing with it.

The classes of issue 15, each checked against FreeBSD's own stand/lua/config.lua (config.readConf,
getBlacklist, loadModule; 12.x readConfFiles) and stand/forth/support.4th (include_conf_files,
yes_value?): readdir order of loader.conf.d, the ".conf$" pattern, loader_conf_files & co. named in a
file, module_blacklist, and an untouched malformed CRLF last line.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bsdcrypt.assess import assess
from bsdcrypt.enable.plan import PlanInput, plan_enable
from bsdcrypt.hosts.local import LocalHost
from bsdcrypt.loader.conf import EditError, apply, files_from_evidence, restore, set_yes
from bsdcrypt.loader.model import agree, conf_dir_entry, generations, outcomes, simulate
from bsdcrypt.parsers.loaderconf import parse
from bsdcrypt.probe import Evidence, Step
from bsdcrypt.recording import load

CONF = "/boot/loader.conf"
LOCAL = "/boot/loader.conf.local"
D = "/boot/loader.conf.d"
HOSTS = Path(__file__).resolve().parents[2] / "fixtures" / "hosts"


def loads(files: list[tuple[str, bytes]], major: int | None = 14) -> bool | None:
    """True/False when every generation and directory order agrees, None when they differ."""
    return agree(outcomes(files, "aesni", major), lambda o: o.loads)


# ---- the model, one class at a time ------------------------------------------------------------


def test_readdir_order_is_not_by_name() -> None:
    # a.conf NO, b.conf YES: by name b wins (what bsdcrypt said before), but lfs.dir may give b first.
    files = [(f"{D}/a.conf", b'aesni_load="NO"\n'), (f"{D}/b.conf", b'aesni_load="YES"\n')]
    assert loads(files) is None
    assert {o.load.path for o in outcomes(files, "aesni", 14) if o.load} == {f"{D}/a.conf", f"{D}/b.conf"}
    assert loads([(f"{D}/a.conf", b'aesni_load="YES"\n'), (f"{D}/b.conf", b'aesni_load="YES"\n')]) is True


@pytest.mark.parametrize(
    ("name", "read"),
    [
        ("a.conf", True),
        (".aesni.conf", True),  # hidden: an sh glob *.conf misses it, lfs.dir does not
        ("local_conf", True),  # "." of the Lua pattern is any character
        ("aesniconf", True),
        (".conf", True),
        ("conf", False),  # nothing before "conf"
        ("a.conf.bak", False),
        ("a.confx", False),
        ("a.CONF", False),
    ],
)
def test_conf_dir_entries_follow_the_lua_pattern(name: str, read: bool) -> None:
    assert conf_dir_entry(name) is read
    files = [(CONF, b'aesni_load="YES"\n'), (f"{D}/{name}", b'aesni_load="NO"\n')]
    assert loads(files) is (not read)


def test_loader_conf_files_named_in_a_file_are_read_right_after_it() -> None:
    files = [
        (CONF, b'loader_conf_files="/boot/site.conf"\naesni_load="YES"\n'),
        ("/boot/site.conf", b'aesni_load="NO"\n'),
    ]
    for major in (11, 12, 13, 14):
        assert loads(files, major) is False, major
    out, _ = simulate(files, "aesni", "lua14")
    assert out.order == (CONF, "/boot/site.conf") and out.load is not None and out.load.path == "/boot/site.conf"


def test_loader_conf_dirs_replaces_the_default_directory() -> None:
    files = [
        (CONF, b'loader_conf_dirs="/boot/mine.d"\n'),
        (f"{D}/aesni.conf", b'aesni_load="YES"\n'),  # no longer read
        ("/boot/mine.d/x.conf", b"kern.hz=100\n"),
    ]
    assert loads(files) is False
    out, _ = simulate(files, "aesni", "lua13")
    assert out.dirs == ("/boot/mine.d",) and f"{D}/aesni.conf" not in out.order


def test_local_loader_conf_files_is_14_1_and_later() -> None:
    files = [
        (CONF, b'aesni_load="YES"\nlocal_loader_conf_files="/boot/site.local"\n'),
        ("/boot/site.local", b'aesni_load="NO"\n'),
    ]
    assert simulate(files, "aesni", "lua14")[0].loads is False
    assert simulate(files, "aesni", "lua13")[0].loads is True  # 13.0-14.0 read only loader.conf.local
    assert loads(files) is None


@pytest.mark.parametrize(
    ("blacklist", "listed"),
    [
        (b'module_blacklist="aesni"', True),
        (b'module_blacklist="${module_blacklist} aesni"', True),  # the defaults' list, extended
        (b'module_blacklist="$module_blacklist,aesni"', True),
        (b'module_blacklist="drm;aesni;i915kms"', True),
        (b"module_blacklist=aesni", True),
        (b'module_blacklist="aesni.ko"', True),  # getBlacklist splits on anything not [-%w_]
        (b'module_blacklist="aesni2 xaesni"', False),
        (b'#module_blacklist="aesni"', False),
        (b'module_blacklist="aesni" junk', False),  # malformed: skipped
    ],
)
def test_module_blacklist(blacklist: bytes, listed: bool) -> None:
    files = [(CONF, b'aesni_load="YES"\n' + blacklist + b"\n")]
    for gen in ("lua12", "lua13", "lua14"):
        out, _ = simulate(files, "aesni", gen)
        assert out.yes and (out.blacklist is not None) is listed and out.loads is (not listed)
    assert simulate(files, "aesni", "forth")[0].loads  # support.4th has no blacklist


def test_blacklist_set_before_a_later_file_clears_it() -> None:
    files = [(CONF, b'aesni_load="YES"\nmodule_blacklist="aesni"\n'), (LOCAL, b'module_blacklist="drm"\n')]
    assert loads(files) is True


def test_forth_reads_only_yes_and_stops_at_a_syntax_error() -> None:
    assert simulate([(CONF, b'aesni_load="Yes"\n')], "aesni", "forth")[0].loads is False  # yes_value?
    assert simulate([(CONF, b'aesni_load="Yes"\n')], "aesni", "lua12")[0].loads is True  # :lower() == "yes"
    stop = [(CONF, b'zfs_load="YES" junk\naesni_load="YES"\n')]
    assert simulate(stop, "aesni", "forth")[0].loads is False
    assert simulate(stop, "aesni", "lua12")[0].loads is True
    crlf = [(CONF, b'aesni_load="YES"\r\n')]  # a CR is not white space to support.4th
    assert simulate(crlf, "aesni", "forth")[0].loads is False and simulate(crlf, "aesni", "lua12")[0].loads


def test_generations_by_release() -> None:
    assert generations(11) == ("forth",) and generations(12) == ("lua12",)
    assert set(generations(13)) == set(generations(15)) == set(generations(None)) == {"lua13", "lua14"}
    # 12.x reads no loader.conf.d
    assert loads([(f"{D}/a.conf", b'aesni_load="YES"\n')], 12) is False


def test_stray_quote_in_a_value_drops_the_assignment() -> None:
    files = [(CONF, b'aesni_load="YES"\nmodule_blacklist="a\\"esni"\n')]
    assert simulate(files, "aesni", "lua14")[0].blacklist is None


def test_a_loop_of_loader_conf_files_ends() -> None:
    files = [(CONF, b'loader_conf_files="/boot/x"\n'), ("/boot/x", b'loader_conf_files="/boot/loader.conf"\n')]
    for gen in ("forth", "lua12", "lua13", "lua14"):
        assert simulate(files, "aesni", gen)[0].order == (CONF, "/boot/x")


# ---- the editor: every assignment the loader may read last is made YES ---------------------------

EDIT_TABLE: list[tuple[str, list[tuple[str, bytes]], int | None, set[str]]] = [
    # (class, files, major, files the edit changes)
    ("readdir order", [(f"{D}/a.conf", b'aesni_load="NO"\n'), (f"{D}/b.conf", b'aesni_load="YES"\n')], 14,
     {f"{D}/a.conf"}),
    ("readdir order, three", [(f"{D}/{n}.conf", b'aesni_load="NO"\n') for n in "abc"], 13,
     {f"{D}/a.conf", f"{D}/b.conf", f"{D}/c.conf"}),
    ("hidden .d file", [(CONF, b'aesni_load="YES"\n'), (f"{D}/.aesni.conf", b'aesni_load="NO"\n')], 14,
     {f"{D}/.aesni.conf"}),
    ("local_conf", [(CONF, b'aesni_load="YES"\n'), (f"{D}/local_conf", b'aesni_load="NO"\n')], 14,
     {f"{D}/local_conf"}),
    ("loader_conf_files", [(CONF, b'loader_conf_files="/boot/site.conf"\naesni_load="YES"\n'),
                           ("/boot/site.conf", b'aesni_load="NO"\n')], 13, {"/boot/site.conf"}),
    ("loader_conf_dirs", [(CONF, b'loader_conf_dirs="/boot/mine.d"\n'), (f"{D}/a.conf", b'aesni_load="YES"\n')],
     14, {CONF}),
    ("local_loader_conf_files", [(CONF, b'aesni_load="YES"\nlocal_loader_conf_files="/boot/site.local"\n'),
                                 ("/boot/site.local", b'aesni_load="NO"\n')], 14, {"/boot/site.local"}),
    ("forth Yes", [(CONF, b'aesni_load="Yes"\n')], 11, {CONF}),
    ("12.x ignores .d", [(f"{D}/a.conf", b'aesni_load="YES"\n')], 12, {CONF}),
    ("crlf malformed last line", [(CONF, b"a=1\r\njunk line\r")], 14, {CONF}),
]


@pytest.mark.parametrize(("cls", "files", "major", "changed"), EDIT_TABLE, ids=[c[0] for c in EDIT_TABLE])
def test_edit_table(cls: str, files: list[tuple[str, bytes]], major: int | None, changed: set[str]) -> None:
    edits = set_yes(files, major=major)
    assert {e.path for e in edits} == changed
    after = apply(files, edits)
    assert loads(after, major) is True
    assert set_yes(after, major=major) == []  # idempotent
    created = {e.path: b"" for e in edits if not e.existed}  # disable leaves a created loader.conf empty
    assert dict(apply(after, restore(after))) == created | dict(files)


def test_crlf_file_ending_in_a_bare_cr_is_edited_not_refused() -> None:
    # Before: "refusing to write /boot/loader.conf: line 2 would be malformed" (the CR became "\r\r").
    data = b"a=1\r\njunk line\r"
    (edit,) = set_yes([(CONF, data)], major=14)
    # issue 26: only LF completes the lone CR, so the loader reads "junk line\r" exactly as before
    assert edit.after == data + b'\naesni_load="YES" # bsdcrypt enable: added+lf\r\n'
    assert [ln.number for ln in parse(edit.after) if ln.kind == "malformed"] == [2]  # the user's line, kept
    assert apply([(CONF, edit.after)], restore([(CONF, edit.after)])) == [(CONF, data)]


def test_a_new_malformed_line_is_still_refused() -> None:
    from bsdcrypt.loader.conf import FileEdit, verify_no_new_malformed

    with pytest.raises(EditError, match="line 3 would be malformed"):
        verify_no_new_malformed(FileEdit(CONF, b"a=1\r\njunk\r", b"a=1\r\njunk\r\nmore junk\r\n"))
    with pytest.raises(EditError):  # the same malformed text once more is new too
        verify_no_new_malformed(FileEdit(CONF, b"junk\n", b"junk\njunk\n"))


def test_forth_crlf_loader_conf_cannot_be_made_effective() -> None:
    with pytest.raises(EditError, match="Forth loader"):
        set_yes([(CONF, b"a=1\r\n")], major=11)


_VALUES = st.sampled_from([None, b'"YES"', b'"NO"', b"yes", b'"no"', b'"Yes"', b'"YES" junk'])


def _file(values: list[bytes | None]) -> bytes:
    return b"".join(b"x=1\n" if v is None else b"aesni_load=" + v + b"\n" for v in values)


def _oracle(files: dict[str, bytes]) -> set[bool]:
    """An independent reading of config.lua for loader.conf + loader.conf.local + loader.conf.d: every
    readdir order, .local before the directory (13.0-14.0) and after it (14.1+); the last well-formed
    aesni_load wins and counts when it is "yes" in any case."""
    def last(data: bytes) -> bytes | None:
        found = None
        for line in data.split(b"\n"):
            if line.startswith(b"aesni_load="):
                value = line[len(b"aesni_load=") :].split(b" #")[0]
                if value.startswith(b'"') and value.endswith(b'"'):
                    value = value[1:-1]
                elif not value.isalnum():
                    continue  # '"YES" junk': malformed, skipped
                found = value
        return found

    conf, local = files.get(CONF, b""), files.get(LOCAL, b"")
    d = [data for p, data in sorted(files.items()) if p.startswith(D + "/")]
    results = set()
    for perm in itertools.permutations(d):
        for sequence in ([conf, local, *perm], [conf, *perm, local]):
            value = None
            for data in sequence:
                value = last(data) if last(data) is not None else value
            results.add(value is not None and value.lower() == b"yes")
    return results


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(
    st.lists(_VALUES, max_size=3),
    st.lists(_VALUES, max_size=2),
    st.lists(st.lists(_VALUES, max_size=2), max_size=4),
)
def test_property_every_order_agrees_after_enable(
    conf: list[bytes | None], local: list[bytes | None], dfiles: list[list[bytes | None]]
) -> None:
    files = {CONF: _file(conf), LOCAL: _file(local)} | {f"{D}/{i}.conf": _file(v) for i, v in enumerate(dfiles)}
    listed = list(files.items())
    assert loads(listed) == (next(iter(_oracle(files))) if len(_oracle(files)) == 1 else None)
    edits = set_yes(listed)
    after = dict(apply(listed, edits))
    assert _oracle(after) == {True}  # whatever the directory order and loader generation
    assert dict(apply(list(after.items()), restore(list(after.items())))) == files  # disable gives it back


# ---- status ---------------------------------------------------------------------------------------


def _evidence(release: str, loader_files: dict[str, bytes]) -> Evidence:
    """The real FreeBSD 12.2 bhyve guest with aesni.ko on disk and not loaded, its loader files replaced
    (and, for a 13.x/14.x case, its release renamed: a custom kernel without `device aesni`, which is
    what leaves aesni.ko to the loader there)."""
    _, ev = load(HOSTS / "freebsd-12.2-bhyve-not-loaded-overridden.yaml")
    steps: dict[str, Step] = {}
    for name, step in ev.steps.items():
        if name.startswith("file:/boot/"):
            continue
        out = step.out.replace(b"12.2-RELEASE", release.encode())
        if release != "12.2-RELEASE":
            out = out.replace(b"kern.ident: GENERIC", b"kern.ident: CUSTOM")
        steps[name] = Step(step.rc, out)
    for path in (CONF, LOCAL):
        steps["file:" + path] = Step(1, b"cat: " + path.encode() + b": No such file or directory\n")
    for path, data in loader_files.items():
        steps["file:" + path] = Step(0, data)
    return Evidence(steps)


def test_status_reports_a_blacklisted_driver() -> None:
    ev = _evidence("13.2-RELEASE", {CONF: b'aesni_load="YES"\nmodule_blacklist="${module_blacklist} aesni"\n'})
    s = assess(ev, "h", "test")
    assert s.persist.configured is False and s.persist.blacklisted == f"{CONF}:2"
    finding = next(f for f in s.findings if f.id == "driver-blacklisted")
    assert "module_blacklist" in finding.message and "bsdcrypt does not edit" in finding.remedy
    not_loaded = next(f for f in s.findings if f.id == "driver-not-loaded")
    assert "remove aesni from module_blacklist" in not_loaded.remedy


def test_status_readdir_order_is_unknown_not_yes() -> None:
    ev = _evidence("14.1-RELEASE", {f"{D}/a.conf": b'aesni_load="NO"\n', f"{D}/b.conf": b'aesni_load="YES"\n'})
    s = assess(ev, "h", "test")
    assert s.persist.configured is None and "directory order" in (s.persist.uncertain or "")
    assert any(f.id == "persist-uncertain" for f in s.findings)
    not_loaded = next(f for f in s.findings if f.id == "driver-not-loaded")
    assert "keeps it off" not in not_loaded.message  # the value shown (b.conf's YES) is not what keeps it off
    assert "may read last" in not_loaded.remedy and 'to "YES"' not in not_loaded.remedy


def test_status_follows_loader_conf_files_or_says_unknown() -> None:
    conf = b'aesni_load="YES"\nloader_conf_files="/boot/site.conf"\n'
    s = assess(_evidence("13.2-RELEASE", {CONF: conf, "/boot/site.conf": b'aesni_load="NO"\n'}), "h", "t")
    assert s.persist.configured is False and s.persist.source == "/boot/site.conf:1"
    s = assess(_evidence("13.2-RELEASE", {CONF: conf}), "h", "t")  # named, not collected: unknown
    assert s.persist.configured is None and "/boot/site.conf" in (s.persist.uncertain or "")
    assert s.verdict == "unknown"


def test_status_hidden_conf_dir_entry_counts() -> None:
    ev = _evidence("14.1-RELEASE", {CONF: b'aesni_load="YES"\n', f"{D}/aesniconf": b'aesni_load="NO"\n'})
    assert files_from_evidence(ev)[-1][0] == f"{D}/aesniconf"
    assert assess(ev, "h", "t").persist.configured is False


def test_plan_refuses_to_persist_a_blacklisted_driver() -> None:
    files = [(CONF, b'aesni_load="NO"\nmodule_blacklist="aesni"\n')]
    inp = PlanInput(driver="aesni", state="not-loaded", cpu_aes=True, is_root=True, major=13)
    plan = plan_enable(inp, files, persist=True)
    assert plan.refusal is not None and f"module_blacklist at {CONF}:2" in plan.refusal.reason
    assert not plan.writes
    inp = PlanInput(driver="aesni", state="not-loaded", cpu_aes=True, is_root=True, major=13, blacklisted=f"{CONF}:2")
    plan = plan_enable(inp, files)  # without --persist: load it now, and say why it will not stay
    assert plan.refusal is None and any("blacklist" in n for n in plan.notes)


def test_plan_says_directory_order_is_not_guaranteed() -> None:
    files = [(f"{D}/a.conf", b'aesni_load="NO"\n'), (f"{D}/b.conf", b'aesni_load="YES"\n')]
    inp = PlanInput(driver="aesni", state="loaded", attached=True, cpu_aes=True, is_root=True, major=14)
    plan = plan_enable(inp, files, persist=True)
    assert [w.edit.path for w in plan.writes] == [f"{D}/a.conf"]
    assert any("directory order, not by name" in n for n in plan.notes)


# ---- collection: the probe and the --root reader get what the loader reads ---------------------


def _tree(root: Path) -> None:
    d = root / "boot" / "loader.conf.d"
    d.mkdir(parents=True)
    (root / "boot" / "loader.conf").write_bytes(b'aesni_load="YES"\nloader_conf_files="/etc/site.conf"\n')
    (root / "etc").mkdir()
    (root / "etc" / "site.conf").write_bytes(b'loader_conf_dirs="/boot/loader.conf.d /boot/more.d"\n')
    (root / "boot" / "more.d").mkdir()
    (root / "boot" / "more.d" / "z.conf").write_bytes(b"kern.hz=100\n")
    for name in (".aesni.conf", "local_conf", "aesniconf", "a.conf"):
        (d / name).write_bytes(b'aesni_load="NO"\n')
    for name in ("conf", "a.conf.bak"):
        (d / name).write_bytes(b'aesni_load="NO"\n')
    (d / "dir.conf").mkdir()


def test_root_reader_follows_what_the_loader_reads(tmp_path: Path) -> None:
    from bsdcrypt.enable.remote import read_loader_files

    _tree(tmp_path)
    r = str(tmp_path)
    got = dict(read_loader_files(LocalHost(), r))
    names = {p[len(r) :] for p in got}
    assert {f"{D}/.aesni.conf", f"{D}/local_conf", f"{D}/aesniconf", f"{D}/a.conf"} <= names
    assert "/etc/site.conf" in names and "/boot/more.d/z.conf" in names  # named, inside the root
    assert f"{D}/conf" not in names and f"{D}/a.conf.bak" not in names
    edits = set_yes(list(got.items()), root=r, major=14)
    assert {e.path[len(r) :] for e in edits} == {f"{D}/.aesni.conf", f"{D}/local_conf", f"{D}/aesniconf", f"{D}/a.conf"}


def test_root_reader_never_leaves_the_root(tmp_path: Path) -> None:
    from bsdcrypt.enable.remote import read_loader_files
    from bsdcrypt.errors import ActError

    _tree(tmp_path)
    (tmp_path / "etc" / "site.conf").unlink()
    (tmp_path / "etc" / "site.conf").symlink_to("../../../../../../etc/passwd")
    with pytest.raises(ActError, match="leads outside"):
        read_loader_files(LocalHost(), str(tmp_path))


def test_probe_script_collects_what_the_loader_reads(tmp_path: Path) -> None:
    import subprocess

    from bsdcrypt.probe import build_script, parse_output

    _tree(tmp_path)
    r = str(tmp_path)
    # The probe reads absolute paths: run it with /boot and /etc moved under the temporary tree.
    conf = (tmp_path / "boot" / "loader.conf").read_bytes().replace(b"/etc/", r.encode() + b"/etc/")
    (tmp_path / "boot" / "loader.conf").write_bytes(conf)
    site = (tmp_path / "etc" / "site.conf").read_bytes().replace(b"/boot/", r.encode() + b"/boot/")
    (tmp_path / "etc" / "site.conf").write_bytes(site)
    script = build_script("@@tok").replace(" /boot/", f" {r}/boot/").replace("'/boot/", f"'{r}/boot/")
    out = subprocess.run(["sh"], input=script.encode(), capture_output=True, check=False).stdout
    ev = parse_output(out, "@@tok")
    names = {k for k in ev.steps if k.startswith(("file:" + r, "dir:" + r))}
    for want in (f"{D}/.aesni.conf", f"{D}/local_conf", f"{D}/aesniconf", "/etc/site.conf", "/boot/more.d/z.conf"):
        assert f"file:{r}{want}" in names, want
    assert f"dir:{r}/boot/more.d" in names
    assert f"file:{r}{D}/conf" not in names and f"file:{r}{D}/a.conf.bak" not in names


def test_a_named_fifo_or_device_is_never_read(tmp_path: Path) -> None:
    """loader_conf_files="/dev/zero" (or a FIFO) must not hang the probe or the --root reader: the
    loader reads no such thing at boot, so it is taken as not there."""
    import os
    import subprocess

    from bsdcrypt.enable.remote import read_loader_files
    from bsdcrypt.probe import build_script, parse_output

    r = str(tmp_path)
    (tmp_path / "boot").mkdir()
    os.mkfifo(tmp_path / "fifo")
    names = f"{r}/fifo /dev/zero /fifo"
    (tmp_path / "boot" / "loader.conf").write_bytes(f'aesni_load="YES"\nloader_conf_files="{names}"\n'.encode())
    got = dict(read_loader_files(LocalHost(), r))
    assert set(got) == {f"{r}{CONF}"}
    script = build_script("@@tok").replace(" /boot/", f" {r}/boot/").replace("'/boot/", f"'{r}/boot/")
    proc = subprocess.run(["sh"], input=script.encode(), capture_output=True, check=False, timeout=120)
    ev = parse_output(proc.stdout, "@@tok")
    assert ev.steps[f"file:{r}/fifo"].rc != 0 and ev.steps["file:/dev/zero"].rc != 0


def test_only_loader_files_count_as_loader_files() -> None:
    """Another step's file (an appliance's config.xml, a file nothing names) is not a loader file:
    its lines are neither read as assignments nor reported as malformed, nor redacted as one."""
    from bsdcrypt.loader.conf import loader_files

    files = [
        (CONF, b'loader_conf_files="/boot/site.conf"\nloader_conf_dirs="/boot/mine.d"\n'),
        ("/boot/site.conf", b'local_loader_conf_files="/boot/deep.conf"\n'),
        ("/boot/deep.conf", b"x=1\n"),
        ("/boot/mine.d/a.conf", b"y=1\n"),
        ("/cf/conf/config.xml", b"<crypto_hardware>aesni</crypto_hardware>\n"),
        ("/boot/unnamed.conf", b'aesni_load="NO"\n'),
        (f"{D}/x.conf", b"z=1\n"),
    ]
    assert [p for p, _ in loader_files(files)] == [
        CONF, "/boot/site.conf", "/boot/deep.conf", "/boot/mine.d/a.conf", f"{D}/x.conf"
    ]
