"""Fixtures for the S3 suite. The endpoint(s) and keys come from the environment, set by
crates/shoal/tests/s3.rs, which starts `shoal server` or a vstart cluster with gateways:

SHOAL_S3_ENDPOINT, SHOAL_S3_ACCESS_KEY, SHOAL_S3_SECRET_KEY: the endpoint and a user's keys.
SHOAL_S3_ENDPOINT2: a second gateway of the same cluster (optional).
SHOAL_BIN, SHOAL_CONF: the binary and cluster configuration, for `shoal admin`.
"""
import json
import os
import subprocess
import uuid

import boto3
import botocore.config
import pytest


def client(endpoint=None, access_key=None, secret_key=None, **config):
    return boto3.client(
        "s3",
        endpoint_url=endpoint or os.environ["SHOAL_S3_ENDPOINT"],
        aws_access_key_id=access_key or os.environ["SHOAL_S3_ACCESS_KEY"],
        aws_secret_access_key=secret_key or os.environ["SHOAL_S3_SECRET_KEY"],
        region_name="us-east-1",
        # Retries as SDKs do by default (standard mode retries connection errors and 5xx,
        # never the 4xx answers the tests check): a server may close a connection after an
        # error answered before the request body was read.
        config=botocore.config.Config(retries=config.pop("retries", {"max_attempts": 3, "mode": "standard"}),
                                      s3=config.pop("s3", {"addressing_style": "path"}), **config),
    )


def admin(*args):
    """Runs `shoal admin` against the cluster under test; returns parsed JSON output (or None)."""
    out = subprocess.run(
        [os.environ["SHOAL_BIN"], "admin", "-c", os.environ["SHOAL_CONF"], *args],
        capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout) if out.stdout.strip() else None


@pytest.fixture
def s3():
    return client()


@pytest.fixture
def bucket(s3):
    name = "t-" + uuid.uuid4().hex[:12]
    s3.create_bucket(Bucket=name)
    yield name
    purge(s3, name)


def purge(s3, name):
    """Leaves nothing behind: every version and delete marker, uploads, then the bucket."""
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=name):
        keys = [{"Key": v["Key"], "VersionId": v["VersionId"]}
                for v in page.get("Versions", []) + page.get("DeleteMarkers", [])]
        if keys:
            s3.delete_objects(Bucket=name, Delete={"Objects": keys}, BypassGovernanceRetention=True)
    for upload in s3.list_multipart_uploads(Bucket=name).get("Uploads", []):
        s3.abort_multipart_upload(Bucket=name, Key=upload["Key"], UploadId=upload["UploadId"])
    s3.delete_bucket(Bucket=name)


@pytest.fixture
def user():
    """A fresh user created with `shoal admin user create`; returns (uid, access, secret)."""
    uid = "u-" + uuid.uuid4().hex[:8]
    info = admin("user", "create", "--uid", uid, "--display-name", "Test " + uid)
    key = info["keys"][0]
    yield uid, key["access_key"], key["secret_key"]
    admin("user", "rm", "--uid", uid)
