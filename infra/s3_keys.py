"""Whether an S3 key exists, asked by the documented call under a narrow
grant, for the Lambdas that read a job's lease, exit record or stop marker
(the supervisor, the job-run resource).

``ListObjectsV2`` with ``Prefix`` equal to the key needs ``s3:ListBucket`` on
the bucket (https://docs.aws.amazon.com/AmazonS3/latest/API/API_ListObjectsV2.html),
and its ``prefix`` request parameter is what the ``s3:prefix`` condition key
matches (https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazons3.html),
so a grant conditioned on ``s3:prefix`` equal to each key allows exactly these
look-ups. GetObject's 404-vs-403 on a missing key under such a grant is not
documented, so nothing here relies on it."""

from __future__ import annotations

from typing import Any

from model.storage_uri import parse_s3_uri


def key_exists(s3: Any, bucket: str, key: str) -> bool:
    """Whether ``key`` exists, by ``ListObjectsV2`` with ``Prefix=key`` (the
    call the construct's ``s3:prefix``-conditioned grant allows; see the
    module's docstring for the pages). Keys come in ascending order, so the
    key itself is the first with its own prefix."""
    reply = s3.list_objects_v2(Bucket=bucket, Prefix=key, MaxKeys=1)
    return any(item.get("Key") == key for item in reply.get("Contents", ()))


def read_if_present(s3: Any, uri: str) -> bytes | None:
    """The object's body, or None when the listing says it does not exist (or
    it was deleted between the listing and the read)."""
    bucket, key = parse_s3_uri(uri)
    if not key_exists(s3, bucket, key):
        return None
    try:
        body: bytes = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    except s3.exceptions.NoSuchKey:
        return None
    return body
