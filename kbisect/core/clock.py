"""The one timestamp format kbisect writes: UTC, to the second, ISO 8601 with a Z."""

from __future__ import annotations

import datetime as dt

FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def utc_now() -> str:
    """`2026-11-22T04:00:00Z`: every `created`, `checked`, `recorded` field."""
    return dt.datetime.now(dt.UTC).strftime(FORMAT)


def stamp() -> str:
    """`20261122T040000Z`: the same instant, for a directory name."""
    return dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
