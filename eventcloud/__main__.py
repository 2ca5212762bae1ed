"""`python -m eventcloud` is the `eventcloud` command."""

import sys

from eventcloud.cli.main import main

sys.exit(main())
