"""`kbisect bisect-step` and bisect/run: one `git bisect run` step, answered in git's exit
codes (kbisect/bisect/git/step.py measures and judges; ktest.py's booted step measures
the kernel ktest.pl booted).

Only 0 good, 1 bad, 125 skip or 128 abort ever come out: a usage error, any kbisect
error, an interrupt or a bug aborts the bisect (git would read 1 or 2 as "bad"), and a
step for a driver that died meanwhile gives no verdict.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from pathlib import Path
from typing import NoReturn

from kbisect.bisect import samples
from kbisect.bisect.git import ktest, liveness, step
from kbisect.commands import options
from kbisect.core import interrupt, paths, progress
from kbisect.core.exceptions import KbisectError, UserError
from kbisect.pgbuild import request


def configure(parser: argparse.ArgumentParser) -> None:
    options.add_measured(parser)
    add = parser.add_argument
    add(
        "--threshold",
        type=options.positive,
        metavar="TPS",
        help="good above it (below it with --lower-is-better); unused with references",
    )
    where = f"${samples.STORE_ENV}, else one in the results dir"
    add("--store", type=Path, help=f"sample store (default {where})")
    add(
        "--booted",
        action="store_true",
        help="measure the kernel already booted on --target (ktest.pl's TEST)",
    )
    add("--kernel", type=Path, help="with --booted: the image that was booted (verified)")
    add(
        "--reference-good",
        metavar="REV",
        help="drift-aware: sample this good revision "
        "alongside, and decide on the position between it and --reference-bad",
    )
    add("--reference-bad", metavar="REV", help="the bad reference (with --reference-good)")
    options.add_references(parser, least=1, alias="--reference-every")


def spec(args: argparse.Namespace) -> step.Step:
    """The step the options describe (UserError for references given by halves, for a
    --pg-patch without --pg-build or one that is no patch, for --pg-build with --booted)."""
    pg_patch = options.paths(args.pg_patch)
    if request.given(args.pg_build, pg_patch) is not None and args.booted:
        raise UserError("--booted measures a machine's own PostgreSQL: --pg-build runs on vng")
    return options.typed(
        step.Step,
        args,
        configs=tuple(args.config),
        sets=tuple(args.set),
        higher_is_better=not args.lower_is_better,
        policy=options.retake_policy(args),
        references=step.references(args.reference_good, args.reference_bad, args.threshold),
        reference_every=args.references,
        patches=options.paths(args.patch),
        pg_patch=pg_patch,
    )


def main(args: argparse.Namespace) -> int:
    """One step; returns git bisect's exit code, never raises."""
    try:
        paths.environment()
        s = spec(args)
        code = ktest.booted_step(s, args.kernel) if args.booted else step.step(s)
        liveness.check_driver()  # no verdict for a driver that died meanwhile
        return code
    except KbisectError as exc:
        progress.step(f"step: abort: {exc}")
        print(f"kbisect: {exc}", file=sys.stderr, flush=True)
    except KeyboardInterrupt:
        progress.step("step: interrupted; aborting the bisect")
    except Exception as exc:
        if isinstance(exc, OSError) and (full := paths.stopped(exc)) is not None:
            progress.step(f"step: abort: {full}")  # a full disk: one line, no traceback
        else:
            traceback.print_exc()
            progress.step("step: abort: unexpected error (a kbisect bug); see the traceback above")
    return step.ABORT


GIT_LOCATION = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR")


class _Parser(argparse.ArgumentParser):
    """A usage error must abort the bisect (128), not exit 2 (which git reads as bad)."""

    def error(self, message: str) -> NoReturn:
        raise UserError(f"bisect-step: {message}")


def entry(argv: list[str]) -> int:
    """bisect/run's way in: parse argv, run one step; only ever 0, 1, 125 or 128. A step
    whose output reader is gone (EPIPE: the driver died) aborts, and stays quiet."""
    interrupt.stop_on()
    # `git bisect run` in a linked worktree (kbisect's bisect slot) exports GIT_DIR: every
    # git command of the step would act on that worktree, even one run with -C elsewhere
    # (a checkout in the build slot would move the bisect's HEAD). kbisect names each
    # repository with -C; the step's own is its working directory.
    for var in GIT_LOCATION:
        os.environ.pop(var, None)
    try:
        return _entry(argv)
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        for fd in (1, 2):  # nothing left to flush at exit can fail again
            os.dup2(devnull, fd)
        return step.ABORT


def _entry(argv: list[str]) -> int:
    parser = _Parser(prog="bisect/run", description="one `git bisect run` step")
    configure(parser)
    try:
        args = parser.parse_args(argv)
    except UserError as exc:
        print(f"kbisect: {exc}", file=sys.stderr, flush=True)
        return step.ABORT
    if not step.bisecting(Path.cwd()):
        print(
            "kbisect: bisect/run: no `git bisect` in progress here; it runs under "
            "`git bisect run` (for one measurement: kbisect bisect-step)",
            file=sys.stderr,
            flush=True,
        )
        return step.ABORT
    progress.set_command(["kbisect", "bisect-step", *argv])  # what the logs say
    try:
        return main(args)
    finally:
        progress.set_command([])
