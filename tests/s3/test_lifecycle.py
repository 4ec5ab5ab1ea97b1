"""Bucket lifecycle with boto3 and `shoal admin lc`: configurations and their errors,
expiration of current and noncurrent versions, expired delete markers, incomplete
uploads, object lock respected. The gateways run with rgw_lc_debug_interval=2: a
lifecycle day lasts two seconds and passes run every two seconds."""
import time
import uuid

import botocore.exceptions
import pytest

from conftest import admin, purge

DAY = 2.0


def error(call, *args, **kwargs):
    with pytest.raises(botocore.exceptions.ClientError) as e:
        call(*args, **kwargs)
    r = e.value.response
    return r["Error"]["Code"], r["ResponseMetadata"]["HTTPStatusCode"]


def head_status(s3, bucket, key):
    try:
        s3.head_object(Bucket=bucket, Key=key)
        return 200
    except botocore.exceptions.ClientError as e:
        return e.response["ResponseMetadata"]["HTTPStatusCode"]


def configure(s3, bucket, *rules):
    s3.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration={"Rules": list(rules)})


def until(condition, timeout=60):
    """Waits for `condition()` to hold (lifecycle passes run in the background), then returns its value."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.3)
    raise AssertionError("condition not met in %ss" % timeout)


def version_ids(s3, bucket, key):
    listed = s3.list_object_versions(Bucket=bucket, Prefix=key)
    return [(v["VersionId"], False) for v in listed.get("Versions", []) if v["Key"] == key] + \
           [(m["VersionId"], True) for m in listed.get("DeleteMarkers", []) if m["Key"] == key]


def test_configurations_read_back_and_bad_ones_are_refused(s3, bucket):
    assert error(s3.get_bucket_lifecycle_configuration, Bucket=bucket) == ("NoSuchLifecycleConfiguration", 404)
    rules = [
        {"ID": "logs", "Status": "Enabled", "Expiration": {"Days": 30},
         "Filter": {"And": {"Prefix": "logs/", "Tags": [{"Key": "tier", "Value": "cold"}],
                            "ObjectSizeGreaterThan": 100}}},
        {"ID": "old", "Status": "Disabled", "Filter": {"Prefix": ""},
         "NoncurrentVersionExpiration": {"NoncurrentDays": 7, "NewerNoncurrentVersions": 3},
         "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 2}},
    ]
    configure(s3, bucket, *rules)
    got = s3.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"]
    assert [r["ID"] for r in got] == ["logs", "old"]
    assert got[0]["Filter"]["And"]["Tags"] == [{"Key": "tier", "Value": "cold"}]
    assert got[1]["NoncurrentVersionExpiration"] == {"NoncurrentDays": 7, "NewerNoncurrentVersions": 3}
    assert bucket in admin("lc", "list")
    for bad, code in [
        ({"ID": "a", "Status": "Enabled", "Filter": {}, "Expiration": {"Days": 0}}, "InvalidArgument"),
        ({"ID": "a", "Status": "Enabled", "Filter": {}, "Expiration": {"Days": 1, "ExpiredObjectDeleteMarker": True}},
         "MalformedXML"),
        ({"ID": "a", "Status": "Enabled", "Filter": {}}, "MalformedXML"),
    ]:
        assert error(configure, s3, bucket, bad)[0] == code, bad
    s3.delete_bucket_lifecycle(Bucket=bucket)
    assert error(s3.get_bucket_lifecycle_configuration, Bucket=bucket)[0] == "NoSuchLifecycleConfiguration"
    assert bucket not in admin("lc", "list")


def test_versions_expire_current_then_noncurrent_then_the_lone_marker(s3, bucket):
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    configure(s3, bucket, {"ID": "logs", "Status": "Enabled", "Filter": {"Prefix": "logs/"},
                           "Expiration": {"Days": 1}, "NoncurrentVersionExpiration": {"NoncurrentDays": 1}})
    first = s3.put_object(Bucket=bucket, Key="logs/a", Body=b"1")["VersionId"]
    s3.put_object(Bucket=bucket, Key="logs/a", Body=b"2")
    s3.put_object(Bucket=bucket, Key="keep/b", Body=b"b")
    # Within a day nothing goes, however often passes run.
    admin("lc", "process", "--bucket", bucket)
    assert len(version_ids(s3, bucket, "logs/a")) == 2
    # The current version is hidden by a delete marker, then the older ones go, then the marker.
    until(lambda: head_status(s3, bucket, "logs/a") == 404)
    until(lambda: first not in [v for v, _ in version_ids(s3, bucket, "logs/a")])
    until(lambda: version_ids(s3, bucket, "logs/a") == [])
    assert s3.get_object(Bucket=bucket, Key="keep/b")["Body"].read() == b"b", "outside the prefix"
    status = admin("lc", "list")[bucket]
    assert status["state"] in ("COMPLETE", "PROCESSING") and status["finished_ns"] > 0


def test_unversioned_objects_and_incomplete_uploads_expire(s3, bucket):
    configure(s3, bucket, {"ID": "all", "Status": "Enabled", "Filter": {"Prefix": ""}, "Expiration": {"Days": 1},
                           "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1}},
              {"ID": "tagged", "Status": "Enabled", "Filter": {"Tag": {"Key": "t", "Value": "x"}},
               "Expiration": {"Days": 1}})
    s3.put_object(Bucket=bucket, Key="gone", Body=b"x")
    upload = s3.create_multipart_upload(Bucket=bucket, Key="partial")["UploadId"]
    until(lambda: s3.list_objects_v2(Bucket=bucket)["KeyCount"] == 0)
    until(lambda: upload not in [u["UploadId"] for u in s3.list_multipart_uploads(Bucket=bucket).get("Uploads", [])])
    assert head_status(s3, bucket, "gone") == 404


def test_tag_filters_and_object_lock_are_respected(s3):
    name = "lc-lock-" + uuid.uuid4().hex[:10]
    s3.create_bucket(Bucket=name, ObjectLockEnabledForBucket=True)
    try:
        configure(s3, name, {"ID": "tagged", "Status": "Enabled", "Filter": {"Tag": {"Key": "t", "Value": "x"}},
                             "Expiration": {"Days": 1}, "NoncurrentVersionExpiration": {"NoncurrentDays": 1}})
        held = s3.put_object(Bucket=name, Key="held", Body=b"h", Tagging="t=x", ObjectLockLegalHoldStatus="ON")
        s3.put_object(Bucket=name, Key="untagged", Body=b"u")
        s3.put_object(Bucket=name, Key="held", Body=b"newer", Tagging="t=x")
        # The held version turns noncurrent and due, but stays; the untagged object is not touched.
        until(lambda: admin("lc", "list")[name]["skipped_locked"] > 0, timeout=30)
        assert s3.get_object(Bucket=name, Key="held", VersionId=held["VersionId"])["Body"].read() == b"h"
        assert s3.get_object(Bucket=name, Key="untagged")["Body"].read() == b"u"
        s3.put_object_legal_hold(Bucket=name, Key="held", VersionId=held["VersionId"], LegalHold={"Status": "OFF"})
        until(lambda: held["VersionId"] not in [v for v, _ in version_ids(s3, name, "held")])
    finally:
        s3.delete_bucket_lifecycle(Bucket=name)
        purge(s3, name)
