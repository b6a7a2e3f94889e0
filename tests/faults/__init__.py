"""The fault-injection suite (`just faults`) and its machinery."""
