from kbisect.cli import leave, main

raise SystemExit(leave(main()))
