"""Tests of kbisect/stats/."""
