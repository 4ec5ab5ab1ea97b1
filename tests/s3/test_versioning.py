"""Bucket versioning with boto3: versions, delete markers, the null version of suspended
buckets, version listings (paged, with prefixes and delimiters, merged across index
shards), versioned copies, tagging, multi-delete and multipart, and garbage collection of
removed versions only."""
import os

import botocore.exceptions
import pytest

from conftest import admin


def error(call, *args, **kwargs):
    """The S3 error a call fails with: (code, HTTP status, response headers)."""
    with pytest.raises(botocore.exceptions.ClientError) as e:
        call(*args, **kwargs)
    r = e.value.response
    return r["Error"]["Code"], r["ResponseMetadata"]["HTTPStatusCode"], r["ResponseMetadata"]["HTTPHeaders"]


def enable(s3, bucket, status="Enabled"):
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": status})


def versions(s3, bucket, **kwargs):
    """Every (key, version id, is latest, is delete marker) in listing order, paged with the
    paginator (MaxKeys per page from kwargs)."""
    out = []
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket, **kwargs):
        items = [(v["Key"], v["VersionId"], v["IsLatest"], False) for v in page.get("Versions", [])]
        items += [(m["Key"], m["VersionId"], m["IsLatest"], True) for m in page.get("DeleteMarkers", [])]
        # Versions and markers come in two lists: put each key's versions newest first,
        # which the ids (time-ordered, newest smallest) and the null version's place decide.
        out.extend(items)
    return out


def body(s3, bucket, key, **kwargs):
    return s3.get_object(Bucket=bucket, Key=key, **kwargs)["Body"].read()


def test_versioning_status_moves_between_enabled_and_suspended(s3, bucket):
    assert "Status" not in s3.get_bucket_versioning(Bucket=bucket)
    enable(s3, bucket)
    assert s3.get_bucket_versioning(Bucket=bucket)["Status"] == "Enabled"
    enable(s3, bucket, "Suspended")
    assert s3.get_bucket_versioning(Bucket=bucket)["Status"] == "Suspended"
    code, status, _ = error(s3.put_bucket_versioning, Bucket=bucket, VersioningConfiguration={"Status": "Off"})
    assert (code, status) == ("MalformedXML", 400)


def test_every_put_is_a_version_and_delete_adds_a_marker(s3, bucket):
    enable(s3, bucket)
    ids = [s3.put_object(Bucket=bucket, Key="k", Body=b"v%d" % i)["VersionId"] for i in range(3)]
    assert len(set(ids)) == 3 and "null" not in ids
    assert body(s3, bucket, "k") == b"v2"
    for i, vid in enumerate(ids):
        got = s3.get_object(Bucket=bucket, Key="k", VersionId=vid)
        assert (got["Body"].read(), got["VersionId"]) == (b"v%d" % i, vid)
        assert s3.head_object(Bucket=bucket, Key="k", VersionId=vid)["ContentLength"] == 2
    listed = versions(s3, bucket)
    assert listed == [("k", ids[2], True, False), ("k", ids[1], False, False), ("k", ids[0], False, False)]

    deleted = s3.delete_object(Bucket=bucket, Key="k")
    marker = deleted["VersionId"]
    assert deleted["DeleteMarker"] is True and marker not in ids
    code, status, headers = error(s3.get_object, Bucket=bucket, Key="k")
    assert (code, status, headers.get("x-amz-delete-marker"), headers.get("x-amz-version-id")) == \
        ("NoSuchKey", 404, "true", marker)
    code, status, headers = error(s3.head_object, Bucket=bucket, Key="k", VersionId=marker)
    assert (status, headers.get("x-amz-delete-marker")) == (405, "true")
    assert s3.list_objects_v2(Bucket=bucket).get("KeyCount") == 0
    assert ("k", marker, True, True) in versions(s3, bucket)
    assert body(s3, bucket, "k", VersionId=ids[1]) == b"v1", "older versions stay readable"

    # Removing the marker brings the object back; removing a version removes it for good.
    removed = s3.delete_object(Bucket=bucket, Key="k", VersionId=marker)
    assert (removed["VersionId"], removed["DeleteMarker"]) == (marker, True)
    assert body(s3, bucket, "k") == b"v2"
    s3.delete_object(Bucket=bucket, Key="k", VersionId=ids[1])
    code, status, _ = error(s3.get_object, Bucket=bucket, Key="k", VersionId=ids[1])
    assert (code, status) == ("NoSuchVersion", 404)
    assert [v[1] for v in versions(s3, bucket)] == [ids[2], ids[0]]
    s3.delete_object(Bucket=bucket, Key="k", VersionId=ids[2])
    assert body(s3, bucket, "k") == b"v0", "the next newest version becomes current"
    code, status, _ = error(s3.delete_bucket, Bucket=bucket)
    assert (code, status) == ("BucketNotEmpty", 409), "versions keep a bucket from being removed"
    # A version that is not there deletes nothing and succeeds.
    s3.delete_object(Bucket=bucket, Key="k", VersionId="f" * 32)
    assert body(s3, bucket, "k") == b"v0"


