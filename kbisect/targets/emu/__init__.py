"""The emulated machine: a QEMU VM that kbisect drives like a real box over ssh."""
