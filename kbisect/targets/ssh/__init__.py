"""A real machine over ssh: kexec switches, verified, power-cycled, restored."""
