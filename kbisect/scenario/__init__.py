"""Pinned benchmark scenarios: the files, their fields and checks, and where PGDATA lives."""
