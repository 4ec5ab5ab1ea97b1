"""The S3 API through boto3: buckets, objects, listing, multipart, copy, auth and errors."""
import base64
import datetime
import hashlib
import io
import os
import time
import unittest.mock
import urllib.error
import urllib.request

import boto3
import botocore
import botocore.auth
import botocore.awsrequest
import pytest
import requests

from conftest import admin, client


def error_of(call, *args, **kwargs):
    with pytest.raises(botocore.exceptions.ClientError) as e:
        call(*args, **kwargs)
    return e.value.response


def code_of(call, *args, **kwargs):
    return error_of(call, *args, **kwargs)["Error"]["Code"]


# ---- buckets ----

def test_bucket_lifecycle_and_name_rules(s3):
    for bad in ["ab", "Upper", "a_b", "-start", "x" * 64, "192.168.1.1"]:
        assert code_of(s3.create_bucket, Bucket=bad) == "InvalidBucketName", bad
    name = "life-" + os.urandom(4).hex()
    s3.create_bucket(Bucket=name)
    s3.head_bucket(Bucket=name)
    assert name in [b["Name"] for b in s3.list_buckets()["Buckets"]]
    s3.put_object(Bucket=name, Key="k", Body=b"x")
    assert code_of(s3.delete_bucket, Bucket=name) == "BucketNotEmpty"
    s3.delete_object(Bucket=name, Key="k")
    s3.delete_bucket(Bucket=name)
    assert error_of(s3.head_bucket, Bucket=name)["ResponseMetadata"]["HTTPStatusCode"] == 404
    assert code_of(s3.list_objects_v2, Bucket=name) == "NoSuchBucket"



def test_creating_an_owned_bucket_again_keeps_it_and_others_are_refused(s3, bucket, user):
    s3.put_object(Bucket=bucket, Key="k", Body=b"kept")
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Suspended"})
    s3.create_bucket(Bucket=bucket)
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"kept"
    assert s3.get_bucket_versioning(Bucket=bucket)["Status"] == "Suspended", "settings stay"
    _, access, secret = user
    other = client(access_key=access, secret_key=secret)
    assert code_of(other.create_bucket, Bucket=bucket) == "BucketAlreadyExists"


def test_location_tagging_and_display_names(s3, bucket):
    assert s3.get_bucket_location(Bucket=bucket)["LocationConstraint"] == "default"
    assert code_of(s3.get_bucket_tagging, Bucket=bucket) == "NoSuchTagSet"
    tags = [{"Key": "team", "Value": "storage"}, {"Key": "cost", "Value": "42"}]
    s3.put_bucket_tagging(Bucket=bucket, Tagging={"TagSet": tags})
    assert s3.get_bucket_tagging(Bucket=bucket)["TagSet"] == tags
    too_many = [{"Key": "k%d" % i, "Value": "v"} for i in range(51)]
    assert code_of(s3.put_bucket_tagging, Bucket=bucket, Tagging={"TagSet": too_many}) == "InvalidTag"
    s3.delete_bucket_tagging(Bucket=bucket)
    assert code_of(s3.get_bucket_tagging, Bucket=bucket) == "NoSuchTagSet"
    me = s3.list_buckets()["Owner"]
    s3.put_object(Bucket=bucket, Key="k", Body=b"x")
    listed = s3.list_objects(Bucket=bucket)["Contents"][0]["Owner"]
    assert listed == me and me["DisplayName"] != me["ID"], "the owner shows the user's display name"
    upload = s3.create_multipart_upload(Bucket=bucket, Key="m")
    shown = s3.list_multipart_uploads(Bucket=bucket)["Uploads"][0]
    assert shown["Owner"]["DisplayName"] == me["DisplayName"] == shown["Initiator"]["DisplayName"]
    s3.abort_multipart_upload(Bucket=bucket, Key="m", UploadId=upload["UploadId"])

def test_other_users_bucket_is_taken_and_private(s3, bucket, user):
    _, access, secret = user
    other = client(access_key=access, secret_key=secret)
    assert code_of(other.create_bucket, Bucket=bucket) == "BucketAlreadyExists"
    assert code_of(other.list_objects_v2, Bucket=bucket) == "AccessDenied"
    assert code_of(other.put_object, Bucket=bucket, Key="k", Body=b"x") == "AccessDenied"
    assert bucket not in [b["Name"] for b in other.list_buckets()["Buckets"]]


