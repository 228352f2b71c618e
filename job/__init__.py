"""The PySpark streaming job shipped to EMR (and run unchanged locally)."""
