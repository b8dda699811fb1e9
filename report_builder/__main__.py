"""`python -m report_builder` runs the CLI."""
from report_builder.cli import main

raise SystemExit(main())
