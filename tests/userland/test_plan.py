"""The per-service edit (pure): rc.conf <svc>_env the way sysrc(8)'s f_sysrc_set edits, and the systemd drop-in."""

from __future__ import annotations

import pytest

from bsdcrypt.enable.plan import Refuse, RunCommand
from bsdcrypt.userland import plan as uplan

V = "0x82982203478bfffd:0x0"


def edit(files: dict[str, bytes], value: str | None = V, service: str = "tor") -> tuple[str, bytes] | None:
    e = uplan.rc_edit(list(files.items()), service, value)
    return None if e is None else (e.path, e.after)


def test_appended_to_rc_conf_when_set_nowhere() -> None:
    assert edit({"/etc/rc.conf": b'tor_enable="YES"'}) == (
        "/etc/rc.conf", b'tor_enable="YES"\ntor_env="OPENSSL_ia32cap=' + V.encode() + b'"\n')


def test_created_when_no_rc_conf() -> None:
    e = uplan.rc_edit([], "tor", V)
    assert e is not None and e.path == "/etc/rc.conf" and not e.existed


def test_merged_with_the_other_words_and_the_rest_of_the_line_kept() -> None:
    got = edit({"/etc/rc.conf": b"a=1\ntor_env='LANG=C TZ=UTC' # mine\nb=2\n"})
    assert got == ("/etc/rc.conf", b"a=1\ntor_env='LANG=C TZ=UTC OPENSSL_ia32cap=" + V.encode() + b"' # mine\nb=2\n")


def test_replaces_an_old_value_not_appends_a_second() -> None:
    got = edit({"/etc/rc.conf": b'tor_env="OPENSSL_ia32cap=+0x200000200000000 LANG=C"\n'})
    assert got == ("/etc/rc.conf", b'tor_env="LANG=C OPENSSL_ia32cap=' + V.encode() + b'"\n')


def test_the_last_assignment_of_the_last_file_wins() -> None:
    files = {
        "/etc/rc.conf": b'tor_env="LANG=C"\n',
        "/etc/rc.conf.local": b"",
        "/etc/rc.conf.d/tor": b'tor_env="TZ=UTC"\ntor_env="TZ=CET"\n',
    }
    assert edit(files) == ("/etc/rc.conf.d/tor", b'tor_env="TZ=UTC"\ntor_env="TZ=CET OPENSSL_ia32cap=' + V.encode()
                           + b'"\n')


def test_idempotent() -> None:
    assert edit({"/etc/rc.conf": b'tor_env="OPENSSL_ia32cap=' + V.encode() + b'"\n'}) is None


def test_remove_keeps_other_words_and_drops_an_empty_line() -> None:
    assert edit({"/etc/rc.conf": b'tor_env="LANG=C OPENSSL_ia32cap=0x1:0x0"\n'}, None) == (
        "/etc/rc.conf", b'tor_env="LANG=C"\n')
    assert edit({"/etc/rc.conf": b'x=1\ntor_env="OPENSSL_ia32cap=0x1:0x0"\ny=2\n'}, None) == (
        "/etc/rc.conf", b"x=1\ny=2\n")
    assert edit({"/etc/rc.conf": b"x=1\n"}, None) is None


@pytest.mark.parametrize("line", [b'tor_env="$OTHER"\n', b"tor_env=`cat /x`\n", b'tor_env="a\nb"\n',
                                  b'tor_env="LANG=C \\"x\\""\n'])
def test_expansions_and_multiline_values_are_not_rewritten(line: bytes) -> None:
    with pytest.raises(uplan.PlanError, match="by hand"):
        edit({"/etc/rc.conf": line})


def test_a_bare_value_gets_double_quotes() -> None:
    assert edit({"/etc/rc.conf": b"tor_env=LANG=C\n"}) == (
        "/etc/rc.conf", b'tor_env="LANG=C OPENSSL_ia32cap=' + V.encode() + b'"\n')


@pytest.mark.parametrize("service", ["tor;rm -rf /", "../etc", "", "tor env", "x" * 70])
def test_hostile_service_names_are_refused(service: str) -> None:
    plan = uplan.plan_apply("rc", service, V, [])
    assert isinstance(plan.refusal, Refuse)


@pytest.mark.parametrize("value", ["+0x200000200000000", "~0x1", "0x1 ; reboot", "fffa", "0x1:0x2:$X"])
def test_only_plain_values_are_written(value: str) -> None:
    assert isinstance(uplan.plan_apply("rc", "tor", value, []).refusal, Refuse)


def test_systemd_dropin_and_reload() -> None:
    plan = uplan.plan_apply("systemd", "tor@default", V, [], vector="0x80982201478bfffd:0x0")
    (w,) = plan.writes
    assert w.edit.path == "/etc/systemd/system/tor@default.service.d/bsdcrypt-aesni.conf" and not w.edit.existed
    assert b"[Service]\nEnvironment=OPENSSL_ia32cap=" + V.encode() + b"\n" in w.edit.after
    assert any(isinstance(a, RunCommand) and a.argv == ("systemctl", "daemon-reload") for a in plan.actions)
    again = uplan.plan_apply("systemd", "tor@default", V, [(w.edit.path, w.edit.after)], vector="0x80982201478bfffd:0x0")
    assert not again.changes_something
    removed = uplan.plan_apply("systemd", "tor@default", None, [(w.edit.path, w.edit.after)])
    assert removed.writes[0].edit.after == uplan.REMOVED


def test_not_root_is_a_refusal_that_still_shows_the_diff() -> None:
    plan = uplan.plan_apply("rc", "tor", V, [], is_root=False)
    assert plan.refusal is not None and plan.refusal.needs_root and plan.writes
