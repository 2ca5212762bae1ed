"""`python -m eventcloud` is the `eventcloud` command."""

import sys

try:
    from eventcloud.cli.main import main

    code = main()
except KeyboardInterrupt:
    # Ctrl-C before the command took over (Python still importing it: over a second on a busy
    # machine) or as it ended: one line and the shell's code for it, never a traceback
    print("eventcloud: interrupted", file=sys.stderr)
    code = 130
sys.exit(code)
