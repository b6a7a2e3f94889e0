"""Kernels built from Kconfig fragments into cached artifacts."""