# ---- objects ----

def test_put_get_head_with_metadata_and_headers(s3, bucket):
    body = b"hello shoal"
    r = s3.put_object(Bucket=bucket, Key="dir/a.txt", Body=body, ContentType="text/plain",
                      Metadata={"color": "blue"}, CacheControl="max-age=60", ContentDisposition="inline",
                      ContentLanguage="en")
    assert r["ETag"] == '"%s"' % hashlib.md5(body).hexdigest()
    g = s3.get_object(Bucket=bucket, Key="dir/a.txt")
    assert g["Body"].read() == body
    assert (g["ContentType"], g["Metadata"], g["CacheControl"]) == ("text/plain", {"color": "blue"}, "max-age=60")
    assert (g["ContentDisposition"], g["ContentLanguage"]) == ("inline", "en")
    h = s3.head_object(Bucket=bucket, Key="dir/a.txt")
    assert h["ContentLength"] == len(body) and h["ETag"] == r["ETag"]
    assert error_of(s3.head_object, Bucket=bucket, Key="missing")["ResponseMetadata"]["HTTPStatusCode"] == 404
    assert code_of(s3.get_object, Bucket=bucket, Key="missing") == "NoSuchKey"


def test_large_object_roundtrip_and_ranges(s3, bucket):
    data = os.urandom(9 * 1024 * 1024 + 123)  # three tail chunks of 4 MiB
    s3.put_object(Bucket=bucket, Key="big", Body=data)
    assert s3.get_object(Bucket=bucket, Key="big")["Body"].read() == data
    for rng, want in [("bytes=0-0", data[:1]), ("bytes=4194300-4194310", data[4194300:4194311]),
                      ("bytes=-100", data[-100:]), ("bytes=9437000-", data[9437000:])]:
        g = s3.get_object(Bucket=bucket, Key="big", Range=rng)
        assert g["Body"].read() == want, rng
        assert g["ResponseMetadata"]["HTTPStatusCode"] == 206
    assert code_of(s3.get_object, Bucket=bucket, Key="big", Range="bytes=99999999-") == "InvalidRange"


def test_overwrite_replaces_whole_object(s3, bucket):
    s3.put_object(Bucket=bucket, Key="k", Body=os.urandom(5 * 1024 * 1024))
    s3.put_object(Bucket=bucket, Key="k", Body=b"small now")
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"small now"
    listed = s3.list_objects_v2(Bucket=bucket)["Contents"]
    assert [(o["Key"], o["Size"]) for o in listed] == [("k", 9)]


def test_conditional_get_and_response_overrides(s3, bucket):
    etag = s3.put_object(Bucket=bucket, Key="c", Body=b"data")["ETag"]
    assert s3.get_object(Bucket=bucket, Key="c", IfMatch=etag)["Body"].read() == b"data"
    assert code_of(s3.get_object, Bucket=bucket, Key="c", IfMatch='"0000"') == "PreconditionFailed"
    assert error_of(s3.get_object, Bucket=bucket, Key="c", IfNoneMatch=etag)["ResponseMetadata"]["HTTPStatusCode"] == 304
    future = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)
    past = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(hours=1)
    assert error_of(s3.get_object, Bucket=bucket, Key="c", IfModifiedSince=future)["ResponseMetadata"]["HTTPStatusCode"] == 304
    assert s3.get_object(Bucket=bucket, Key="c", IfModifiedSince=past)["Body"].read() == b"data"
    assert code_of(s3.get_object, Bucket=bucket, Key="c", IfUnmodifiedSince=past) == "PreconditionFailed"
    g = s3.get_object(Bucket=bucket, Key="c", ResponseContentType="application/x-test",
                      ResponseContentDisposition="attachment; filename=x")
    assert g["ContentType"] == "application/x-test"
    assert g["ContentDisposition"] == "attachment; filename=x"


