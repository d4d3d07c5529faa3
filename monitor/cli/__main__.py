"""``python -m monitor.cli``: the same as the ``vfr-monitor`` console script."""

import sys

from monitor.cli import main

if __name__ == "__main__":
    sys.exit(main())
