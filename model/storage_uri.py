"""Where a path lives: ``s3://`` (also ``s3a://``/``s3n://``) or the local file system.

The lease, the stop marker and the job's start-up all accept either, so the
same configuration shape runs on EMR and on a laptop; :func:`read_object` and
:func:`write_object` read and write a small object at either, and
:func:`read_object_if_present` reads one that may not be there yet.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from botocore.exceptions import ClientError

# The error codes S3 answers a missing object with: GetObject's NoSuchKey, and
# 404/NotFound from a HEAD (which has no body to name the error)
# (https://docs.aws.amazon.com/AmazonS3/latest/API/ErrorResponses.html).
MISSING_CODES: Final = ("NoSuchKey", "404", "NotFound")


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


def read_object(path: str, s3_client: Any = None) -> bytes:
    """The bytes at ``path``: an S3 object (read with ``s3_client``) or a local
    file. A missing one raises as its store does (botocore's ``ClientError``,
    ``FileNotFoundError``)."""
    if is_s3(path):
        bucket, key = parse_s3_uri(path)
        return bytes(s3_client.get_object(Bucket=bucket, Key=key)["Body"].read())
    return Path(local_path(path)).read_bytes()


def is_missing(exc: ClientError) -> bool:
    """Whether an S3 error says there is no such object (:data:`MISSING_CODES`):
    the one test every reader of an object that may not exist yet uses."""
    return exc.response.get("Error", {}).get("Code") in MISSING_CODES


def read_object_if_present(path: str, s3_client: Any = None) -> bytes | None:
    """:func:`read_object`, or None when there is no object at ``path`` (a
    missing file, or an S3 error :func:`is_missing` names); any other error
    raises."""
    try:
        return read_object(path, s3_client)
    except FileNotFoundError:
        return None
    except ClientError as exc:
        if is_missing(exc):
            return None
        raise


def write_object(path: str, body: bytes, s3_client: Any = None) -> None:
    """``body`` at ``path``: an S3 put (with ``s3_client``), or a local file
    replaced whole (written beside it, then renamed: a reader never sees half
    of it), its directory made if needed."""
    if is_s3(path):
        bucket, key = parse_s3_uri(path)
        s3_client.put_object(Bucket=bucket, Key=key, Body=body)
        return
    target = Path(local_path(path))
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(target.name + ".tmp")
    temporary.write_bytes(body)
    temporary.replace(target)
