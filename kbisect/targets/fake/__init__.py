"""A scripted machine for tests and dry runs."""
