"""Short runs of the data-protection workloads of `shoal bench s3` (bench/versioning.sh runs
the long ones): versioned PUT/GET, listing current objects and versions, and the
lifecycle experiment. Each checks what the run reports and what it leaves behind."""

import json
import os
import subprocess

from conftest import purge


def bench(bucket, *args):
    """Runs `shoal bench s3 --json` on `bucket`; returns its rows by operation."""
    out = subprocess.run(
        [os.environ["SHOAL_BIN"], "bench", "s3", "--endpoint", os.environ["SHOAL_S3_ENDPOINT"],
         "--access-key", os.environ["SHOAL_S3_ACCESS_KEY"], "--secret-key", os.environ["SHOAL_S3_SECRET_KEY"],
         "--bucket", bucket, "--json", "--concurrent", "4", *args],
        capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stderr
    return {row["op"]: row for row in map(json.loads, out.stdout.splitlines())}


def versions(s3, bucket):
    return [(v["Key"], v["VersionId"]) for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket)
            for v in page.get("Versions", []) + page.get("DeleteMarkers", [])]


def test_versioned_put_and_get_runs_remove_every_version_they_wrote(s3, bucket):
    put = bench(bucket, "--workload", "put", "--versioned", "--duration", "1s")["PUT"]
    assert put["ops"] > 0 and put["keys_per_sec"] == put["ops_per_sec"]
    assert s3.get_bucket_versioning(Bucket=bucket)["Status"] == "Enabled"
    get = bench(bucket, "--workload", "get", "--versioned", "--objects", "20", "--versions", "3", "--duration", "1s")
    assert get["GET"]["ops"] > 0 and get["GET"]["mib_per_sec"] > 0
    assert versions(s3, bucket) == []


def test_listing_runs_count_current_keys_and_versions(s3, bucket):
    listed = bench(bucket, "--workload", "list", "--versioned", "--prefix", "p", "--objects", "30", "--versions", "2",
                   "--noclear", "--duration", "1s")["LIST"]
    assert listed["ops"] > 0 and listed["keys_per_sec"] > listed["ops_per_sec"]
    assert len(versions(s3, bucket)) == 60
    # Pages start after a random key of 30: a page of current keys holds 0 to 29 of them
    # (14.5 on average), a page of versions twice as many.
    again = bench(bucket, "--workload", "list", "--prefix", "p", "--no-prepare", "--objects", "30", "--noclear",
                  "--duration", "1s")["LIST"]
    of_versions = bench(bucket, "--workload", "list", "--list-versions", "--prefix", "p", "--no-prepare",
                        "--objects", "30", "--noclear", "--duration", "1s")["LIST"]
    per_page, versions_per_page = (r["keys_per_sec"] / r["ops_per_sec"] for r in (again, of_versions))
    assert 0 < per_page <= 29 and 1.5 * per_page < versions_per_page <= 58
    assert len(versions(s3, bucket)) == 60


def test_the_lifecycle_experiment_expires_every_object_it_wrote(s3, bucket):
    # The suite's servers count rgw_lc_debug_interval seconds as a lifecycle day.
    try:
        rows = bench(bucket, "--workload", "expire", "--objects", "40", "--rounds", "1", "--duration", "120s")
        assert rows["EXPIRE"]["ops"] == 40 and rows["EXPIRE"]["p50_ms"] is None
        assert rows["PUT (expiring)"]["ops"] > 0 and rows["PUT"]["ops"] > 0
        assert versions(s3, bucket + "-expire") == []
        assert versions(s3, bucket) == []
    finally:
        purge(s3, bucket + "-expire")
