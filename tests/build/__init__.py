"""Tests of kbisect/build/."""
