from kvconform.cli import main

raise SystemExit(main())
