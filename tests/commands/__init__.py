"""Tests of kbisect/commands/."""
