"""Tests of the guest harness (harness/)."""
