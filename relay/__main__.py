from relay.cli import main

raise SystemExit(main())
