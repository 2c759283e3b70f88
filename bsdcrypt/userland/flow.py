"""`bsdcrypt userland`'s flow without the CLI (docs/userland.md): which init system, the service's
files and current value; derive -> trial -> measure -> instructions; plan -> act for --apply; --check
and --remove. Lines go out through `Talk.out`; the plan, the question and warnings through its other
callbacks, so the CLI decides how they look. Each step returns the exit status (None: go on).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bsdcrypt.enable.plan import Plan
from bsdcrypt.platform import FREEBSD_FAMILY

EXIT_WARNING = 1
# measured before/after: AES-128-CTR is what tor's relay cells use, AES-128-GCM what TLS uses,
# ChaCha20-Poly1305 the alternative when AES stays slow
SPEED_CIPHERS = ("aes-128-gcm", "aes-128-ctr", "chacha20-poly1305")
EXIT_REFUSED = 2


@dataclass
class Talk:
    """How the flow speaks: `out` a line of the report, `on_plan` the plan before it is carried out,
    `confirm` the question (asked only when `can_ask`), `warn` a line for stderr."""

    out: Callable[..., None]
    on_plan: Callable[[Plan], None]
    confirm: Callable[[], bool]
    can_ask: bool
    warn: Callable[[str], None]


def _mb(v: float | None) -> str:
    return "-" if v is None else f"{v / 1e6:,.0f}"


def detect_system(host: Any) -> str:
    """rc (FreeBSD family), systemd, or sysv (Linux without systemd); UserlandError otherwise."""
    from bsdcrypt.userland.session import UserlandError

    res = host.run("uname -s; test -d /run/systemd/system && echo systemd; exit 0", timeout=30)
    lines = res.stdout.decode("utf-8", "replace").split()
    if lines and lines[0] in FREEBSD_FAMILY:
        return "rc"
    if lines and lines[0] == "Linux":
        return "systemd" if "systemd" in lines else "sysv"
    raise UserlandError(f"unsupported system {lines[0] if lines else '(no uname)'}: FreeBSD or Linux only")


def rc_paths(host: Any, unit: str, root: str) -> list[str]:
    """rc_files in load_rc_config's order, a rc.conf.d/<svc> directory replaced by its files (sorted as
    sh's glob sorts them in the C locale)."""
    from bsdcrypt.hostapi import sh_quote
    from bsdcrypt.userland import plan as uplan

    out = uplan.rc_files(unit, root)[:2]
    for d in uplan.rc_conf_d_dirs(unit, root):
        q = sh_quote(d)
        res = host.run(f"LC_ALL=C; if [ -d {q} ]; then for f in {q}/*; do [ -f \"$f\" ] && printf '%s\\n' \"$f\"; "
                       f"done; else printf '%s\\n' {q}; fi; exit 0", timeout=30)
        out += [ln for ln in res.stdout.decode("utf-8", "replace").splitlines() if ln.startswith(d)]
    return out


def read_files(host: Any, paths: list[str]) -> list[tuple[str, bytes]]:
    from bsdcrypt.hostapi import sh_quote

    out: list[tuple[str, bytes]] = []
    for p in paths:
        res = host.run(f"test -f {sh_quote(p)} && cat -- {sh_quote(p)}", timeout=30)
        if res.rc == 0:
            if len(res.stdout) > 1 << 20:
                from bsdcrypt.userland.session import UserlandError

                raise UserlandError(f"{p} is over 1 MiB: not a configuration file bsdcrypt edits")
            out.append((p, res.stdout))
    return out


def current_value(system: str, unit: str, files: list[tuple[str, bytes]], root: str) -> tuple[str | None, str | None]:
    """(the service's current OPENSSL_ia32cap, its whole _env) from the files that hold it."""
    from bsdcrypt.userland import plan as uplan

    if system == "rc":
        last = uplan.find_last(files, f"{unit}_env")
        if last is None:
            return None, None
        value = next((w.split("=", 1)[1] for w in last.value.split() if w.startswith(uplan.VAR + "=")), None)
        return value, last.value
    for path, data in files:
        if path == uplan.dropin_path(unit, root):
            for line in data.decode("utf-8", "replace").splitlines():
                if line.startswith(f"Environment={uplan.VAR}="):
                    return line.split("=", 2)[2].strip(), None
    return None, None


