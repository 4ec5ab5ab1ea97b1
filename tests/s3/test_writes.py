"""Writes that must be safe to retry or race, with boto3: conditional writes
(If-None-Match: * to create only, If-Match to replace only that object) on PutObject and
CompleteMultipartUpload, atomic however many clients race, in unversioned and versioned
buckets; a CompleteMultipartUpload repeated after it succeeded; and reading a multipart
object by part (partNumber, GetObjectAttributes)."""
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


def upload(s3, bucket, key, sizes):
    """A multipart upload of parts of `sizes` bytes: (upload id, part list, the data)."""
    upload_id = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    blobs = [os.urandom(n) for n in sizes]
    parts = [{"PartNumber": n, "ETag": s3.upload_part(Bucket=bucket, Key=key, UploadId=upload_id,
                                                      PartNumber=n, Body=b)["ETag"]}
             for n, b in enumerate(blobs, 1)]
    return upload_id, {"Parts": parts}, blobs


@pytest.mark.parametrize("versioning", [None, "Enabled"])
def test_a_repeated_completion_answers_as_the_first(s3, bucket, versioning):
    if versioning:
        s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": versioning})
    upload_id, parts, blobs = upload(s3, bucket, "mp", [5 << 20, 1000])
    first = s3.complete_multipart_upload(Bucket=bucket, Key="mp", UploadId=upload_id, MultipartUpload=parts)
    again = s3.complete_multipart_upload(Bucket=bucket, Key="mp", UploadId=upload_id, MultipartUpload=parts)
    assert (again["ETag"], again.get("VersionId")) == (first["ETag"], first.get("VersionId"))
    assert s3.get_object(Bucket=bucket, Key="mp")["Body"].read() == b"".join(blobs)
    if versioning:
        assert len(s3.list_object_versions(Bucket=bucket)["Versions"]) == 1, "a retry adds no version"
    other = {"Parts": parts["Parts"][:1]}
    assert status_of(s3.complete_multipart_upload, Bucket=bucket, Key="mp", UploadId=upload_id,
                     MultipartUpload=other) == ("NoSuchUpload", 404)
    assert status_of(s3.abort_multipart_upload, Bucket=bucket, Key="mp", UploadId=upload_id) == ("NoSuchUpload", 404)
    assert status_of(s3.upload_part, Bucket=bucket, Key="mp", UploadId=upload_id, PartNumber=3, Body=b"x") == \
        ("NoSuchUpload", 404)
    assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []


def upload_records(key):
    """The omap keys of every bucket's upload object that name `key`."""
    import subprocess
    rados = [os.environ["SHOAL_BIN"], "rados", "-c", os.environ["SHOAL_CONF"], "-p", ".rgw.meta", "-N", "uploads"]
    found = []
    for obj in subprocess.run(rados + ["ls"], capture_output=True, check=True).stdout.split():
        keys = subprocess.run(rados + ["listomapkeys", obj], capture_output=True, check=True).stdout
        found += [k for k in keys.split(b"\n") if key.encode() in k]
    return found


def test_completed_upload_records_expire(s3, bucket):
    """A completed upload's record answers retries for rgw_multipart_completion_keep
    (3 s in the suite) and is removed after it."""
    import time
    import uuid
    key = "mp-" + uuid.uuid4().hex
    upload_id, parts, _ = upload(s3, bucket, key, [1000])
    s3.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id, MultipartUpload=parts)
    assert len(upload_records(key)) >= 1, "kept to answer retries"
    time.sleep(4)
    # Completions go on elsewhere; the record of this one is gone.
    upload_id, parts, _ = upload(s3, bucket, "other", [1000])
    s3.complete_multipart_upload(Bucket=bucket, Key="other", UploadId=upload_id, MultipartUpload=parts)
    deadline = time.time() + 10
    while upload_records(key) and time.time() < deadline:
        time.sleep(0.5)
    assert upload_records(key) == []


def test_parts_of_a_multipart_object_read_by_number(s3, bucket):
    sizes = [5 << 20, 5 << 20, 1024]
    upload_id, parts, blobs = upload(s3, bucket, "mp", sizes)
    s3.complete_multipart_upload(Bucket=bucket, Key="mp", UploadId=upload_id, MultipartUpload=parts)
    second = s3.get_object(Bucket=bucket, Key="mp", PartNumber=2)
    assert second["Body"].read() == blobs[1]
    assert second["PartsCount"] == 3 and second["ResponseMetadata"]["HTTPStatusCode"] == 206
    assert second["ContentRange"] == "bytes %d-%d/%d" % (sizes[0], sizes[0] + sizes[1] - 1, sum(sizes))
    head = s3.head_object(Bucket=bucket, Key="mp", PartNumber=3)
    assert (head["ContentLength"], head["PartsCount"]) == (1024, 3)
    assert status_of(s3.get_object, Bucket=bucket, Key="mp", PartNumber=4) == ("InvalidPartNumber", 416)
    s3.put_object(Bucket=bucket, Key="plain", Body=b"whole")
    assert s3.get_object(Bucket=bucket, Key="plain", PartNumber=1)["Body"].read() == b"whole"

    attrs = s3.get_object_attributes(Bucket=bucket, Key="mp", MaxParts=2,
                                     ObjectAttributes=["ETag", "ObjectSize", "StorageClass", "ObjectParts"])
    assert attrs["ObjectSize"] == sum(sizes) and attrs["StorageClass"] == "STANDARD"
    assert attrs["ETag"].strip('"') == s3.head_object(Bucket=bucket, Key="mp")["ETag"].strip('"')
    object_parts = attrs["ObjectParts"]
    assert object_parts["TotalPartsCount"] == 3 and object_parts["IsTruncated"] is True
    assert [(p["PartNumber"], p["Size"]) for p in object_parts["Parts"]] == [(1, sizes[0]), (2, sizes[1])]
    rest = s3.get_object_attributes(Bucket=bucket, Key="mp", PartNumberMarker=2, ObjectAttributes=["ObjectParts"])
    assert [(p["PartNumber"], p["Size"]) for p in rest["ObjectParts"]["Parts"]] == [(3, 1024)]
    plain = s3.get_object_attributes(Bucket=bucket, Key="plain", ObjectAttributes=["ObjectSize", "ObjectParts"])
    assert plain["ObjectSize"] == 5 and "ObjectParts" not in plain
