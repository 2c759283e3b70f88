"""What to tell the admin (pure text): how to apply per service, verify, roll back, guard, and what is better."""

from __future__ import annotations

from bsdcrypt.hostapi import sh_quote
from bsdcrypt.userland.plan import DROPIN_NAME, VAR, dropin_path, merge_env
from bsdcrypt.userland.trial import KEY

# What to ask for, per hypervisor (kern.vm_guest / CPUID vendor names, as bsdcrypt.assess reports them).
PROVIDER: dict[str, str] = {
    "kvm": "KVM/QEMU, Proxmox: CPU model `host` (libvirt <cpu mode='host-passthrough'/> or host-model), or a "
    "model with AES such as x86-64-v2-AES (Proxmox's default for new VMs) or Westmere and later instead of "
    "kvm64/qemu64; or add +aes,+pclmulqdq to the model",
    "qemu-tcg": "QEMU without KVM: a CPU model with AES (-cpu Westmere or later, or -cpu ...,+aes,+pclmulqdq)",
    "bhyve": "bhyve passes the host's AES-NI and PCLMULQDQ through: the host CPU (or its firmware setting) "
    "lacks them",
    "vmware": "VMware: raise the cluster's EVC baseline to Westmere or later (AES-NI arrived with Westmere), "
    "then power-cycle the VM; remove any per-VM CPUID mask",
    "hv": "Hyper-V: turn processor compatibility mode off for the VM (it hides modern CPU features)",
    "xen": "Xen: no cpuid= mask on aes/pclmulqdq in the guest's xl.cfg (e.g. cpuid=\"host,aes=k,pclmulqdq=k\")",
}
GENERIC = "ask the provider to pass AES and PCLMULQDQ through to the VM (host CPU model, or one with AES)"


def provider_advice(hypervisor: str | None) -> str:
    return PROVIDER.get(hypervisor or "", GENERIC)


def better(hypervisor: str | None, service: str) -> list[str]:
    lines = [
        "Better than any variable: " + provider_advice(hypervisor) + ". That also fixes kernel crypto "
        "(aesni(4): GELI, IPsec, KTLS, ZFS encryption), which OPENSSL_ia32cap cannot reach.",
    ]
    if service.split("@")[0] == "tor":
        lines.append("For tor only AES-NI helps: its relay cells are AES-128-CTR, there is no ChaCha20 alternative.")
    lines.append(
        "TLS servers, while AES is slow: prefer ChaCha20-Poly1305 (OpenSSL `Options = ServerPreference,"
        "PrioritizeChaCha`; nginx `ssl_prefer_server_ciphers on; ssl_conf_command Options PrioritizeChaCha;`)."
    )
    return lines


def refusal(hypervisor: str | None, what: str) -> list[str]:
    """The CPU really lacks the instruction: what to do instead."""
    return [
        f"Refused: {what}. The physical CPU (or the VM's CPU model, enforced by the hypervisor) really lacks "
        "AES-NI/PCLMULQDQ: forcing it would crash the service with SIGILL on its first AES operation.",
        "Prefer ChaCha20-Poly1305 (TLS: PrioritizeChaCha; SSH: chacha20-poly1305@openssh.com), and "
        + provider_advice(hypervisor) + ".",
    ]


def trial_command(openssl: str, value: str) -> str:
    return (
        f"env {VAR}={value} {openssl} enc -e -aes-128-ctr -K {KEY} -iv {KEY} -in /dev/null -out /dev/null"
    )


def rc_instructions(service: str, value: str, current_env: str | None, openssl: str) -> list[str]:
    merged = merge_env(current_env or "", value)
    rest = merge_env(current_env or "", None)
    rollback = f"sysrc {service}_env={sh_quote(rest)}" if rest else f"sysrc -x {service}_env"
    return [
        f"Apply to {service} only (rc.subr runs `env ${{{service}_env}} command`), never globally (not "
        "login.conf, not /etc/profile):",
        f"  sysrc {service}_env={sh_quote(merged)}"
        + ("   # merged with the existing " + service + "_env" if current_env else ""),
        f"  service {service} restart",
        "  In a jail: the jail's own rc.conf (sysrc -j JAIL ..., or run bsdcrypt userland inside the jail: "
        "its libcrypto may differ).",
        "Verify the running process got it:",
        f"  procstat -e $(pgrep -x {service}) | grep -o '{VAR}=[^ ]*'",
        "Roll back:",
        f"  {rollback} && service {service} restart",
        "Guard against a later move to a CPU without AES-NI (slow instead of a SIGILL crash loop): put the",
        f"assignment in /etc/rc.conf.d/{service} behind a trial, which load_rc_config runs before each start:",
        f"  if ( ulimit -c 0; {trial_command(openssl, value)} ) >/dev/null 2>&1; then",
        f"      {service}_env={sh_quote(merged)}",
        "  fi",
        "(the same trial can go into the script's start_precmd; `bsdcrypt userland --check` and the periodic "
        "script re-check it daily)",
    ]


def systemd_instructions(unit: str, value: str, openssl: str) -> list[str]:
    path = dropin_path(unit)
    return [
        f"Apply to {unit} only (a systemd drop-in), never globally (not /etc/environment, not a profile):",
        f"  mkdir -p {path.rsplit('/', 1)[0]}",
        f"  printf '[Service]\\nEnvironment={VAR}={value}\\n' > {path}",
        f"  systemctl daemon-reload && systemctl restart {unit}",
        "Verify:",
        f"  systemctl show -p Environment {unit}",
        f"  tr '\\0' '\\n' < /proc/$(systemctl show -p MainPID --value {unit})/environ | grep {VAR}",
        "Roll back:",
        f"  rm {path} && systemctl daemon-reload && systemctl restart {unit}",
        "Guard against a later move to a CPU without AES-NI (Debian's tor units restart on failure: a SIGILL "
        "would loop): instead of Environment=, let a trial write the variable before each start:",
        "  [Service]",
        f"  ExecStartPre=+/bin/sh -c 'mkdir -p /run/bsdcrypt; : > /run/bsdcrypt/{unit}.env; if ( ulimit -c 0; "
        f"{trial_command(openssl, value)} ) >/dev/null 2>&1; then echo {VAR}={value} > /run/bsdcrypt/{unit}.env; fi'",
        f"  EnvironmentFile=-/run/bsdcrypt/{unit}.env",
        f"(file name of bsdcrypt's own drop-in: {DROPIN_NAME}; `bsdcrypt userland --check` re-checks it)",
    ]


def sysv_instructions(service: str, value: str) -> list[str]:
    return [
        f"No systemd here: export it from the init script's defaults file (Debian: /etc/default/{service}):",
        f"  export {VAR}={value}",
        f"  service {service} restart; verify with /proc/PID/environ; roll back by removing the line.",
    ]