def trial_lines(t: Any) -> list[str]:
    lines = [f"trial with OPENSSL_ia32cap={t.value} (children: no core dumps, timeout, cwd /tmp):"]
    for r in t.results:
        extra = "" if r.baseline_rc is None else f", without it exit {r.baseline_rc}"
        lines.append(f"  {r.verdict:<11} {r.what} (exit {r.rc}{extra})")
    if not t.timeout_tool:
        lines.append("  (no timeout(1) on the host: the host-side timeout is the only limit)")
    return lines


def measure_lines(m: Any) -> list[str]:
    before = "unset" if m.before_env is None else f"OPENSSL_ia32cap={m.before_env} (AES-NI masked: the simulation)"
    lines = [
        f"openssl speed, CPU-time mode, {m.rounds} interleaved rounds of {m.seconds} s, 16 KiB blocks, MB/s "
        "(median, spread):",
        f"  before: {before}",
        f"  after:  OPENSSL_ia32cap={m.after_env}",
    ]
    for c in m.ciphers:
        def sp(s: Any) -> str:
            return "" if s.spread is None else f" ±{s.spread * 50:.0f}%"

        gain = "" if c.gain is None else f"  {c.gain:.1f}x"
        lines.append(f"  {c.cipher:<18} {_mb(c.before.median):>8}{sp(c.before):<6} -> {_mb(c.after.median):>8}"
                     f"{sp(c.after):<6}{gain}")
    if m.noisy:
        lines.append("  NOISY: some runs got well under a full CPU or the rounds disagree; repeat with --rounds 5 "
                     "on a quieter moment before trusting the ratio")
    lines += [f"  failed: {f}" for f in m.failures]
    return lines


def hypervisor(h: Any) -> str | None:
    from bsdcrypt.pipeline import status_of

    try:
        s = status_of(h, timeout=120)
    except Exception:  # the advice only loses its per-hypervisor wording
        return None
    if s.cpu.hypervisor or s.os.name != "Linux":
        return s.cpu.hypervisor
    res = h.run("systemd-detect-virt 2>/dev/null", timeout=30)  # Linux: kvm, qemu, vmware, microsoft, xen, ...
    virt = res.stdout.decode("utf-8", "replace").strip()
    return {"microsoft": "hv", "qemu": "qemu-tcg"}.get(virt, virt) if res.rc == 0 and virt != "none" else None


