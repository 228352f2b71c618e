"""Where a path lives: ``s3://`` (also ``s3a://``/``s3n://``) or the local file system.

The lease, the stop marker and the job's start-up all accept either, so the
same configuration shape runs on EMR and on a laptop.
"""

from __future__ import annotations


def parse_s3_uri(uri: str) -> tuple[str, str]:
    """``s3://bucket/key`` -> (bucket, key); ``s3a://``/``s3n://`` accepted too."""
    scheme, sep, rest = uri.partition("://")
    bucket, _, key = rest.partition("/")
    if not sep or scheme not in ("s3", "s3a", "s3n") or not bucket:
        raise ValueError(f"{uri!r} is not an s3://bucket/key URI")
    return bucket, key


def is_s3(path: str) -> bool:
    """True for an S3 URI; anything else is a local path (``file://`` or bare)."""
    return path.split("://", 1)[0] in ("s3", "s3a", "s3n") and "://" in path


def local_path(path: str) -> str:
    """A local path with any ``file://`` prefix removed."""
    return path.removeprefix("file://")
