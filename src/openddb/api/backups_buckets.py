"""Where a bucket is: exports and imports take S3Bucket as a local directory. `file:///abs/dir` or an absolute path
is taken as it is (the SDKs do not check the bucket pattern), a bucket name as the directory of that name under
$OPENDDB_EXPORT_ROOT (default ./openddb-exports of the server's working directory); an object's key is its path
under it, `/` between the parts."""

from __future__ import annotations

import os

ROOT_VARIABLE = "OPENDDB_EXPORT_ROOT"


def bucket_directory(bucket: str) -> str:
    """The local directory an S3Bucket stands for."""
    if bucket.startswith("file://"):
        return bucket[len("file://"):]
    if os.path.isabs(bucket):
        return bucket
    return os.path.join(os.environ.get(ROOT_VARIABLE) or "openddb-exports", bucket)
