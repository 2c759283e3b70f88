"""trial.parse / verdicts (pure), and the script's shape: children without core dumps, under timeout(1)."""

from __future__ import annotations

from bsdcrypt.userland import trial


def test_verdicts() -> None:
    out = "\n".join([
        "bsdcrypt-trial-timeout yes",
        "bsdcrypt-trial aes 0 -",
        "bsdcrypt-trial gcm 132 0",
        "bsdcrypt-trial cbc 132 132",   # dies without the value too: not the value's fault
        "bsdcrypt-trial chacha 1 1",    # this openssl cannot do it at all
        "bsdcrypt-trial sha256 139 0",  # another signal
        "bsdcrypt-trial sha1 1 0",      # fails only with the value
        "bsdcrypt-trial bogus 0 -",     # not a trial: ignored
        "garbage",
    ])
    t = trial.parse(out, "0x1:0x0", old=False)
    assert {r.name: r.verdict for r in t.results} == {
        "aes": "pass", "gcm": "sigill", "cbc": "unavailable", "chacha": "unavailable", "sha256": "crash",
        "sha1": "failed"}
    assert not t.passed and [r.name for r in t.sigill] == ["gcm"]


def test_all_pass_or_unavailable_passes_but_not_without_the_aes_trial() -> None:
    assert trial.parse("bsdcrypt-trial aes 0 -\nbsdcrypt-trial chacha 1 1\n", "v", old=False).passed
    assert not trial.parse("bsdcrypt-trial gcm 0 -\n", "v", old=False).passed
    assert not trial.parse("", "v", old=False).passed  # a host that printed nothing proves nothing


def test_old_speed_still_running_at_the_timeout_is_a_pass() -> None:
    t = trial.parse("bsdcrypt-trial-timeout yes\nbsdcrypt-trial aes 0 -\nbsdcrypt-trial gcm 124 -\n", "v", old=True)
    assert t.passed
    t = trial.parse("bsdcrypt-trial aes 124 -\n", "v", old=True)  # enc never runs that long: no pass
    assert not t.passed


def test_script_shape() -> None:
    s = trial.script("/usr/bin/openssl", "0x1:0x0", None, old=False)
    assert s.count("ulimit -c 0") == 2 * len(trial.TRIALS)  # with and without the value, each a child
    assert "OPENSSL_ia32cap='0x1:0x0'; export OPENSSL_ia32cap" in s and "unset OPENSSL_ia32cap" in s
    assert "timeout \"$@\"" in s
    old = trial.script("/usr/bin/openssl", "0x1:0x0", None, old=True)
    assert "-seconds" not in old and f"to {trial.OLD_SECONDS} '/usr/bin/openssl' speed -evp aes-128-gcm" in old
