from kbisect.commands.cli import leave, main

raise SystemExit(leave(main()))
