from kbisect.cli import main

raise SystemExit(main())