def test_content_md5_is_checked(s3, bucket):
    good = base64.b64encode(hashlib.md5(b"abc").digest()).decode()
    s3.put_object(Bucket=bucket, Key="m", Body=b"abc", ContentMD5=good)
    bad = base64.b64encode(hashlib.md5(b"xyz").digest()).decode()
    assert code_of(s3.put_object, Bucket=bucket, Key="m", Body=b"abc2", ContentMD5=bad) == "BadDigest"
    assert s3.get_object(Bucket=bucket, Key="m")["Body"].read() == b"abc", "a refused PUT changes nothing"


def test_delete_and_multi_delete(s3, bucket):
    for i in range(5):
        s3.put_object(Bucket=bucket, Key=f"k{i}", Body=b"x")
    s3.delete_object(Bucket=bucket, Key="k0")
    s3.delete_object(Bucket=bucket, Key="never-existed")  # 204 as S3 does
    r = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": f"k{i}"} for i in range(1, 4)]})
    assert sorted(d["Key"] for d in r["Deleted"]) == ["k1", "k2", "k3"]
    r = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "k4"}], "Quiet": True})
    assert not r.get("Deleted")
    assert s3.list_objects_v2(Bucket=bucket)["KeyCount"] == 0


def test_copy_object(s3, bucket):
    s3.put_object(Bucket=bucket, Key="src", Body=b"copy me", Metadata={"a": "1"}, ContentType="text/x")
    big = os.urandom(6 * 1024 * 1024)
    s3.put_object(Bucket=bucket, Key="bigsrc", Body=big)
    s3.copy_object(Bucket=bucket, Key="dst", CopySource={"Bucket": bucket, "Key": "src"})
    g = s3.get_object(Bucket=bucket, Key="dst")
    assert (g["Body"].read(), g["Metadata"], g["ContentType"]) == (b"copy me", {"a": "1"}, "text/x")
    s3.copy_object(Bucket=bucket, Key="dst", CopySource={"Bucket": bucket, "Key": "src"},
                   MetadataDirective="REPLACE", Metadata={"b": "2"}, ContentType="text/y")
    h = s3.head_object(Bucket=bucket, Key="dst")
    assert (h["Metadata"], h["ContentType"]) == ({"b": "2"}, "text/y")
    s3.copy_object(Bucket=bucket, Key="bigdst", CopySource={"Bucket": bucket, "Key": "bigsrc"})
    assert s3.get_object(Bucket=bucket, Key="bigdst")["Body"].read() == big
    assert code_of(s3.copy_object, Bucket=bucket, Key="src", CopySource={"Bucket": bucket, "Key": "src"}) == "InvalidRequest"
    assert code_of(s3.copy_object, Bucket=bucket, Key="x", CopySource={"Bucket": bucket, "Key": "src"},
                   CopySourceIfMatch='"nope"') == "PreconditionFailed"
    assert code_of(s3.copy_object, Bucket=bucket, Key="x", CopySource={"Bucket": bucket, "Key": "nope"}) == "NoSuchKey"


def test_tagging(s3, bucket):
    s3.put_object(Bucket=bucket, Key="t", Body=b"x", Tagging="a=1&b=two")
    tags = s3.get_object_tagging(Bucket=bucket, Key="t")["TagSet"]
    assert sorted((t["Key"], t["Value"]) for t in tags) == [("a", "1"), ("b", "two")]
    s3.put_object_tagging(Bucket=bucket, Key="t", Tagging={"TagSet": [{"Key": "z", "Value": "9"}]})
    assert s3.get_object_tagging(Bucket=bucket, Key="t")["TagSet"] == [{"Key": "z", "Value": "9"}]
    s3.delete_object_tagging(Bucket=bucket, Key="t")
    assert s3.get_object_tagging(Bucket=bucket, Key="t")["TagSet"] == []


# ---- listing ----

