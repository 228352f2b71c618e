"""An S3 client as a Lambda role with only an ``s3:prefix``-conditioned
ListBucket grant sees it (tests of infra/s3_keys.py's callers)."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError


class ListOnlyS3:
    """The S3 client as the supervisor's role sees it when GetObject of a
    missing key answers 403 (the implicit ListBucket check not granted):
    every call passes through, a GetObject of a missing key is AccessDenied.
    Records the prefixes listed."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.listed: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def list_objects_v2(self, **kw: Any) -> Any:
        self.listed.append(kw["Prefix"])
        return self._client.list_objects_v2(**kw)

    def get_object(self, **kw: Any) -> Any:
        try:
            return self._client.get_object(**kw)
        except self._client.exceptions.NoSuchKey:
            raise ClientError(
                {"Error": {"Code": "AccessDenied", "Message": "Access Denied"}}, "GetObject"
            ) from None
