"""Tests of kbisect/core/."""
