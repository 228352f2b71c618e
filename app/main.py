"""``spark-submit --py-files app.zip app/main.py --config s3://...`` on EMR.

The same :func:`app.job.main` as ``python -m app``; the ``app`` package comes
from the zip passed with ``--py-files``. spark-submit runs this file as a
script, so ``app/`` itself is first on ``sys.path``; it is removed so that a
module here (``app/config.py``...) is never imported as a top-level module.
"""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
sys.path[:] = [p for p in sys.path if str(Path(p or ".").resolve()) != _HERE]

from app.job import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
