"""Tests of kbisect/report/."""
