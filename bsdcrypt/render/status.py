"""`status`: table (default), JSON, YAML, the monitoring-plugins line, Prometheus text and HTML."""

from __future__ import annotations

from bsdcrypt.assess.findings import VARIANT_NAMES
from bsdcrypt.render.serialize import to_json, to_yaml, yesno
from bsdcrypt.status import SEVERITY_RANK, Status

FORMATS = ("table", "json", "yaml", "nagios", "prometheus", "html")


def table(s: Status, width: int | None = None) -> str:
    """The host's table and its findings. `width` None: whole lines (a pipe, a file); else every line
    fits that many columns (a terminal): values break between their parts, messages and remedies wrap
    under their column (bsdcrypt.render.fit)."""
    from tabulate import tabulate

    from bsdcrypt.text import LIST_LIMIT, visible_lines, visible_status

    n_geli = len(s.geli)
    s = visible_status(s)  # host text: control characters shown, each field cut (bsdcrypt.text)
    o, c, d, p = s.os, s.cpu, s.driver, s.persist
    osline = " ".join(x for x in (o.name, o.release, o.arch) if x) or "unknown"
    if o.variant not in ("freebsd", "unknown", None) and o.variant != (o.name or "").lower():
        osline += f"  [{o.product or VARIANT_NAMES.get(o.variant, o.variant)}]"
    if o.kernel_ident:
        osline += f"  kernel {o.kernel_ident}"
    cpu = c.model or "unknown CPU"
    cpu += f"  AES: {yesno(c.aesni, 'unknown')}  SHA: {yesno(c.sha, 'unknown')}"
    if c.vm:
        cpu += f"  VM: {c.hypervisor or 'yes'}"
    drv = f"{d.name or '-'}: {d.state}"
    if d.state == "unknown" and d.reason:
        drv += f"  ({d.reason})"
    if d.algorithms:
        drv += f"  <{','.join(d.algorithms)}>"
    if d.module_file and d.state != "builtin":
        drv += f"  ({d.module_file})"
    if d.inferred:
        drv += f"  (inferred: {d.inferred})"
    for other in s.other_drivers:
        drv += f"\n{other.name}: {other.state}"
    persist = "compiled in" if d.compiled_in else yesno(p.configured, "unknown")
    if p.value is not None and p.source:
        persist += f"  ({d.name}_load={p.value} at {p.source})"
    elif (p.source or "").startswith("appliance setting"):
        product = o.product or VARIANT_NAMES.get(o.variant, o.variant)
        if p.inferred:
            persist = f"yes, inferred: by the {product} crypto setting (config.xml not readable)"
        elif p.configured is None:
            persist = f"inferred: by the {product} crypto setting (config.xml not readable)"
        else:
            persist += f"  (the {product} crypto setting: {(p.source or '').split('(', 1)[-1].rstrip(')')})"
    if p.blacklisted:
        persist += f"  (blacklisted: module_blacklist at {p.blacklisted})"
    elif p.uncertain and p.configured is None:
        persist += f"  ({p.uncertain})"
    elif p.inferred:
        persist += f"  (inferred: {p.inferred})"
    if p.needed is False and not d.compiled_in:
        persist += "  (not needed)"
    if p.configured is None and p.reason and not d.compiled_in:
        persist += f"  ({p.reason})"
    rows = [
        ["Host", s.host],
        ["OS", osline],
        ["CPU", cpu],
        ["Driver", drv],
        ["Persisted", persist],
    ]
    if s.geli:
        rows.append(
            ["GELI", "\n".join(f"{g.name}: {g.encryption} {g.key_length or ''} crypto={g.crypto}" for g in s.geli)]
        )
    from bsdcrypt.render.consumers import lines as consumer_lines

    consumers = consumer_lines(s)
    if consumers:
        rows.append(["Consumers", "\n".join(consumers)])
    userland = _userland_line(s)
    if userland:
        rows.append(["Userland", userland])
    rows.append(["Verdict", s.verdict.upper()])
    more = f"({n_geli - LIST_LIMIT} more GELI providers not shown; -f json lists all {n_geli})"
    if width is not None:
        return visible_lines(_fitted(rows, s, more if n_geli > LIST_LIMIT else "", width))
    out = tabulate(rows, tablefmt="plain")
    if s.findings:
        frows = [[f.severity, f.id, f"{f.message}\n-> {f.remedy}"] for f in s.findings]
        out += "\n\n" + tabulate(frows, headers=["severity", "finding", "message / remedy"], tablefmt="simple")
    if n_geli > LIST_LIMIT:
        out += f"\n{more}"
    return visible_lines(out + "\n")


NARROWEST_MESSAGE = 30  # below this the message column is too thin to read: the findings stack instead


