"""``python -m app --config <path|s3://...> [--work-dir DIR]``: the local entry."""

from __future__ import annotations

import sys

from app.job import main

if __name__ == "__main__":
    sys.exit(main())
