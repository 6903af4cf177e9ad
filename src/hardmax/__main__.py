"""`python -m hardmax` runs the `hardmax` command."""

import sys

from hardmax.cli import main

sys.exit(main())
