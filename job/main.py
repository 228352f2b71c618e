"""``spark-submit --py-files app.zip job/main.py --config s3://...`` on EMR.

The same :func:`job.driver.main` as ``python -m job``; the ``job`` and ``model``
packages come from the zip passed with ``--py-files``. spark-submit runs this
file as a script, so ``job/`` itself is first on ``sys.path``; it is removed so
that a module here (``job/transform.py``...) is never imported as a top-level
module.
"""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
sys.path[:] = [p for p in sys.path if str(Path(p or ".").resolve()) != _HERE]

from job.driver import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
