"""A report as one mail for a mailing list (`kbisect report RUN_DIR --format mbox`): an
RFC 5322 message in mbox form (a `From ` line first), made with the standard library's
email package, ready for `git send-email` or a mail client's "open mbox".

The body follows the kernel test robot's performance mails: the change in one line, the
commit with its subject and tree, the testcase and its parameters, the machine, the
compiler and kconfig, the comparison table (mean, CV, 95% CI, n per side), the culprit
or the revert's effect, the command that reproduces it, then the trailers the sender
fills in. kbisect/compare/mail.py and kbisect/bisect/report/mail.py write the bodies;
docs/mailing-list.md shows one.
"""

from __future__ import annotations

import datetime as dt
import email.policy
import email.utils
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from email.generator import Generator
from email.message import EmailMessage
from typing import Any

from kbisect.core.exceptions import UserError
from kbisect.measure.record import Sample
from kbisect.report import build
from kbisect.report.text import WIDTH, cpu_line, first_fingerprint, fit, memory_line, para
from kbisect.report.text import target_line as target_of
from kbisect.stats import means

MBOX = "report.mbox"
PREFIX = "[kbisect]"
# The sender until --from names one: an address of the reserved .invalid domain
# (RFC 2606), so a mail sent without editing it bounces instead of going astray.
PLACEHOLDER_FROM = "kbisect user <edit-me@example.invalid>"
# The trailers the robot asks a fix to carry; the sender fills in the <...>.
TRAILERS = (
    "Reported-by: <your name> <your address>",
    "Closes: <the link to this mail on lore.kernel.org>",
    "Tested-by: <who re-ran the fix with the command above>",
)
SIGNATURE = "\n-- \nkbisect: kernel bisection for PostgreSQL performance\n"
POLICY = email.policy.default.clone(max_line_length=WIDTH, linesep="\n")


class BadAddress(UserError):
    """--to, --cc or --from that is no mail address."""


@dataclass(frozen=True)
class Mail:
    subject: str  # without the [kbisect] prefix
    body: list[str]  # lines, at most WIDTH columns after fit()
    date: str | None  # ISO 8601 UTC (the summary's `created`), for the Date header


def address(text: str) -> str:
    """`Name <a@b>` or `a@b`, checked; BadAddress, one line, if not."""
    if any(ord(c) < 32 for c in text):
        raise BadAddress(f"{text!r}: a mail address has no control characters")
    name, addr = email.utils.parseaddr(text)
    local, at, domain = addr.rpartition("@")
    if not (at and local and "." in domain.strip(".")):
        raise BadAddress(f"{text!r}: not a mail address (want 'Name <user@example.org>')")
    return email.utils.formataddr((name, addr))


def _date(iso: str | None) -> dt.datetime:
    try:
        when = dt.datetime.fromisoformat(str(iso).replace("Z", "+00:00"))
    except ValueError:
        when = dt.datetime(1970, 1, 1)
    return when if when.tzinfo else when.replace(tzinfo=dt.UTC)


def message(
    mail: Mail, *, sender: str | None, to: Sequence[str] = (), cc: Sequence[str] = ()
) -> str:
    """The mail as an mbox of one message: `From ` line, headers, body."""
    msg = EmailMessage(policy=POLICY)
    msg["From"] = address(sender) if sender else PLACEHOLDER_FROM
    if to:
        msg["To"] = ", ".join(address(x) for x in to)
    if cc:
        msg["Cc"] = ", ".join(address(x) for x in cc)
    msg["Subject"] = f"{PREFIX} {mail.subject}"
    when = _date(mail.date)
    msg["Date"] = email.utils.format_datetime(when)
    msg.set_content(fit(mail.body) + SIGNATURE, charset="utf-8", cte="8bit")
    msg.set_unixfrom(f"From kbisect {when.strftime('%a %b %d %H:%M:%S %Y')}")
    out = io.StringIO()
    Generator(out, mangle_from_=True, policy=POLICY).flatten(msg, unixfrom=True)
    return out.getvalue()


def testcase(settings: Mapping[str, Any], name: str, digest: str) -> list[str]:
    """`testcase: pgbench (scenario NAME)` and its parameters, one per line."""
    b = settings.get("pgbench") or {}
    pg = (settings.get("postgres") or {}).get("settings") or {}
    guest = settings.get("guest") or {}
    params = {
        "scenario": f"{name} (sha256 {digest[:12]})",
        "mode": b.get("builtin") or ("script" if b else None),
        "protocol": b.get("protocol"),
        "clients": b.get("clients"),
        "threads": b.get("threads"),
        "scale": b.get("scale"),
        "runs": f"{b['runs']} x {b.get('duration_s')} s" if b.get("runs") else None,
        "warm-up runs": b.get("warmup_runs"),
        "warm-up run": f"{b['warmup_s']} s" if b.get("warmup_s") else None,
        "shared_buffers": pg.get("shared_buffers"),
        "huge_pages": pg.get("huge_pages"),
        "vcpus": guest.get("vcpus"),
        "memory": f"{guest['memory_mb']} MB" if guest.get("memory_mb") else None,
        "pgdata": guest.get("pgdata"),
    }
    rows = [f"  {k}: {v}" for k, v in params.items() if v is not None]
    return ["testcase: pgbench", *rows]


def machine(samples: Sequence[Sample]) -> list[str]:
    """`machine:` CPU model, cores, memory, NUMA; the target; the kernel and PostgreSQL."""
    if not samples:
        return ["machine: not recorded with this report (no samples)"]
    fp = first_fingerprint(samples)
    return [
        *para(f"machine: {cpu_line(fp)}", "", "  "),
        f"  memory: {memory_line(fp)}",
        *para(f"target: {target_of(samples)}", "  ", "  "),
        *para(f"PostgreSQL {fp.get('pg_version') or '?'}", "  ", "  "),
    ]


def build_lines(by_side: Mapping[str, Sequence[Sample]]) -> list[str]:
    """compiler, kconfig and fragments at column 0, the robot's way (the tree goes with
    the commit)."""
    return [x.removeprefix("  ") for x in build.lines(by_side, build.FIELDS[1:])]


def table(
    rows: Sequence[tuple[str, str, Sequence[float]]], ratio: means.RatioCI, of: str
) -> list[str]:
    """Each side's n, mean, CV; then the ratio `of` (e.g. B/A) with its interval."""
    out = [f"  {'':<8} {'kernel':<14} {'n':>3} {'mean tps':>10} {'stdev':>8} {'CV':>6}"]
    for name, kernel, tps in rows:
        s = means.summarize(tps) if tps else None
        figures = (
            f"{s.n:>3} {s.mean:>10.1f} {s.stdev:>8.1f} {s.cv * 100:>5.1f}%"
            if s
            else f"{0:>3} {'-':>10} {'-':>8} {'-':>6}"
        )
        out.append(f"  {name:<8} {kernel[:14]:<14} {figures}")
    out.append(
        f"  {of} {ratio.ratio:.3f}x ({(ratio.ratio - 1) * 100:+.1f}%), "
        f"{ratio.confidence * 100:.3g}% CI [{ratio.low:.3f}, {ratio.high:.3f}]"
    )
    return out


def closing() -> list[str]:
    """The trailers a fix carries, to fill in (the signature follows: SIGNATURE)."""
    return [
        "",
        *para(
            "If you fix the issue in a separate patch or commit, kindly add these "
            "trailers (fill in the <...>):"
        ),
        "",
        *TRAILERS,
    ]
