"""Tests of kbisect/study/."""
