"""Tests of the GitHub workflows and workflows/."""