def test_a_suspended_bucket_replaces_only_the_null_version(s3, bucket):
    s3.put_object(Bucket=bucket, Key="k", Body=b"before")
    enable(s3, bucket)
    assert body(s3, bucket, "k", VersionId="null") == b"before", "an object from before versioning is null"
    v1 = s3.put_object(Bucket=bucket, Key="k", Body=b"one")["VersionId"]
    assert [(v[1], v[2]) for v in versions(s3, bucket)] == [(v1, True), ("null", False)]
    enable(s3, bucket, "Suspended")
    assert s3.put_object(Bucket=bucket, Key="k", Body=b"suspended")["VersionId"] == "null"
    assert body(s3, bucket, "k") == b"suspended"
    assert body(s3, bucket, "k", VersionId=v1) == b"one"
    assert [(v[1], v[2]) for v in versions(s3, bucket)] == [("null", True), (v1, False)], \
        "the old null version is gone, v1 stays"
    deleted = s3.delete_object(Bucket=bucket, Key="k")
    assert (deleted["VersionId"], deleted["DeleteMarker"]) == ("null", True)
    assert [(v[1], v[3]) for v in versions(s3, bucket)] == [(v1, False), ("null", True)]
    assert error(s3.get_object, Bucket=bucket, Key="k")[0] == "NoSuchKey"
    s3.delete_object(Bucket=bucket, Key="k", VersionId="null")
    assert body(s3, bucket, "k") == b"one"


def test_version_listing_pages_prefixes_and_delimiters(s3, bucket):
    enable(s3, bucket)
    written = {}
    for key, count in [("a/1", 3), ("a/2", 2), ("b", 2), ("c/d/e", 1), ("hot", 25)]:
        written[key] = [s3.put_object(Bucket=bucket, Key=key, Body=b"x")["VersionId"] for _ in range(count)]
    marker = s3.delete_object(Bucket=bucket, Key="b")["VersionId"]
    expected = []
    for key in sorted(written):
        ids = ([marker] if key == "b" else []) + written[key][::-1]
        expected += [(key, vid, i == 0, vid == marker) for i, vid in enumerate(ids)]
    # Pages of 7 split the 25 versions of one key; markers resume inside it.
    for page_size in (7, 1000):
        got = versions(s3, bucket, PaginationConfig={"PageSize": page_size})
        assert sorted(got) == sorted(expected)
        assert [g[:2] for g in got if not g[3]] == [e[:2] for e in expected if not e[3]]
    page = s3.list_object_versions(Bucket=bucket, MaxKeys=2, KeyMarker="hot", VersionIdMarker=written["hot"][10])
    assert [v["VersionId"] for v in page["Versions"]] == written["hot"][9:7:-1]
    assert page["IsTruncated"] and page["NextKeyMarker"] == "hot"
    assert page["NextVersionIdMarker"] == written["hot"][8]
    rolled = s3.list_object_versions(Bucket=bucket, Delimiter="/")
    assert [p["Prefix"] for p in rolled["CommonPrefixes"]] == ["a/", "c/"]
    assert {v["Key"] for v in rolled["Versions"]} == {"b", "hot"}
    under_a = s3.list_object_versions(Bucket=bucket, Prefix="a/")
    assert [(v["Key"], v["IsLatest"]) for v in under_a["Versions"]] == \
        [("a/1", True), ("a/1", False), ("a/1", False), ("a/2", True), ("a/2", False)]
    # Paging over common prefixes too.
    prefixes = []
    for p in s3.get_paginator("list_object_versions").paginate(
            Bucket=bucket, Delimiter="/", PaginationConfig={"PageSize": 1}):
        prefixes += [c["Prefix"] for c in p.get("CommonPrefixes", [])]
    assert prefixes == ["a/", "c/"]
    # Current listings are unchanged by versions.
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]] == ["a/1", "a/2", "c/d/e", "hot"]