def _fitted(rows: list[list[str]], s: Status, more: str, width: int) -> str:
    """table() in `width` columns (at least render.fit.MIN_WIDTH)."""
    from tabulate import tabulate

    from bsdcrypt.render.fit import fit_block, simple_table, usable, wrap

    w = usable(width) or width
    key = max(len(k) for k, _ in rows) + 2
    out = tabulate([[k, fit_block(v, w - key, "  ")] for k, v in rows], tablefmt="plain")
    if s.findings:
        sev = max(len("severity"), *(len(f.severity) for f in s.findings))
        ids = max(len("finding"), *(len(f.id) for f in s.findings))
        room = w - sev - ids - 4
        if room >= NARROWEST_MESSAGE:
            frows = [
                [f.severity, f.id, "\n".join([*wrap(f.message, room), *wrap(f.remedy, room, "-> ", "   ")])]
                for f in s.findings
            ]
            out += "\n\n" + simple_table(["severity", "finding", "message / remedy"], frows)
        else:  # one finding after another: its severity and id, then its message and remedy under them
            lines = ["", "severity  finding", "--------  -------"]
            for f in s.findings:
                lines.append(f"{f.severity:<8}  {f.id}")
                lines += [*wrap(f.message, w, "  ", "  "), *wrap(f.remedy, w, "  -> ", "     ")]
            out += "\n" + "\n".join(lines)
    if more:
        out += "\n" + "\n".join(wrap(more, w))
    return out + "\n"


_CASES = {
    "aesni-visible": "OpenSSL sees AES-NI",
    "hidden-by-hypervisor": "AES-NI hidden by the hypervisor",
    "cpu-without-aesni": "CPU without AES-NI (never force)",
    "not-x86": "not x86 (OPENSSL_ia32cap does not apply)",
}


def _userland_line(s: Status) -> str | None:
    """OpenSSL programs, the AES-NI case and any override; None when the probe did not look."""
    u = s.userland_aes
    if u.libraries is None:
        return None
    libs = [f"{lib.library} {lib.version} ({lib.path})" for lib in u.libraries if lib.library] or ["no openssl found"]
    line = ", ".join(libs) + "  " + _CASES.get(u.case or "", "AES-NI: unknown")
    if u.overrides:
        line += "\n" + "\n".join(f"OPENSSL_ia32cap at {o.file}:{o.line}: {o.hazard}" for o in u.overrides)
    return line


def _perf(value: float | None) -> str:
    """A perfdata value: the number, or `U` when bsdcrypt could not determine it (monitoring-plugins
    guidelines), never a 0 that would read as a measured 'no'."""
    return "U" if value is None else str(int(value))


def nagios(s: Status) -> str:
    """One line per the monitoring-plugins guidelines: SERVICE STATUS: text | perfdata.

    The perfdata values are the ones `--format prometheus` reports (bsdcrypt_aesni_active,
    bsdcrypt_persisted, bsdcrypt_geli_software_providers); where Prometheus leaves a series out
    because the value is undetermined (no kldstat, an appliance's own setting, a Linux host, an
    unreachable host), the perfdata value is `U`.
    """
    from bsdcrypt.platform import FREEBSD_FAMILY  # GELI exists there only
    from bsdcrypt.text import visible_status

    s = visible_status(s)  # one line of bounded, printable text whatever the host sent
    label = {"ok": "OK", "warning": "WARNING", "critical": "CRITICAL", "unknown": "UNKNOWN"}[s.verdict]
    top = max(s.findings, key=lambda f: SEVERITY_RANK[f.severity], default=None)
    text = top.message if top else f"{s.driver.name} {s.driver.state}, kernel AES accelerated"
    text = " ".join(text.replace("|", "/").split()) or (top.id if top else label)  # one line, no |
    d, p = s.driver, s.persist
    active = None if d.attached is None else int(d.attached is True and d.accelerates_aes is True)
    persisted = None if p.configured is None else int(p.configured)
    soft = sum(1 for g in s.geli if g.accelerated is False) if s.os.name in FREEBSD_FAMILY else None
    perf = f"aes_active={_perf(active)};;;0;1 persisted={_perf(persisted)};;;0;1 geli_software={_perf(soft)};;;0"
    return f"BSDCRYPT {label}: {text} | {perf}\n"


def render(s: Status, fmt: str, width: int | None = None) -> str:
    """`s` in format `fmt`; `width` fits the table to a terminal (None: whole lines; the other formats never)."""
    if fmt == "json":
        return to_json(s.to_dict())
    if fmt == "yaml":
        return to_yaml(s.to_dict())
    if fmt == "nagios":
        return nagios(s)
    if fmt == "prometheus":
        import time

        from bsdcrypt.render import prometheus

        return prometheus.render([s], timestamp=time.time())
    if fmt == "html":
        from bsdcrypt.render.html import status_page  # Jinja2: only on this path

        return status_page(s, s.source)
    return table(s, width)