def derive_prove_measure(
    h: Any, out: Any, doc: dict[str, Any], system: str, unit: str, openssl: str, simulate: bool, bench: bool,
    rounds: int, seconds: int, current_env: str | None,
) -> int | None:
    from bsdcrypt.bench import speed
    from bsdcrypt.parsers import ia32cap
    from bsdcrypt.userland import advice, trial
    from bsdcrypt.userland.session import choose_openssl, derive

    prog, why = choose_openssl(h, unit, openssl or None)
    d = derive(h, prog, why, simulate_hidden=simulate)
    hv = hypervisor(h)
    doc.update(openssl=d.openssl, openssl_why=d.why_openssl, library=f"{d.version.library} {d.version.version}",
               grammar=d.lib.grammar, detected=ia32cap.format_value(d.detected), vector_from=d.vector_from,
               simulated=simulate, value=d.value, hypervisor=hv)
    out(f"openssl: {d.openssl} ({d.version.library} {d.version.version}; {d.why_openssl})")
    out(f"grammar: {d.lib.why}")
    out(f"detected vector ({'masked: --simulate-hidden' if simulate else 'variable unset'}, from {d.vector_from}): "
        f"{ia32cap.format_value(d.detected)}")
    if d.value is None:
        out("OpenSSL already sees AES-NI (bit 57) on this host: there is nothing to force.")
        doc["result"] = "nothing-to-do"
        return 0
    out(f"value: OPENSSL_ia32cap={d.value}   (this host's vector + AES-NI bit 57 + PCLMULQDQ bit 33, nothing else)")
    if d.echo_ok is False:
        out(f"refused: `version -c` with the value printed {ia32cap.format_value(d.echo or ())}, not the value with "
            "bit 57: this libcrypto does not take it as bsdcrypt expects")
        doc["result"] = "refused"
        return EXIT_REFUSED
    if d.echo_ok:
        out(f"echo check: `version -c` prints {ia32cap.format_value(d.echo or ())} (bit 57 set): the library took it")
    t = trial.run(h, d.openssl, d.value, d.before_env, old=d.lib.grammar == "sscanf")
    doc["trials"] = [{"name": r.name, "what": r.what, "rc": r.rc, "baseline_rc": r.baseline_rc, "verdict": r.verdict}
                     for r in t.results]
    for line in trial_lines(t):
        out(line)
    if not t.passed:
        bad = [r for r in t.results if r.verdict not in ("pass", "unavailable")]
        what = (f"{len(bad)} of {len(t.results)} trials did not pass ({', '.join(sorted({r.verdict for r in bad}))}; "
                f"the first: {bad[0].what})" if bad else "the AES trial did not run")
        for line in advice.refusal(hv, what):
            out(line)
        doc["result"] = "refused"
        return EXIT_REFUSED
    if bench:
        # 1.0.2/1.1.0 (sscanf grammar) run the old way; 1.1.0i+ lacks -seconds too: the first run finds out
        m = speed.run(h, d.openssl, d.before_env, d.value, rounds=rounds, seconds=seconds,
                      old=True if d.lib.grammar == "sscanf" else None, ciphers=SPEED_CIPHERS)
        doc["measurement"] = {
            "rounds": m.rounds, "seconds": m.seconds, "before_env": m.before_env, "after_env": m.after_env,
            "noisy": m.noisy, "failures": m.failures,
            "ciphers": [{"cipher": c.cipher, "before_bytes_per_s": c.before.bytes_per_s,
                         "after_bytes_per_s": c.after.bytes_per_s, "before_median": c.before.median,
                         "after_median": c.after.median, "gain": c.gain,
                         "before_cpu_share": c.before.cpu_share, "after_cpu_share": c.after.cpu_share}
                        for c in m.ciphers],
        }
        for line in measure_lines(m):
            out(line)
    if system == "rc":
        how = advice.rc_instructions(unit, d.value, current_env, d.openssl)
    elif system == "systemd":
        how = advice.systemd_instructions(unit, d.value, d.openssl)
    else:
        how = advice.sysv_instructions(unit.split("@")[0], d.value)
    doc["instructions"] = how
    doc["better"] = advice.better(hv, unit)
    doc["result"] = "proved"
    out()
    for line in how + [""] + doc["better"]:
        out(line)
    return None


