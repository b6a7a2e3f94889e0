"""Tests of kbisect/compare/."""
