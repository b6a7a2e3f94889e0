"""Tests of kbisect/doctor/."""
