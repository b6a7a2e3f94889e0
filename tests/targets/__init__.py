"""Tests of kbisect/targets/."""
