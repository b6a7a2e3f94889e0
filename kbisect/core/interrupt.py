"""SIGTERM and SIGHUP stop a run like Ctrl-C (a KeyboardInterrupt), so that what was
finished is saved and the command that continues the run is said; but a signal that was
ignored when kbisect started (nohup, `trap '' HUP`) stays ignored, as its caller asked."""

from __future__ import annotations

import signal
from types import FrameType

STOPS = (signal.SIGTERM, signal.SIGHUP)


def _stop(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def stop_on() -> None:
    """STOPS raise KeyboardInterrupt from now on, except an ignored one."""
    for sig in STOPS:
        if signal.getsignal(sig) is not signal.SIG_IGN:
            signal.signal(sig, _stop)
