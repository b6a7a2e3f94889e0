"""Tests of kbisect/simulate/."""