def test_listing_across_index_shards(s3, bucket):
    keys = sorted([f"photos/{y}/img{i:03}.jpg" for y in (2024, 2025) for i in range(40)]
                  + [f"docs/d{i}.txt" for i in range(15)] + ["readme", "z/last"])
    for k in keys:
        s3.put_object(Bucket=bucket, Key=k, Body=b"")
    listed = [o["Key"] for p in s3.get_paginator("list_objects_v2").paginate(
        Bucket=bucket, PaginationConfig={"PageSize": 13}) for o in p.get("Contents", [])]
    assert listed == keys, "pages merged in order across shards, each key once"
    v1 = [o["Key"] for p in s3.get_paginator("list_objects").paginate(
        Bucket=bucket, PaginationConfig={"PageSize": 17}) for o in p.get("Contents", [])]
    assert v1 == keys
    top = s3.list_objects_v2(Bucket=bucket, Delimiter="/")
    assert [c["Prefix"] for c in top["CommonPrefixes"]] == ["docs/", "photos/", "z/"]
    assert [o["Key"] for o in top["Contents"]] == ["readme"]
    years = s3.list_objects_v2(Bucket=bucket, Prefix="photos/", Delimiter="/")
    assert [c["Prefix"] for c in years["CommonPrefixes"]] == ["photos/2024/", "photos/2025/"]
    # Delimited listing one item per page: common prefixes are not repeated.
    seen = []
    for p in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Delimiter="/", PaginationConfig={"PageSize": 1}):
        seen += [c["Prefix"] for c in p.get("CommonPrefixes", [])] + [o["Key"] for o in p.get("Contents", [])]
    assert seen == ["docs/", "photos/", "readme", "z/"]
    after = s3.list_objects_v2(Bucket=bucket, StartAfter="photos/2025/img038.jpg")
    assert [o["Key"] for o in after["Contents"]] == ["photos/2025/img039.jpg", "readme", "z/last"]
    v1 = s3.list_objects(Bucket=bucket, Marker="photos/2025/img038.jpg", MaxKeys=2)
    assert [o["Key"] for o in v1["Contents"]] == ["photos/2025/img039.jpg", "readme"] and v1["IsTruncated"]
    assert s3.list_objects_v2(Bucket=bucket, MaxKeys=0)["KeyCount"] == 0
    stats = admin("bucket", "stats", "--bucket", bucket)
    assert stats["num_objects"] == len(keys) and stats["num_shards"] > 1


def test_listing_url_encoding(s3, bucket):
    s3.put_object(Bucket=bucket, Key="a b/c+d&e", Body=b"")
    raw = s3.list_objects_v2(Bucket=bucket, EncodingType="url")  # asked for by the caller: left encoded
    assert [o["Key"] for o in raw["Contents"]] == ["a%20b/c%2Bd%26e"]
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]] == ["a b/c+d&e"]


# ---- multipart ----

def test_multipart_100_mib_in_5_mib_parts(s3, bucket):
    part_size = 5 * 1024 * 1024
    parts_data = [os.urandom(part_size) for _ in range(20)]
    upload = s3.create_multipart_upload(Bucket=bucket, Key="mp", ContentType="video/x", Metadata={"m": "1"})["UploadId"]
    assert [u["UploadId"] for u in s3.list_multipart_uploads(Bucket=bucket)["Uploads"]] == [upload]
    etags = []
    for i, data in enumerate(parts_data, 1):
        etags.append(s3.upload_part(Bucket=bucket, Key="mp", UploadId=upload, PartNumber=i, Body=data)["ETag"])
    listed = s3.list_parts(Bucket=bucket, Key="mp", UploadId=upload, MaxParts=15)
    assert [p["PartNumber"] for p in listed["Parts"]] == list(range(1, 16)) and listed["IsTruncated"]
    rest = s3.list_parts(Bucket=bucket, Key="mp", UploadId=upload, MaxParts=15,
                         PartNumberMarker=listed["NextPartNumberMarker"])
    assert [p["PartNumber"] for p in rest["Parts"]] == list(range(16, len(parts_data) + 1))
    assert not rest["IsTruncated"] and rest["Parts"][0]["ETag"] == etags[15]
    wrong = [{"PartNumber": 1, "ETag": '"' + "0" * 32 + '"'}]
    assert code_of(s3.complete_multipart_upload, Bucket=bucket, Key="mp", UploadId=upload,
                   MultipartUpload={"Parts": wrong}) == "InvalidPart"
    out_of_order = [{"PartNumber": 2, "ETag": etags[1]}, {"PartNumber": 1, "ETag": etags[0]}]
    assert code_of(s3.complete_multipart_upload, Bucket=bucket, Key="mp", UploadId=upload,
                   MultipartUpload={"Parts": out_of_order}) == "InvalidPartOrder"
    parts = [{"PartNumber": i, "ETag": e} for i, e in enumerate(etags, 1)]
    r = s3.complete_multipart_upload(Bucket=bucket, Key="mp", UploadId=upload, MultipartUpload={"Parts": parts})
    md5s = b"".join(hashlib.md5(d).digest() for d in parts_data)
    assert r["ETag"] == '"%s-20"' % hashlib.md5(md5s).hexdigest()
    h = s3.head_object(Bucket=bucket, Key="mp")
    assert (h["ContentLength"], h["ContentType"], h["Metadata"], h["PartsCount"]) == (100 * 1024 * 1024, "video/x", {"m": "1"}, 20)
    whole = b"".join(parts_data)
    assert hashlib.md5(s3.get_object(Bucket=bucket, Key="mp")["Body"].read()).digest() == hashlib.md5(whole).digest()
    g = s3.get_object(Bucket=bucket, Key="mp", Range=f"bytes={part_size - 10}-{part_size + 9}")
    assert g["Body"].read() == whole[part_size - 10:part_size + 10]
    assert code_of(s3.list_parts, Bucket=bucket, Key="mp", UploadId=upload) == "NoSuchUpload"