def test_copy_tagging_and_multi_delete_take_version_ids(s3, bucket):
    enable(s3, bucket)
    v1 = s3.put_object(Bucket=bucket, Key="src", Body=b"first")["VersionId"]
    s3.put_object(Bucket=bucket, Key="src", Body=b"second")
    copied = s3.copy_object(Bucket=bucket, Key="dst", CopySource={"Bucket": bucket, "Key": "src", "VersionId": v1})
    assert copied["CopySourceVersionId"] == v1 and copied["VersionId"] not in ("null", v1)
    assert body(s3, bucket, "dst") == b"first"

    s3.put_object_tagging(Bucket=bucket, Key="src", VersionId=v1, Tagging={"TagSet": [{"Key": "t", "Value": "1"}]})
    assert s3.get_object_tagging(Bucket=bucket, Key="src", VersionId=v1)["TagSet"] == [{"Key": "t", "Value": "1"}]
    assert s3.get_object_tagging(Bucket=bucket, Key="src")["TagSet"] == [], "only that version is tagged"

    out = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "src", "VersionId": v1}, {"Key": "dst"}]})
    by_key = {d["Key"]: d for d in out["Deleted"]}
    assert by_key["src"]["VersionId"] == v1 and not by_key["src"].get("DeleteMarker")
    assert by_key["dst"]["DeleteMarker"] is True and by_key["dst"]["DeleteMarkerVersionId"]
    assert error(s3.get_object, Bucket=bucket, Key="src", VersionId=v1)[0] == "NoSuchVersion"
    assert error(s3.get_object, Bucket=bucket, Key="dst")[0] == "NoSuchKey"


def test_multipart_completion_adds_a_version(s3, bucket):
    enable(s3, bucket)
    first = s3.put_object(Bucket=bucket, Key="mp", Body=b"small")["VersionId"]
    upload = s3.create_multipart_upload(Bucket=bucket, Key="mp")["UploadId"]
    part = os.urandom(5 << 20)
    etags = [s3.upload_part(Bucket=bucket, Key="mp", UploadId=upload, PartNumber=n, Body=part)["ETag"]
             for n in (1, 2)]
    done = s3.complete_multipart_upload(
        Bucket=bucket, Key="mp", UploadId=upload,
        MultipartUpload={"Parts": [{"PartNumber": n, "ETag": e} for n, e in zip((1, 2), etags)]})
    assert done["VersionId"] not in (first, "null")
    assert body(s3, bucket, "mp") == part + part
    assert body(s3, bucket, "mp", VersionId=first) == b"small"


def test_gc_removes_only_deleted_versions(s3, bucket):
    enable(s3, bucket)
    big = [os.urandom(5 << 20), os.urandom(5 << 20)]
    ids = [s3.put_object(Bucket=bucket, Key="big", Body=b)["VersionId"] for b in big]
    admin("gc", "process", "--include-all")
    assert body(s3, bucket, "big", VersionId=ids[0]) == big[0], "an overwritten version keeps its data"
    s3.delete_object(Bucket=bucket, Key="big", VersionId=ids[0])
    report = admin("gc", "process", "--include-all")
    assert report["heads_deleted"] >= 1 and report["chunks_deleted"] >= 2, report
    assert body(s3, bucket, "big") == big[1]
    assert body(s3, bucket, "big", VersionId=ids[1]) == big[1]
