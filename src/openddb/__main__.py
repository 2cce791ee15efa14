"""`python -m openddb` runs the command line."""

from openddb.cli import main

raise SystemExit(main())