def test_multipart_small_parts_abort_and_part_copy(s3, bucket):
    upload = s3.create_multipart_upload(Bucket=bucket, Key="small")["UploadId"]
    e1 = s3.upload_part(Bucket=bucket, Key="small", UploadId=upload, PartNumber=1, Body=b"a" * 100)["ETag"]
    e2 = s3.upload_part(Bucket=bucket, Key="small", UploadId=upload, PartNumber=2, Body=b"b" * 100)["ETag"]
    assert code_of(s3.complete_multipart_upload, Bucket=bucket, Key="small", UploadId=upload,
                   MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e1}, {"PartNumber": 2, "ETag": e2}]}) == "EntityTooSmall"
    s3.abort_multipart_upload(Bucket=bucket, Key="small", UploadId=upload)
    assert code_of(s3.upload_part, Bucket=bucket, Key="small", UploadId=upload, PartNumber=3, Body=b"c") == "NoSuchUpload"
    assert "Uploads" not in s3.list_multipart_uploads(Bucket=bucket)
    src = os.urandom(6 * 1024 * 1024)
    s3.put_object(Bucket=bucket, Key="src", Body=src)
    upload = s3.create_multipart_upload(Bucket=bucket, Key="pc")["UploadId"]
    c1 = s3.upload_part_copy(Bucket=bucket, Key="pc", UploadId=upload, PartNumber=1,
                             CopySource={"Bucket": bucket, "Key": "src"}, CopySourceRange=f"bytes=0-{5 * 1024 * 1024 - 1}")
    c2 = s3.upload_part_copy(Bucket=bucket, Key="pc", UploadId=upload, PartNumber=2,
                             CopySource={"Bucket": bucket, "Key": "src"})
    parts = [{"PartNumber": 1, "ETag": c1["CopyPartResult"]["ETag"]}, {"PartNumber": 2, "ETag": c2["CopyPartResult"]["ETag"]}]
    s3.complete_multipart_upload(Bucket=bucket, Key="pc", UploadId=upload, MultipartUpload={"Parts": parts})
    assert s3.get_object(Bucket=bucket, Key="pc")["Body"].read() == src[:5 * 1024 * 1024] + src


# ---- auth ----

def test_presigned_urls_and_expiry(s3, bucket):
    s3.put_object(Bucket=bucket, Key="p", Body=b"presigned")
    url = client(signature_version="s3v4").generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "p"}, ExpiresIn=60)
    assert requests.get(url).content == b"presigned"
    put = client(signature_version="s3v4").generate_presigned_url("put_object", Params={"Bucket": bucket, "Key": "p2"}, ExpiresIn=60)
    assert requests.put(put, data=b"via url").status_code == 200
    assert s3.get_object(Bucket=bucket, Key="p2")["Body"].read() == b"via url"
    expired = client(signature_version="s3v4").generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "p"}, ExpiresIn=1)
    time.sleep(2.5)
    r = requests.get(expired)
    assert r.status_code == 403 and "<Code>AccessDenied</Code>" in r.text
    assert "X-Amz-Signature=" in url
    tampered = url[:-1] + ("0" if url[-1] != "0" else "1")  # the signature comes last
    assert "<Code>SignatureDoesNotMatch</Code>" in requests.get(tampered).text


