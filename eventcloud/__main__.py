"""`python -m eventcloud` is the `eventcloud` command."""

import sys

from eventcloud.cli import main

sys.exit(main())
