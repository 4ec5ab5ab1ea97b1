"""Object lock with boto3: bucket configuration and default retention, retention in
governance and compliance mode, bypass, legal holds, lock headers on PUT, copy and
multipart, and the errors AWS gives."""
import datetime
import time
import uuid

import botocore.exceptions
import pytest

from conftest import client, purge


def error(call, *args, **kwargs):
    with pytest.raises(botocore.exceptions.ClientError) as e:
        call(*args, **kwargs)
    r = e.value.response
    return r["Error"]["Code"], r["ResponseMetadata"]["HTTPStatusCode"]


def soon(seconds):
    return datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=seconds)


@pytest.fixture
def locked(s3):
    name = "lock-" + uuid.uuid4().hex[:12]
    s3.create_bucket(Bucket=name, ObjectLockEnabledForBucket=True)
    yield name
    purge(s3, name)


def test_configuration_and_its_errors(s3, bucket, locked):
    assert s3.get_bucket_versioning(Bucket=locked)["Status"] == "Enabled", "object lock turns versioning on"
    config = s3.get_object_lock_configuration(Bucket=locked)["ObjectLockConfiguration"]
    assert config == {"ObjectLockEnabled": "Enabled"}
    rule = {"DefaultRetention": {"Mode": "GOVERNANCE", "Days": 1}}
    s3.put_object_lock_configuration(Bucket=locked,
                                     ObjectLockConfiguration={"ObjectLockEnabled": "Enabled", "Rule": rule})
    assert s3.get_object_lock_configuration(Bucket=locked)["ObjectLockConfiguration"]["Rule"] == rule
    both = {"DefaultRetention": {"Mode": "GOVERNANCE", "Days": 1, "Years": 1}}
    assert error(s3.put_object_lock_configuration, Bucket=locked,
                 ObjectLockConfiguration={"ObjectLockEnabled": "Enabled", "Rule": both})[0] == "MalformedXML"
    assert error(s3.put_bucket_versioning, Bucket=locked, VersioningConfiguration={"Status": "Suspended"}) == \
        ("InvalidBucketState", 409)
    assert error(s3.get_object_lock_configuration, Bucket=bucket) == ("ObjectLockConfigurationNotFoundError", 404)
    assert error(s3.put_object_lock_configuration, Bucket=bucket,
                 ObjectLockConfiguration={"ObjectLockEnabled": "Enabled"}) == ("InvalidBucketState", 409)
    assert error(s3.put_object, Bucket=bucket, Key="k", Body=b"x", ObjectLockMode="GOVERNANCE",
                 ObjectLockRetainUntilDate=soon(60)) == ("InvalidRequest", 400)
    assert error(s3.put_object, Bucket=locked, Key="k", Body=b"x", ObjectLockMode="GOVERNANCE",
                 ObjectLockRetainUntilDate=soon(-60)) == ("InvalidArgument", 400)
    assert error(s3.get_object_retention, Bucket=bucket, Key="nothing")[0] in ("NoSuchKey", "InvalidRequest")
    # A versioned bucket may turn object lock on later.
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    s3.put_object_lock_configuration(Bucket=bucket, ObjectLockConfiguration={"ObjectLockEnabled": "Enabled"})
    assert s3.get_object_lock_configuration(Bucket=bucket)["ObjectLockConfiguration"]["ObjectLockEnabled"] == "Enabled"


def test_compliance_holds_for_everyone_and_only_extends(s3, locked):
    until = soon(4)
    vid = s3.put_object(Bucket=locked, Key="k", Body=b"x", ObjectLockMode="COMPLIANCE",
                        ObjectLockRetainUntilDate=until)["VersionId"]
    head = s3.head_object(Bucket=locked, Key="k")
    assert head["ObjectLockMode"] == "COMPLIANCE"
    assert abs((head["ObjectLockRetainUntilDate"] - until).total_seconds()) < 1
    assert error(s3.delete_object, Bucket=locked, Key="k", VersionId=vid, BypassGovernanceRetention=True) == \
        ("AccessDenied", 403)
    assert error(s3.put_object_retention, Bucket=locked, Key="k", VersionId=vid, BypassGovernanceRetention=True,
                 Retention={"Mode": "COMPLIANCE", "RetainUntilDate": soon(2)}) == ("AccessDenied", 403)
    assert error(s3.put_object_retention, Bucket=locked, Key="k", VersionId=vid, BypassGovernanceRetention=True,
                 Retention={"Mode": "GOVERNANCE", "RetainUntilDate": soon(60)}) == ("AccessDenied", 403)
    later = soon(6)
    s3.put_object_retention(Bucket=locked, Key="k", VersionId=vid,
                            Retention={"Mode": "COMPLIANCE", "RetainUntilDate": later})
    got = s3.get_object_retention(Bucket=locked, Key="k", VersionId=vid)["Retention"]
    assert got["Mode"] == "COMPLIANCE" and abs((got["RetainUntilDate"] - later).total_seconds()) < 1
    # A delete marker is no removal: it is allowed, and the version stays.
    assert s3.delete_object(Bucket=locked, Key="k")["DeleteMarker"] is True
    assert s3.get_object(Bucket=locked, Key="k", VersionId=vid)["Body"].read() == b"x"
    out = s3.delete_objects(Bucket=locked, Delete={"Objects": [{"Key": "k", "VersionId": vid}]})
    assert [(e["Key"], e["Code"]) for e in out["Errors"]] == [("k", "AccessDenied")]
    # Once the date has passed, the version goes like any other.
    while datetime.datetime.now(datetime.timezone.utc) < later:
        time.sleep(0.2)
    s3.delete_object(Bucket=locked, Key="k", VersionId=vid)
    assert error(s3.head_object, Bucket=locked, Key="k", VersionId=vid)[1] == 404


