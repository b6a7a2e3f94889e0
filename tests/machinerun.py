"""`python -m tests.machinerun TARGET IMAGE OUT_DIR [APPEND]`: take samples on a target
until interrupted, as a command would (the target is a context manager: Ctrl-C brings a
machine back to its known-good kernel). For the e2e tests' Ctrl-C check."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

from kbisect.core.exceptions import KbisectError
from kbisect.measure import sample
from kbisect.scenario import scenario
from kbisect.targets import registry
from kbisect.targets.base import Kernel


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.default_int_handler)  # also when started in background
    name, image, out = argv[0], Kernel.find(argv[1]), Path(argv[2])
    append = argv[3] if len(argv) > 3 else ""
    scen = scenario.load("smoke")
    try:
        with registry.get(name) as target:
            target.preflight()
            while True:
                try:
                    sample.take(target, sample.Boot(image, scen, out, append, "A"))
                except KbisectError as exc:
                    print(f"sample failed: {exc}", file=sys.stderr, flush=True)
    except KeyboardInterrupt:
        print("interrupted; machine restored", file=sys.stderr, flush=True)
        return 130


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