def plan_and_act(h: Any, talk: Talk, doc: dict[str, Any], system: str, unit: str, value: str | None,
                  files: list[tuple[str, bytes]], dry_run: bool, yes: bool, root: str) -> int:
    from bsdcrypt.enable.act import ActInterrupted, perform
    from bsdcrypt.errors import ActError
    from bsdcrypt.userland import plan as uplan

    out = talk.out
    if system == "sysv":
        out("--apply/--remove edit rc.conf (FreeBSD) or a systemd drop-in; this Linux has no systemd: edit "
            f"/etc/default/{unit.split('@')[0]} by hand (above)")
        return EXIT_REFUSED
    is_root = h.run("id -u", timeout=30).stdout.decode().strip() == "0" if not root else None
    plan = uplan.plan_apply(system, unit, value, files, vector=doc.get("detected", ""), root=root, is_root=is_root)
    talk.on_plan(plan)
    if plan.refusal is not None:
        if dry_run and plan.refusal.needs_root:
            out("dry run: nothing changed (applying this needs root).")
            return 0
        return EXIT_REFUSED
    if not plan.changes_something:
        out("nothing to change.")
        return 0
    if dry_run:
        out("dry run: nothing changed.")
        return 0
    if not yes:
        if not talk.can_ask:
            out("not changing anything without confirmation: re-run with --yes (or --dry-run to look)")
            return EXIT_REFUSED
        if not talk.confirm():
            out("nothing changed.")
            return 1
    if system == "systemd":
        from bsdcrypt.hostapi import sh_quote

        d = plan.writes[0].edit.path.rsplit("/", 1)[0]
        res = h.run(f"mkdir -p -m 755 {sh_quote(d)}", timeout=30)
        if res.rc != 0:
            out(f"mkdir {d} failed: {res.stderr.decode('utf-8', 'replace').strip()[:200]}; nothing changed")
            return 3
    try:
        perform(h, plan, echo=lambda line: out(f"  {line}"), root=root)
    except ActInterrupted as exc:
        talk.warn(f"bsdcrypt: {exc}")
        return 130
    except ActError as exc:
        out(f"bsdcrypt: {exc}")
        return 3
    doc["applied"] = True
    return 0


def apply(h: Any, talk: Talk, doc: dict[str, Any], system: str, unit: str, value: str | None,
          files: list[tuple[str, bytes]], dry_run: bool, yes: bool, root: str) -> int:
    if value is None:
        return 0
    talk.out()
    return plan_and_act(h, talk, doc, system, unit, value, files, dry_run, yes, root)


def check_or_remove(h: Any, talk: Talk, doc: dict[str, Any], system: str, unit: str, current: str | None,
                    files: list[tuple[str, bytes]], openssl: str, check: bool, remove: bool, dry_run: bool,
                    yes: bool, root: str) -> int:
    """--check: is the applied value still this host's vector + AES, and does a trial pass? --remove
    alone takes it out; --check --remove only when it no longer fits."""
    from bsdcrypt.parsers import ia32cap
    from bsdcrypt.userland import trial
    from bsdcrypt.userland.session import UserlandError, choose_openssl, derive

    out = talk.out
    if current is None:
        out(f"{unit} has no OPENSSL_ia32cap (looked in: {', '.join(p for p, _ in files) or 'no file exists'}).")
        doc["result"] = "no-override"
        return 0
    out(f"{unit}: OPENSSL_ia32cap={current}")
    bad = False
    if check:
        prog, why = choose_openssl(h, unit, openssl or None)
        hazard: str
        try:
            d = derive(h, prog, why)
            hazard, message = ia32cap.classify_override(current, d.detected, d.lib)
        except UserlandError as exc:
            hazard, message = "unknown", str(exc)
        out(f"vector check: {hazard}: {message}")
        t = trial.run(h, prog, current, None)
        for line in trial_lines(t):
            out(line)
        doc.update(hazard=hazard, trial_passed=t.passed)
        bad = hazard in ("stale", "plus", "no-0x") or not t.passed
        if not bad:
            out("the applied value still fits this host and its trial passes.")
            doc["result"] = "ok"
            return 0
        out("WARNING: " + ("the trial fails: the service would die with SIGILL; " if not t.passed else "")
            + ("remove it" if not remove else "removing it") + " (bsdcrypt userland --check --remove).")
        if not remove:
            doc["result"] = "warning"
            return EXIT_REFUSED if not t.passed else EXIT_WARNING
    code = plan_and_act(h, talk, doc, system, unit, None, files, dry_run, yes, root)
    doc["result"] = "removed" if doc.get("applied") else doc.get("result", "not-removed")
    return code if code else (EXIT_WARNING if bad else 0)
