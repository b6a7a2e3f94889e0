"""What a machine must have before kbisect installs anything on it: gathered by one
shell script over ssh (`key=value` lines), judged by pure functions into check rows.

root (or passwordless sudo), the arch, kexec-tools, systemd, python3, the pinned
PostgreSQL, lockdown off, Debian's LOAD_KEXEC off, no PostgreSQL server running; and the
known-good kernel (release, command line, build id) it runs now.
"""

from __future__ import annotations

import dataclasses
import shlex
from dataclasses import dataclass

from kbisect.core import arch as arch_mod
from kbisect.core.checks import FAIL, OK, WARN, Check
from kbisect.kernel import kimage
from kbisect.targets.ssh import kexec
from kbisect.targets.ssh.config import Machine

MIN_PYTHON = (3, 9)


def facts_script(m: Machine, majors: list[int]) -> str:
    """The shell script printing the facts (POSIX sh; reads only)."""
    bindirs = {n: shlex.quote(m.pg_bindir.format(major=n)) for n in majors}
    pg = "".join(
        f'echo "pg{n}=$({d}/postgres --version 2>/dev/null)"\n' for n, d in bindirs.items()
    )
    return (
        'echo "uid=$(id -u)"\n'
        'if [ "$(id -u)" = 0 ] || sudo -n true 2>/dev/null; then echo root=yes; '
        "else echo root=no; fi\n"
        'echo "release=$(uname -r)"\n'
        'echo "uname_m=$(uname -m)"\n'
        'echo "cmdline=$(cat /proc/cmdline)"\n'
        "echo \"notes=$(od -An -tx1 -v /sys/kernel/notes 2>/dev/null | tr -d ' \\n')\"\n"
        'echo "kexec=$(command -v kexec)"\n'
        'echo "systemctl=$(command -v systemctl)"\n'
        'echo "python3=$(python3 -c \'import sys; print("%d.%d" % sys.version_info[:2])\' '
        '2>/dev/null)"\n'
        f"{pg}"
        'echo "lockdown=$(cat /sys/kernel/security/lockdown 2>/dev/null)"\n'
        "echo \"load_kexec=$(sed -n 's/^LOAD_KEXEC=//p' /etc/default/kexec 2>/dev/null)\"\n"
        'echo "pg_running=$(pgrep -x postgres | wc -l)"\n'
        'echo "root_dev=$(findmnt -n -o SOURCE / 2>/dev/null)"\n'
    )


