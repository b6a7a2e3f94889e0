"""Tests of kbisect/scenario/."""
