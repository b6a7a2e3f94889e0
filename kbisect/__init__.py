"""kbisect: build, boot, measure, compare and bisect kernels for PostgreSQL performance."""

__version__ = "0.1.0"