def parse(text: str) -> dict[str, str]:
    """`key=value` lines -> dict (values may contain '='; other lines are ignored)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.isidentifier():
            out[key] = value.strip()
    return out


@dataclass(frozen=True)
class KnownGood:
    """The kernel a machine boots by itself, which kbisect always brings it back to."""

    release: str
    cmdline: str
    build_id: str | None

    def matches(self, facts: dict[str, str]) -> str | None:
        """None when `facts` show this kernel running, else what differs."""
        if kexec.nonce_of(facts.get("cmdline", "")):
            return f"a kernel kbisect switched to runs ({facts.get('release')})"
        if facts.get("release") != self.release:
            return f"release {facts.get('release')!r} runs, not {self.release!r}"
        got = build_id(facts)
        if self.build_id and got != self.build_id:
            return f"build id {got} runs, not {self.build_id}"
        return None


def build_id(facts: dict[str, str]) -> str | None:
    try:
        return kimage.notes_build_id(bytes.fromhex(facts.get("notes", "")))
    except ValueError:
        return None


def known_good(facts: dict[str, str]) -> KnownGood:
    return KnownGood(facts.get("release", ""), facts.get("cmdline", ""), build_id(facts))


def lockdown(text: str) -> str:
    """`[none] integrity confidentiality` -> none; no file (no LSM) -> none."""
    if "[" not in text:
        return "none"
    return text.split("[", 1)[1].split("]", 1)[0]


def python_version(text: str) -> tuple[int, int] | None:
    try:
        major, minor = text.split(".")[:2]
        return int(major), int(minor)
    except ValueError:
        return None


def rows(m: Machine, facts: dict[str, str], majors: list[int]) -> list[Check]:
    """Every requirement as an OK/FAIL row (WARN: not needed for the kexec switch)."""
    py = python_version(facts.get("python3", ""))
    arch = arch_mod.from_machine(facts.get("uname_m", "?"))
    sudo = "root" if facts.get("uid") == "0" else "passwordless sudo"
    out = [
        _row(
            "root",
            facts.get("root") == "yes",
            sudo,
            f"log in as root or allow {m.user} passwordless sudo",
        ),
        _row(
            "arch",
            arch == m.arch,
            f"{arch} (target file says {m.arch})",
            f'set arch = "{arch}" in the target file',
        ),
        _row(
            "python3",
            py is not None and py >= MIN_PYTHON,
            facts.get("python3") or "missing",
            "install python3 (3.9 or newer)",
        ),
        _row(
            "lockdown",
            lockdown(facts.get("lockdown", "")) == "none",
            lockdown(facts.get("lockdown", "")),
            "boot with lockdown=none / Secure Boot off (kexec refuses unsigned kernels)",
        ),
        _row(
            "pg stopped",
            facts.get("pg_running", "0") == "0",
            f"{facts.get('pg_running', '?')} postgres processes",
            "stop the machine's PostgreSQL: systemctl disable --now postgresql",
        ),
    ]
    out += [_pg_row(m, facts, n) for n in majors]
    if m.switch == "kexec":
        out += [
            _row(
                "kexec-tools",
                bool(facts.get("kexec")),
                facts.get("kexec") or "missing",
                "install kexec-tools",
            ),
            _row(
                "systemd",
                bool(facts.get("systemctl")),
                facts.get("systemctl") or "missing",
                "kbisect switches with `systemctl kexec`: the machine must run systemd",
            ),
            _row(
                "LOAD_KEXEC",
                facts.get("load_kexec", "false").strip("\"'") != "true",
                f"LOAD_KEXEC={facts.get('load_kexec') or 'unset'}",
                "set LOAD_KEXEC=false in /etc/default/kexec (else a reboot kexecs the "
                "current kernel and command line)",
            ),
        ]
    if not m.power_cycle:
        out.append(
            Check(
                "power cycle",
                WARN,
                "none configured",
                "set power_cycle: a hung kernel then needs your hands",
            )
        )
    return out


def _pg_row(m: Machine, facts: dict[str, str], major: int) -> Check:
    text = facts.get(f"pg{major}", "")
    ok = f"(PostgreSQL) {major}." in text
    where = m.pg_bindir.format(major=major)
    return _row(
        f"PostgreSQL {major}",
        ok,
        text or f"no {where}/postgres",
        f"install PostgreSQL {major} (e.g. postgresql-{major}) or set pg_bindir",
    )


def _row(name: str, ok: bool, detail: str, fix: str) -> Check:
    return Check(name, OK if ok else FAIL, detail, "" if ok else fix)


def failures(checks: list[Check]) -> str | None:
    """One line naming every FAIL row, or None."""
    bad = [f"{c.name}: {c.detail} ({c.fix})" for c in checks if c.status == FAIL]
    return "; ".join(bad) if bad else None


def doctor_rows(m: Machine, facts: dict[str, str], majors: list[int]) -> list[Check]:
    """`kbisect doctor --target NAME`: every row, named after the machine; a PostgreSQL
    major some scenario pins but the machine lacks is a WARN (only those scenarios fail)."""
    out = [Check("ssh", OK, m.login_name)]
    for row in rows(m, facts, majors):
        pg = row.name.startswith("PostgreSQL") and row.status == FAIL
        out.append(dataclasses.replace(row, status=WARN) if pg else row)
    known = known_good(facts)
    out.append(Check("known-good kernel", OK, f"{known.release} ({known.build_id})"))
    return [dataclasses.replace(r, name=f"{m.name}: {r.name}") for r in out]