def test_governance_yields_to_the_owner_with_bypass(s3, locked, user):
    s3.put_object_lock_configuration(Bucket=locked, ObjectLockConfiguration={
        "ObjectLockEnabled": "Enabled", "Rule": {"DefaultRetention": {"Mode": "GOVERNANCE", "Days": 1}}})
    vid = s3.put_object(Bucket=locked, Key="k", Body=b"x")["VersionId"]
    retention = s3.get_object_retention(Bucket=locked, Key="k", VersionId=vid)["Retention"]
    assert retention["Mode"] == "GOVERNANCE", "the default retention applies"
    assert retention["RetainUntilDate"] > soon(86_000)
    assert error(s3.delete_object, Bucket=locked, Key="k", VersionId=vid) == ("AccessDenied", 403)
    assert error(s3.put_object_retention, Bucket=locked, Key="k", VersionId=vid,
                 Retention={"Mode": "GOVERNANCE", "RetainUntilDate": soon(60)}) == ("AccessDenied", 403)
    # Another user, even allowed to write the bucket, may not bypass.
    s3.put_bucket_acl(Bucket=locked, ACL="public-read-write")
    _, access, secret = user
    other = client(access_key=access, secret_key=secret)
    assert error(other.delete_object, Bucket=locked, Key="k", VersionId=vid, BypassGovernanceRetention=True) == \
        ("AccessDenied", 403)
    s3.put_object_retention(Bucket=locked, Key="k", VersionId=vid, BypassGovernanceRetention=True,
                            Retention={"Mode": "GOVERNANCE", "RetainUntilDate": soon(60)})
    s3.delete_object(Bucket=locked, Key="k", VersionId=vid, BypassGovernanceRetention=True)
    assert error(s3.get_object, Bucket=locked, Key="k", VersionId=vid)[0] == "NoSuchVersion"


def test_legal_hold_outlasts_any_retention(s3, locked):
    vid = s3.put_object(Bucket=locked, Key="k", Body=b"x", ObjectLockLegalHoldStatus="ON")["VersionId"]
    assert s3.get_object_legal_hold(Bucket=locked, Key="k")["LegalHold"]["Status"] == "ON"
    assert s3.head_object(Bucket=locked, Key="k")["ObjectLockLegalHoldStatus"] == "ON"
    assert error(s3.delete_object, Bucket=locked, Key="k", VersionId=vid, BypassGovernanceRetention=True) == \
        ("AccessDenied", 403)
    s3.put_object_legal_hold(Bucket=locked, Key="k", VersionId=vid, LegalHold={"Status": "OFF"})
    assert s3.get_object_legal_hold(Bucket=locked, Key="k", VersionId=vid)["LegalHold"]["Status"] == "OFF"
    assert error(s3.get_object_retention, Bucket=locked, Key="k") == ("NoSuchObjectLockConfiguration", 404)
    s3.delete_object(Bucket=locked, Key="k", VersionId=vid)


def test_copy_and_multipart_take_lock_headers(s3, locked):
    s3.put_object(Bucket=locked, Key="src", Body=b"x")
    copy = s3.copy_object(Bucket=locked, Key="copy", CopySource={"Bucket": locked, "Key": "src"},
                          ObjectLockLegalHoldStatus="ON")
    assert s3.get_object_legal_hold(Bucket=locked, Key="copy")["LegalHold"]["Status"] == "ON"
    s3.put_object_legal_hold(Bucket=locked, Key="copy", VersionId=copy["VersionId"], LegalHold={"Status": "OFF"})
    upload = s3.create_multipart_upload(Bucket=locked, Key="mp", ObjectLockMode="GOVERNANCE",
                                        ObjectLockRetainUntilDate=soon(3600))["UploadId"]
    etag = s3.upload_part(Bucket=locked, Key="mp", UploadId=upload, PartNumber=1, Body=b"p")["ETag"]
    s3.complete_multipart_upload(Bucket=locked, Key="mp", UploadId=upload,
                                 MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag}]})
    assert s3.head_object(Bucket=locked, Key="mp")["ObjectLockMode"] == "GOVERNANCE"