def test_week_long_presigned_urls_and_signature_v2_are_refused(s3, bucket):
    s3.put_object(Bucket=bucket, Key="p", Body=b"presigned")
    week = client(signature_version="s3v4").generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "p"}, ExpiresIn=604800)
    assert requests.get(week).content == b"presigned"
    longer = client(signature_version="s3v4").generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "p"}, ExpiresIn=604801)
    r = requests.get(longer)
    assert r.status_code == 400 and "<Code>AuthorizationQueryParametersError</Code>" in r.text, r.text
    # A request signed with signature version 2 (botocore's HmacV1 signer).
    creds = s3._request_signer._credentials.get_frozen_credentials()
    request = botocore.awsrequest.AWSRequest(method="GET", url="%s/%s/p" % (s3.meta.endpoint_url, bucket))
    botocore.auth.HmacV1Auth(creds).add_auth(request)
    assert request.headers["Authorization"].startswith("AWS ")
    r = requests.get(request.url, headers=dict(request.headers))
    assert r.status_code == 400 and "<Code>InvalidRequest</Code>" in r.text, r.text


def test_auth_errors_touch_nothing(s3, bucket):
    wrong = client(secret_key="x" * 40)
    assert code_of(wrong.put_object, Bucket=bucket, Key="w", Body=b"x") == "SignatureDoesNotMatch"
    unknown = client(access_key="NOSUCHKEY0000000000A")
    assert code_of(unknown.put_object, Bucket=bucket, Key="w", Body=b"x") == "InvalidAccessKeyId"
    skewed = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(hours=1)
    real = datetime.datetime

    class Skewed(real):
        @classmethod
        def now(cls, tz=None):
            return skewed if tz else skewed.replace(tzinfo=None)

        @classmethod
        def utcnow(cls):
            return skewed.replace(tzinfo=None)

    with unittest.mock.patch("botocore.auth.datetime.datetime", Skewed):
        assert code_of(s3.put_object, Bucket=bucket, Key="w", Body=b"x") == "RequestTimeTooSkewed"
    assert s3.list_objects_v2(Bucket=bucket)["KeyCount"] == 0


def test_anonymous_access_follows_canned_acls(s3, bucket):
    s3.put_object(Bucket=bucket, Key="pub", Body=b"public", ACL="public-read")
    s3.put_object(Bucket=bucket, Key="priv", Body=b"private")
    base = os.environ["SHOAL_S3_ENDPOINT"]
    assert requests.get(f"{base}/{bucket}/pub").content == b"public"
    assert requests.get(f"{base}/{bucket}/priv").status_code == 403
    assert requests.get(f"{base}/{bucket}").status_code == 403, "a private bucket cannot be listed anonymously"
    assert requests.put(f"{base}/{bucket}/anon", data=b"x").status_code == 403
    s3.put_bucket_acl(Bucket=bucket, ACL="public-read")
    assert "<Key>pub</Key>" in requests.get(f"{base}/{bucket}").text
    grants = s3.get_bucket_acl(Bucket=bucket)["Grants"]
    assert any(g["Grantee"].get("URI", "").endswith("AllUsers") and g["Permission"] == "READ" for g in grants)
    s3.put_bucket_acl(Bucket=bucket, ACL="private")
    assert requests.get(f"{base}/{bucket}").status_code == 403


def test_suspended_user_is_refused(bucket, user):
    uid, access, secret = user
    c = client(access_key=access, secret_key=secret)
    name = "susp-" + os.urandom(4).hex()
    c.create_bucket(Bucket=name)
    admin("user", "suspend", "--uid", uid)
    assert code_of(c.list_objects_v2, Bucket=name) == "AccessDenied"
    admin("user", "enable", "--uid", uid)
    c.delete_bucket(Bucket=name)


def test_key_create_and_rm(user):
    uid, access, secret = user
    info = admin("key", "create", "--uid", uid)
    new = [k for k in info["keys"] if k["access_key"] != access][0]
    c = client(access_key=new["access_key"], secret_key=new["secret_key"])
    c.list_buckets()
    admin("key", "rm", "--uid", uid, "--access-key", new["access_key"])
    assert code_of(c.list_buckets) == "InvalidAccessKeyId"


