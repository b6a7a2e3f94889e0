"""`python -m kbisect` and the `kbisect` command.

A Ctrl-C, SIGTERM or SIGHUP that lands while the CLI is still loading, before main()
installs its handlers, is held until the import is done and then ends the run like one
before anything started (one line, exit 130). Raised inside the import, it came out as a
traceback (a KeyboardInterrupt, or the RuntimeError a dataclass wraps it in) and exit 1.
A signal that is ignored (nohup) stays ignored.
"""

import signal
import sys
from types import FrameType

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
EXIT_INTERRUPTED = 130  # core.exceptions.EXIT_INTERRUPTED, not imported yet
held: list[int] = []


def _hold(signum: int, frame: FrameType | None) -> None:
    held.append(signum)


before = {s: signal.getsignal(s) for s in SIGNALS}
for s, handler in before.items():
    if handler is not signal.SIG_IGN:
        signal.signal(s, _hold)
from kbisect.commands.cli import leave, main  # noqa: E402

for s, handler in before.items():
    signal.signal(s, handler)
if held:
    print("kbisect: interrupted before it started; nothing was done", file=sys.stderr)
    raise SystemExit(EXIT_INTERRUPTED)


def run() -> None:
    raise SystemExit(leave(main()))


if __name__ == "__main__":
    run()
