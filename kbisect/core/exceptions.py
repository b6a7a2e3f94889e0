"""Two exception roots: the user's mistake, or the infrastructure's.

Each subclass is one line of message. `cli.main()` maps the roots to exit codes;
nothing else in kbisect decides an exit code for an error.
"""

# Exit codes, documented in docs/exit-codes.md.
EXIT_OK = 0
EXIT_NEGATIVE = 1  # the command worked and its answer is "no" (doctor FAIL, regression found)
EXIT_USER = 2
EXIT_INFRA = 3
EXIT_BUILD = 4
EXIT_BOOT = 5
EXIT_BENCHMARK = 6
EXIT_INTERRUPTED = 130


class KbisectError(Exception):
    """Base of every error kbisect raises on purpose."""

    exit_code = EXIT_INFRA


class UserError(KbisectError):
    """Bad input: wrong option, unknown name, unreadable path. Exit 2."""

    exit_code = EXIT_USER


class InfraError(KbisectError):
    """Something around the user's input failed: a tool, a build, a boot. Exit 3 or more."""

    exit_code = EXIT_INFRA


class MissingTool(UserError):
    """A program kbisect needs is not installed (run scripts/setup)."""


class CommandFailed(InfraError):
    """An external command exited non-zero."""


class CommandTimeout(InfraError):
    """An external command ran too long, or printed nothing for too long."""


class BuildError(InfraError):
    """The kernel did not build (a commit's fault or the toolchain's; bisect skips it)."""

    exit_code = EXIT_BUILD


class BootError(InfraError):
    """The guest did not boot, panicked, hung, or never reached the harness."""

    exit_code = EXIT_BOOT


class BenchmarkError(InfraError):
    """The guest booted but the benchmark (PostgreSQL, pgbench, harness) failed."""

    exit_code = EXIT_BENCHMARK