# ---- errors ----

def test_error_bodies_and_request_ids(s3, bucket):
    r = requests.get(f"{os.environ['SHOAL_S3_ENDPOINT']}/{bucket}/nothing")
    assert r.status_code == 403 and r.headers["x-amz-request-id"]
    for tag in ("<Code>AccessDenied</Code>", "<Message>", f"<Resource>/{bucket}/nothing</Resource>",
                f"<RequestId>{r.headers['x-amz-request-id']}</RequestId>"):
        assert tag in r.text, (tag, r.text)
    ok = s3.put_object(Bucket=bucket, Key="k", Body=b"x")
    assert ok["ResponseMetadata"]["HTTPHeaders"]["x-amz-request-id"]
    upload = s3.create_multipart_upload(Bucket=bucket, Key="k")["UploadId"]
    url = client(signature_version="s3v4").generate_presigned_url("complete_multipart_upload", Params={"Bucket": bucket, "Key": "k", "UploadId": upload})
    r = requests.post(url, data=b"<CompleteMultipartUpload><Part><PartNumber>1</Oops>")
    assert r.status_code == 400 and "<Code>MalformedXML</Code>" in r.text
    r = requests.get(f"{os.environ['SHOAL_S3_ENDPOINT']}/{bucket}/k", headers={"X-Big": "v" * 20000})
    assert r.status_code in (400, 431)


def test_aws_cli_smoke(s3, bucket, tmp_path):
    import subprocess
    env = dict(os.environ, AWS_ACCESS_KEY_ID=os.environ["SHOAL_S3_ACCESS_KEY"],
               AWS_SECRET_ACCESS_KEY=os.environ["SHOAL_S3_SECRET_KEY"], AWS_DEFAULT_REGION="us-east-1")

    def aws(*args):
        out = subprocess.run(["aws", "--endpoint-url", os.environ["SHOAL_S3_ENDPOINT"], *args],
                             capture_output=True, text=True, env=env, timeout=300)
        assert out.returncode == 0, out.stderr
        return out.stdout

    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "a.txt").write_bytes(b"alpha")
    (src / "sub" / "b.bin").write_bytes(os.urandom(12 * 1024 * 1024))  # the CLI uploads this in parts
    aws("s3", "cp", str(src / "a.txt"), f"s3://{bucket}/one/a.txt")
    aws("s3", "sync", str(src), f"s3://{bucket}/tree")
    listing = aws("s3", "ls", "--recursive", f"s3://{bucket}/")
    for key in ("one/a.txt", "tree/a.txt", "tree/sub/b.bin"):
        assert key in listing
    dst = tmp_path / "dst"
    aws("s3", "sync", f"s3://{bucket}/tree", str(dst))
    assert (dst / "sub" / "b.bin").read_bytes() == (src / "sub" / "b.bin").read_bytes()
    assert '"ContentLength": 5' in aws("s3api", "head-object", "--bucket", bucket, "--key", "one/a.txt")
    aws("s3", "rm", "--recursive", f"s3://{bucket}/tree")
    assert "tree/" not in aws("s3", "ls", "--recursive", f"s3://{bucket}/")


# ---- atomicity and admin ----

def test_readers_see_whole_objects_during_overwrites(s3, bucket):
    import concurrent.futures
    versions = [os.urandom(9 * 1024 * 1024) for _ in range(2)]  # three tail chunks each
    digests = {hashlib.md5(v).digest() for v in versions}
    s3.put_object(Bucket=bucket, Key="hot", Body=versions[0])

    def write(n):
        for i in range(n):
            s3.put_object(Bucket=bucket, Key="hot", Body=versions[i % 2])

    def read(n):
        return [hashlib.md5(s3.get_object(Bucket=bucket, Key="hot")["Body"].read()).digest() for _ in range(n)]

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        writer = pool.submit(write, 6)
        readers = [pool.submit(read, 4) for _ in range(3)]
        writer.result()
        seen = [d for r in readers for d in r.result()]
    assert set(seen) <= digests, "every GET returned one whole version"


