"""The model the bundle shares: no pyspark, no pyiceberg, no pyarrow."""
