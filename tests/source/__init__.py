"""Tests of kbisect/source/."""