def test_admin_user_and_bucket_commands(s3, user):
    uid, access, secret = user
    assert uid in admin("user", "list")
    info = admin("user", "info", "--uid", uid)
    assert info["uid"] == uid and info["keys"][0]["access_key"] == access
    c = client(access_key=access, secret_key=secret)
    name = "adm-" + os.urandom(4).hex()
    c.create_bucket(Bucket=name)
    for i in range(3):
        c.put_object(Bucket=name, Key=f"k{i}", Body=b"12345")
    assert name in admin("bucket", "list")
    assert admin("bucket", "list", "--uid", uid) == [name]
    stats = admin("bucket", "stats", "--bucket", name)
    assert (stats["owner"], stats["num_objects"], stats["size_bytes"]) == (uid, 3, 15)
    out = subprocess_admin_fails("bucket", "rm", "--bucket", name)
    assert "not empty" in out
    admin("bucket", "rm", "--bucket", name, "--purge-objects")
    assert code_of(c.head_bucket, Bucket=name) == "404"
    assert name not in admin("bucket", "list")


def subprocess_admin_fails(*args):
    import subprocess
    out = subprocess.run([os.environ["SHOAL_BIN"], "admin", "-c", os.environ["SHOAL_CONF"], *args],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    return out.stderr


def test_concurrent_changes_of_different_bucket_settings_all_survive(s3):
    """Each bucket setting is a read-modify-write of the bucket record: changes of
    different settings at the same moment must not undo each other."""
    import concurrent.futures
    import json
    import uuid
    from conftest import purge
    policy = json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::*"}]})
    changes = {
        "cors": lambda b: s3.put_bucket_cors(Bucket=b, CORSConfiguration={"CORSRules": [
            {"AllowedOrigins": ["https://a.example"], "AllowedMethods": ["GET"]}]}),
        "tags": lambda b: s3.put_bucket_tagging(Bucket=b, Tagging={"TagSet": [{"Key": "k", "Value": "v"}]}),
        "encryption": lambda b: s3.put_bucket_encryption(Bucket=b, ServerSideEncryptionConfiguration={
            "Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]}),
        "lifecycle": lambda b: s3.put_bucket_lifecycle_configuration(Bucket=b, LifecycleConfiguration={"Rules": [
            {"ID": "r", "Status": "Enabled", "Filter": {"Prefix": "tmp/"}, "Expiration": {"Days": 1}}]}),
        "versioning": lambda b: s3.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Enabled"}),
        "policy": lambda b: s3.put_bucket_policy(Bucket=b, Policy=policy.replace("*\"}", b + "/*\"}")),
    }
    checks = {
        "cors": lambda b: s3.get_bucket_cors(Bucket=b)["CORSRules"],
        "tags": lambda b: s3.get_bucket_tagging(Bucket=b)["TagSet"],
        "encryption": lambda b: s3.get_bucket_encryption(Bucket=b)["ServerSideEncryptionConfiguration"],
        "lifecycle": lambda b: s3.get_bucket_lifecycle_configuration(Bucket=b)["Rules"],
        "versioning": lambda b: s3.get_bucket_versioning(Bucket=b).get("Status") == "Enabled",
        "policy": lambda b: s3.get_bucket_policy(Bucket=b)["Policy"],
    }
    buckets = ["t-" + uuid.uuid4().hex[:12] for _ in range(8)]
    for b in buckets:
        s3.create_bucket(Bucket=b)
    try:
        # Default encryption needs the gateway's key file (shoal server has one, a vstart
        # gateway not unless given).
        try:
            changes["encryption"](buckets[0])
        except botocore.exceptions.ClientError as e:
            assert e.response["Error"]["Code"] == "NotImplemented"
            del changes["encryption"], checks["encryption"]
        with concurrent.futures.ThreadPoolExecutor(len(changes) * 2) as pool:
            for b in buckets:
                list(pool.map(lambda change: change(b), changes.values()))
        lost = []
        for b in buckets:
            for name, check in checks.items():
                try:
                    if not check(b):
                        lost.append((b, name))
                except botocore.exceptions.ClientError:
                    lost.append((b, name))
        assert lost == []
    finally:
        for b in buckets:
            s3.delete_bucket_policy(Bucket=b)
            purge(s3, b)
