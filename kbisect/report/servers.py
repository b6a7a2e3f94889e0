"""Which PostgreSQL each group of samples really ran: the guest root (image, suite, Debian
version) and the build (key, source, commits, patches), with the sha256 of the server
binary the guest hashed. Shown when samples carry it (samples from before servers were
pinned per scenario carry no `userland`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kbisect.measure.record import Sample
from kbisect.report.text import para


def describe(s: Sample, quote: str = "`") -> str:
    """The server one sample ran, in one line; `quote` marks keys and hashes as code
    (Markdown) or, "", not at all (the text report)."""
    u, fp = s.userland, s.fingerprint
    build = u.get("build")
    if build:
        patches = "; ".join(f"{p['file']} ({p['subject']})" for p in build.get("patches") or [])
        key = f"{quote}{build['key']}{quote}"
        what = f"build {key}: PostgreSQL {build.get('version')} from {build.get('source')}"
        what += f" ({str(build.get('commit'))[:12]})" + (f" + {patches}" if patches else "")
    elif u.get("source") == "image":
        what = f"PostgreSQL {u.get('postgres_debian_version')} ({u.get('suite')} root)"
    else:
        what = f"the host's PostgreSQL {fp.get('pg_version') or u.get('postgres_major')}"
    binary = fp.get("pg_binary_sha256")
    return what + (f"; binary sha256 {quote}{binary[:12]}{quote}" if binary else "")


def rows(grouped: Sequence[tuple[str, Sample]]) -> list[str]:
    """`- GROUP: server` per group, from (group, sample) pairs in order, distinct servers
    joined; [] when no sample says."""
    seen: dict[str, list[str]] = {}
    for group, s in grouped:
        if s.ok and s.userland:
            servers = seen.setdefault(group, [])
            if (server := describe(s)) not in servers:
                servers.append(server)
    return [f"- {g}: {' / '.join(v)}" for g, v in seen.items()]


def text_lines(by_side: Mapping[str, Sequence[Sample]]) -> list[str]:
    """The text report's `  A: build ...` per side (each side's first counted sample),
    or [] when no side ran a build (a packaged server is named in the machine section)."""
    firsts = {
        side: next((x for x in samples if x.ok), samples[0])
        for side, samples in by_side.items()
        if samples
    }
    if not any(x.userland.get("build") for x in firsts.values()):
        return []
    return [
        line
        for side, x in firsts.items()
        for line in para(f"{side}: {describe(x, quote='')}", "  ", "    ")
    ]
