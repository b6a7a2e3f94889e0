"""Tests of kbisect/bisect/."""
