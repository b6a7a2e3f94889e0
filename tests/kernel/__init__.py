"""Tests of kbisect/kernel/."""
