"""Tests of kbisect/measure/."""
