"""Conditional writes with boto3: If-None-Match: * (create only) and If-Match (replace only
that object) on PutObject and CompleteMultipartUpload, atomic with the write however many
clients race, in unversioned and versioned buckets."""
import os
from concurrent.futures import ThreadPoolExecutor

import botocore.exceptions
import pytest


def status_of(call, *args, **kwargs):
    with pytest.raises(botocore.exceptions.ClientError) as e:
        call(*args, **kwargs)
    r = e.value.response
    return r["Error"]["Code"], r["ResponseMetadata"]["HTTPStatusCode"]


@pytest.mark.parametrize("versioning", [None, "Enabled", "Suspended"])
def test_if_none_match_creates_once_among_16_racers(s3, bucket, versioning):
    if versioning:
        s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": versioning})

    def put(i):
        try:
            s3.put_object(Bucket=bucket, Key="once", Body=b"writer %d" % i, IfNoneMatch="*")
            return i
        except botocore.exceptions.ClientError as e:
            assert (e.response["Error"]["Code"], e.response["ResponseMetadata"]["HTTPStatusCode"]) == \
                ("PreconditionFailed", 412)
            return None

    with ThreadPoolExecutor(16) as pool:
        winners = [w for w in pool.map(put, range(16)) if w is not None]
    assert len(winners) == 1, winners
    assert s3.get_object(Bucket=bucket, Key="once")["Body"].read() == b"writer %d" % winners[0]
    if versioning == "Enabled":
        listed = s3.list_object_versions(Bucket=bucket)
        assert len(listed.get("Versions", [])) == 1, "refused writes leave no version"


@pytest.mark.parametrize("versioning", [None, "Enabled"])
def test_if_match_replaces_only_the_named_object(s3, bucket, versioning):
    if versioning:
        s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": versioning})
    assert status_of(s3.put_object, Bucket=bucket, Key="k", Body=b"x", IfMatch='"abc"') == ("PreconditionFailed", 412)
    first = s3.put_object(Bucket=bucket, Key="k", Body=b"one")["ETag"]
    second = s3.put_object(Bucket=bucket, Key="k", Body=b"two", IfMatch=first)["ETag"]
    assert status_of(s3.put_object, Bucket=bucket, Key="k", Body=b"three", IfMatch=first) == \
        ("PreconditionFailed", 412)
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"two"
    assert status_of(s3.put_object, Bucket=bucket, Key="k", Body=b"x", IfNoneMatch="*") == ("PreconditionFailed", 412)
    s3.put_object(Bucket=bucket, Key="k", Body=b"four", IfMatch=second)
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"four"
    # Once deleted (a delete marker in a versioned bucket), the key may be created again.
    s3.delete_object(Bucket=bucket, Key="k")
    s3.put_object(Bucket=bucket, Key="k", Body=b"again", IfNoneMatch="*")


@pytest.mark.parametrize("versioning", [None, "Enabled"])
def test_conditional_multipart_completion_keeps_a_refused_upload(s3, bucket, versioning):
    if versioning:
        s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": versioning})
    s3.put_object(Bucket=bucket, Key="mp", Body=b"there")
    upload = s3.create_multipart_upload(Bucket=bucket, Key="mp")["UploadId"]
    data = os.urandom(1 << 20)
    etag = s3.upload_part(Bucket=bucket, Key="mp", UploadId=upload, PartNumber=1, Body=data)["ETag"]
    parts = {"Parts": [{"PartNumber": 1, "ETag": etag}]}
    assert status_of(s3.complete_multipart_upload, Bucket=bucket, Key="mp", UploadId=upload,
                     MultipartUpload=parts, IfNoneMatch="*") == ("PreconditionFailed", 412)
    assert s3.get_object(Bucket=bucket, Key="mp")["Body"].read() == b"there"
    current = s3.head_object(Bucket=bucket, Key="mp")["ETag"]
    s3.complete_multipart_upload(Bucket=bucket, Key="mp", UploadId=upload, MultipartUpload=parts, IfMatch=current)
    assert s3.get_object(Bucket=bucket, Key="mp")["Body"].read() == data
