"""``python -m job --config <path|s3://...> [--work-dir DIR]``: the local entry."""

from __future__ import annotations

import sys

from job.driver import main

if __name__ == "__main__":
    sys.exit(main())
