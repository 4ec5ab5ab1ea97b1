"""Two gateways of one cluster (SHOAL_S3_ENDPOINT2 is the second): metadata caches stay coherent
(watch/notify invalidation)."""
import os
import time

import botocore
import pytest
import requests

from conftest import admin, client

# Run only where a second gateway exists (crates/shoal/tests/s3.rs passes this file to the
# vstart run, not to the shoal server run); SHOAL_S3_ENDPOINT2 missing is an error.


def eventually(check, seconds=5.0):
    deadline = time.time() + seconds
    while not check():
        assert time.time() < deadline, "not seen in time"
        time.sleep(0.05)


def test_user_suspension_reaches_the_other_gateway(user):
    uid, access, secret = user
    one = client(access_key=access, secret_key=secret)
    two = client(os.environ["SHOAL_S3_ENDPOINT2"], access, secret)
    one.list_buckets()
    two.list_buckets()  # both gateways now cache the user
    admin("user", "suspend", "--uid", uid)
    for gw in (one, two):
        with pytest.raises(botocore.exceptions.ClientError) as e:
            gw.list_buckets()
        assert e.value.response["Error"]["Code"] == "AccessDenied"
    admin("user", "enable", "--uid", uid)
    two.list_buckets()


def test_bucket_acl_change_reaches_the_other_gateway(s3, bucket):
    s3.put_object(Bucket=bucket, Key="o", Body=b"x", ACL="public-read")
    second = os.environ["SHOAL_S3_ENDPOINT2"]
    assert requests.get(f"{second}/{bucket}").status_code == 403  # cached as private there
    s3.put_bucket_acl(Bucket=bucket, ACL="public-read")  # through the first gateway
    eventually(lambda: requests.get(f"{second}/{bucket}").status_code == 200)
    s3.put_bucket_acl(Bucket=bucket, ACL="private")
    eventually(lambda: requests.get(f"{second}/{bucket}").status_code == 403)


def test_objects_written_through_one_gateway_read_through_the_other(s3, bucket):
    two = client(os.environ["SHOAL_S3_ENDPOINT2"])
    data = os.urandom(5 * 1024 * 1024)
    s3.put_object(Bucket=bucket, Key="k", Body=data)
    assert two.get_object(Bucket=bucket, Key="k")["Body"].read() == data
    two.delete_object(Bucket=bucket, Key="k")
    assert s3.list_objects_v2(Bucket=bucket)["KeyCount"] == 0


def test_a_bucket_policy_put_on_one_gateway_binds_the_other_at_once(s3, bucket):
    s3.put_object(Bucket=bucket, Key="k", Body=b"x")
    first, second = os.environ["SHOAL_S3_ENDPOINT"], os.environ["SHOAL_S3_ENDPOINT2"]
    assert requests.get(f"{second}/{bucket}/k").status_code == 403, "the second gateway caches the bucket"
    s3.put_bucket_policy(Bucket=bucket, Policy='{"Statement":[{"Effect":"Allow","Principal":"*",'
                         f'"Action":"s3:GetObject","Resource":"arn:aws:s3:::{bucket}/*"}}]}}')
    eventually(lambda: requests.get(f"{second}/{bucket}/k").status_code == 200)
    assert requests.get(f"{first}/{bucket}/k").content == b"x"
    s3.delete_bucket_policy(Bucket=bucket)
    eventually(lambda: requests.get(f"{second}/{bucket}/k").status_code == 403)
