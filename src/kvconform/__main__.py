from kvconform.conformance.cli import main

raise SystemExit(main())
