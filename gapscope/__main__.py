from gapscope.cli import main

raise SystemExit(main())
