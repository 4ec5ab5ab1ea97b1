"""Server-side encryption (crates/shoal/tests/s3.rs runs this against `shoal server` with
HTTPS and a key file holding the keys sse-s3, kms-a and kms-b): SSE-S3, SSE-KMS, SSE-C
(over HTTPS only), default bucket encryption; ranges, parts, multipart uploads and copies
of encrypted objects; and no plaintext anywhere in the store's files."""
import base64
import hashlib
import os
import pathlib
import uuid

import boto3
import botocore
import pytest

from conftest import client, purge

HTTPS = os.environ.get("SHOAL_S3_HTTPS_ENDPOINT", "")
CA = os.environ.get("SHOAL_TLS_CA", "")
MIB = 1 << 20


@pytest.fixture
def tls():
    return boto3.client(
        "s3", endpoint_url=HTTPS, verify=CA, region_name="us-east-1",
        aws_access_key_id=os.environ["SHOAL_S3_ACCESS_KEY"], aws_secret_access_key=os.environ["SHOAL_S3_SECRET_KEY"],
        config=botocore.config.Config(s3={"addressing_style": "path"}, retries={"max_attempts": 3, "mode": "standard"}),
    )


def customer_key():
    key = os.urandom(32)
    return {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": key}


def copy_source_key(sse):
    return {"CopySource" + k: v for k, v in sse.items()}


def error_of(call, *args, **kwargs):
    with pytest.raises(botocore.exceptions.ClientError) as e:
        call(*args, **kwargs)
    return e.value.response["ResponseMetadata"]["HTTPStatusCode"], e.value.response["Error"]["Code"]


RANGES = [(0, 0), (5, 70_000), (65_535, 65_537), (131_072, 200_000), (MIB - 1, MIB + 10), (3 * MIB, None)]


def check_ranges(s3, bucket, key, data, **extra):
    for start, end in RANGES:
        spec = f"bytes={start}-" + ("" if end is None else str(end))
        got = s3.get_object(Bucket=bucket, Key=key, Range=spec, **extra)
        want = data[start:] if end is None else data[start:end + 1]
        assert got["Body"].read() == want, spec
    got = s3.get_object(Bucket=bucket, Key=key, Range="bytes=-1000", **extra)
    assert got["Body"].read() == data[-1000:]


@pytest.mark.parametrize("size", [0, 1, 4096, 65_536, 65_537, (4 * MIB) + 12_345])
def test_sse_s3_round_trips_every_size(s3, bucket, size):
    data = os.urandom(size)
    put = s3.put_object(Bucket=bucket, Key="k", Body=data, ServerSideEncryption="AES256")
    assert put["ServerSideEncryption"] == "AES256"
    assert put["ETag"] == '"%s"' % hashlib.md5(data).hexdigest(), "the ETag is the plaintext's MD5"
    got = s3.get_object(Bucket=bucket, Key="k")
    assert got["Body"].read() == data and got["ServerSideEncryption"] == "AES256"
    head = s3.head_object(Bucket=bucket, Key="k")
    assert head["ContentLength"] == size and head["ServerSideEncryption"] == "AES256"
    listed = s3.list_objects_v2(Bucket=bucket)["Contents"][0]
    assert listed["Size"] == size, "listings show the plaintext size"
    if size > 4 * MIB:
        check_ranges(s3, bucket, "k", data)


def test_sse_kms_names_keys_of_the_key_file(s3, bucket):
    data = os.urandom(200_000)
    put = s3.put_object(Bucket=bucket, Key="a", Body=data, ServerSideEncryption="aws:kms", SSEKMSKeyId="kms-a")
    assert (put["ServerSideEncryption"], put["SSEKMSKeyId"]) == ("aws:kms", "kms-a")
    got = s3.get_object(Bucket=bucket, Key="a")
    assert got["Body"].read() == data and got["SSEKMSKeyId"] == "kms-a"
    # Without a key id the SSE-S3 key plays AWS's managed key.
    put = s3.put_object(Bucket=bucket, Key="d", Body=b"x", ServerSideEncryption="aws:kms")
    assert put["SSEKMSKeyId"] == "sse-s3"
    assert error_of(s3.put_object, Bucket=bucket, Key="n", Body=b"x", ServerSideEncryption="aws:kms",
                    SSEKMSKeyId="nope") == (400, "KMS.NotFoundException")
    assert error_of(s3.put_object, Bucket=bucket, Key="n", Body=b"x", ServerSideEncryption="AES256",
                    SSEKMSKeyId="kms-a") == (400, "InvalidArgument")
    assert error_of(s3.put_object, Bucket=bucket, Key="n", Body=b"x",
                    ServerSideEncryption="rot13")[0] == 400


def test_sse_c_needs_https_and_the_same_key(s3, tls, bucket):
    sse = customer_key()
    data = os.urandom(300_000)
    assert error_of(s3.put_object, Bucket=bucket, Key="k", Body=data, **sse) == (400, "InvalidRequest"), \
        "SSE-C over plain HTTP"
    put = tls.put_object(Bucket=bucket, Key="k", Body=data, **sse)
    md5 = base64.b64encode(hashlib.md5(sse["SSECustomerKey"]).digest()).decode()
    assert (put["SSECustomerAlgorithm"], put["SSECustomerKeyMD5"]) == ("AES256", md5)
    got = tls.get_object(Bucket=bucket, Key="k", **sse)
    assert got["Body"].read() == data and got["SSECustomerKeyMD5"] == md5
    assert tls.get_object(Bucket=bucket, Key="k", Range="bytes=70000-70009", **sse)["Body"].read() == data[70000:70010]
    assert tls.head_object(Bucket=bucket, Key="k", **sse)["ContentLength"] == len(data)
    # Without the key, with another key, or with a key whose MD5 is wrong.
    assert error_of(tls.get_object, Bucket=bucket, Key="k") == (400, "InvalidRequest")
    assert error_of(tls.head_object, Bucket=bucket, Key="k")[0] == 400
    assert error_of(tls.get_object, Bucket=bucket, Key="k", **customer_key()) == (403, "AccessDenied")
    bad_md5 = {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": base64.b64encode(sse["SSECustomerKey"]).decode(),
               "SSECustomerKeyMD5": base64.b64encode(b"0" * 16).decode()}
    assert error_of(tls.get_object, Bucket=bucket, Key="k", **bad_md5) == (400, "InvalidArgument")
    short = {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": os.urandom(16)}
    assert error_of(tls.put_object, Bucket=bucket, Key="s", Body=b"x", **short) == (400, "InvalidArgument")
    # SSE-C headers on an object that has no customer key.
    tls.put_object(Bucket=bucket, Key="plain", Body=b"p")
    assert error_of(tls.get_object, Bucket=bucket, Key="plain", **sse) == (400, "InvalidRequest")


def test_default_bucket_encryption(s3, bucket):
    assert error_of(s3.get_bucket_encryption, Bucket=bucket) == (404, "ServerSideEncryptionConfigurationNotFoundError")
    rule = {"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": "kms-b"},
            "BucketKeyEnabled": True}
    s3.put_bucket_encryption(Bucket=bucket, ServerSideEncryptionConfiguration={"Rules": [rule]})
    assert s3.get_bucket_encryption(Bucket=bucket)["ServerSideEncryptionConfiguration"]["Rules"] == [rule]
    s3.put_object(Bucket=bucket, Key="k", Body=b"hello")
    head = s3.head_object(Bucket=bucket, Key="k")
    assert (head["ServerSideEncryption"], head["SSEKMSKeyId"]) == ("aws:kms", "kms-b")
    # A request's own encryption wins over the default.
    s3.put_object(Bucket=bucket, Key="own", Body=b"hello", ServerSideEncryption="AES256")
    assert s3.head_object(Bucket=bucket, Key="own")["ServerSideEncryption"] == "AES256"
    bad = {"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": "missing"}}
    assert error_of(s3.put_bucket_encryption, Bucket=bucket,
                    ServerSideEncryptionConfiguration={"Rules": [bad]}) == (400, "KMS.NotFoundException")
    s3.delete_bucket_encryption(Bucket=bucket)
    assert error_of(s3.get_bucket_encryption, Bucket=bucket)[0] == 404
    s3.put_object(Bucket=bucket, Key="after", Body=b"hello")
    assert "ServerSideEncryption" not in s3.head_object(Bucket=bucket, Key="after")
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"hello", "earlier objects keep their keys"


def multipart(s3, bucket, key, parts, create=None, part_extra=None):
    upload = s3.create_multipart_upload(Bucket=bucket, Key=key, **(create or {}))
    done = []
    for n, data in enumerate(parts, 1):
        r = s3.upload_part(Bucket=bucket, Key=key, UploadId=upload["UploadId"], PartNumber=n, Body=data,
                           **(part_extra or {}))
        done.append({"PartNumber": n, "ETag": r["ETag"]})
    s3.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=upload["UploadId"],
                                 MultipartUpload={"Parts": done})
    return upload


def test_multipart_sse_s3_with_ranges_across_parts_and_part_numbers(s3, bucket):
    parts = [os.urandom(5 * MIB), os.urandom(5 * MIB + 7), os.urandom(100_001)]
    data = b"".join(parts)
    upload = multipart(s3, bucket, "m", parts, create={"ServerSideEncryption": "AES256"})
    assert upload["ServerSideEncryption"] == "AES256"
    assert s3.get_object(Bucket=bucket, Key="m")["Body"].read() == data
    check_ranges(s3, bucket, "m", data)
    edge = 5 * MIB
    got = s3.get_object(Bucket=bucket, Key="m", Range=f"bytes={edge - 10}-{edge + 10}")["Body"].read()
    assert got == data[edge - 10:edge + 11], "a range across the part boundary"
    for n, part in enumerate(parts, 1):
        got = s3.get_object(Bucket=bucket, Key="m", PartNumber=n)
        assert got["Body"].read() == part and got["ContentLength"] == len(part)
    attributes = s3.get_object_attributes(Bucket=bucket, Key="m", ObjectAttributes=["ObjectParts", "ObjectSize"])
    assert attributes["ObjectSize"] == len(data)
    assert [p["Size"] for p in attributes["ObjectParts"]["Parts"]] == [len(p) for p in parts], "plaintext part sizes"


def test_a_part_uploaded_twice_is_sealed_anew(s3, bucket):
    upload = s3.create_multipart_upload(Bucket=bucket, Key="k", ServerSideEncryption="AES256")
    first, second = os.urandom(1000), os.urandom(1000)
    s3.upload_part(Bucket=bucket, Key="k", UploadId=upload["UploadId"], PartNumber=1, Body=first)
    r = s3.upload_part(Bucket=bucket, Key="k", UploadId=upload["UploadId"], PartNumber=1, Body=second)
    s3.complete_multipart_upload(Bucket=bucket, Key="k", UploadId=upload["UploadId"],
                                 MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": r["ETag"]}]})
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == second


def test_multipart_sse_c_needs_the_key_on_every_part(s3, tls, bucket):
    sse = customer_key()
    parts = [os.urandom(5 * MIB), os.urandom(12_345)]
    upload = tls.create_multipart_upload(Bucket=bucket, Key="c", **sse)
    assert error_of(tls.upload_part, Bucket=bucket, Key="c", UploadId=upload["UploadId"], PartNumber=1,
                    Body=parts[0]) == (400, "InvalidRequest")
    assert error_of(tls.upload_part, Bucket=bucket, Key="c", UploadId=upload["UploadId"], PartNumber=1,
                    Body=parts[0], **customer_key()) == (403, "AccessDenied")
    tls.abort_multipart_upload(Bucket=bucket, Key="c", UploadId=upload["UploadId"])
    multipart(tls, bucket, "c", parts, create=sse, part_extra=sse)
    assert tls.get_object(Bucket=bucket, Key="c", **sse)["Body"].read() == b"".join(parts)
    got = tls.get_object(Bucket=bucket, Key="c", Range=f"bytes={5 * MIB - 3}-{5 * MIB + 2}", **sse)
    assert got["Body"].read() == b"".join(parts)[5 * MIB - 3:5 * MIB + 3]


def test_copies_decrypt_the_source_and_encrypt_the_target(s3, tls, bucket):
    data = os.urandom(2 * MIB + 3)
    s3.put_object(Bucket=bucket, Key="src", Body=data, ServerSideEncryption="AES256")
    s3.copy_object(Bucket=bucket, Key="plain", CopySource={"Bucket": bucket, "Key": "src"})
    assert "ServerSideEncryption" not in s3.head_object(Bucket=bucket, Key="plain")
    assert s3.get_object(Bucket=bucket, Key="plain")["Body"].read() == data
    s3.copy_object(Bucket=bucket, Key="kms", CopySource={"Bucket": bucket, "Key": "plain"},
                   ServerSideEncryption="aws:kms", SSEKMSKeyId="kms-a")
    assert s3.get_object(Bucket=bucket, Key="kms")["Body"].read() == data
    # Re-encrypting an object in place is a copy onto itself that changes only its encryption.
    s3.copy_object(Bucket=bucket, Key="kms", CopySource={"Bucket": bucket, "Key": "kms"}, ServerSideEncryption="AES256")
    assert s3.head_object(Bucket=bucket, Key="kms")["ServerSideEncryption"] == "AES256"
    sse = customer_key()
    tls.copy_object(Bucket=bucket, Key="c", CopySource={"Bucket": bucket, "Key": "src"}, **sse)
    assert tls.get_object(Bucket=bucket, Key="c", **sse)["Body"].read() == data
    assert error_of(tls.copy_object, Bucket=bucket, Key="c2", CopySource={"Bucket": bucket, "Key": "c"}) \
        == (400, "InvalidRequest"), "the source's customer key is missing"
    tls.copy_object(Bucket=bucket, Key="c2", CopySource={"Bucket": bucket, "Key": "c"}, **copy_source_key(sse))
    assert tls.get_object(Bucket=bucket, Key="c2")["Body"].read() == data
    # A part copied from an encrypted source into an encrypted upload.
    upload = tls.create_multipart_upload(Bucket=bucket, Key="mp", ServerSideEncryption="aws:kms", SSEKMSKeyId="kms-b")
    r = tls.upload_part_copy(Bucket=bucket, Key="mp", UploadId=upload["UploadId"], PartNumber=1,
                             CopySource={"Bucket": bucket, "Key": "c"}, CopySourceRange="bytes=10-99999",
                             **copy_source_key(sse))
    tls.complete_multipart_upload(Bucket=bucket, Key="mp", UploadId=upload["UploadId"],
                                  MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": r["CopyPartResult"]["ETag"]}]})
    got = tls.get_object(Bucket=bucket, Key="mp")
    assert got["Body"].read() == data[10:100000] and got["SSEKMSKeyId"] == "kms-b"


def store_files():
    data_dir = pathlib.Path(os.environ["SHOAL_CONF"]).parent
    return [p for p in data_dir.rglob("*") if p.is_file()]


def found_in_store(needles):
    """Which of `needles` appear in any file of the server's data directory."""
    found = set()
    for path in store_files():
        try:
            blob = path.read_bytes()
        except OSError:
            continue
        found.update(n for n in needles if n in blob)
    return found


def test_no_plaintext_reaches_the_disks(s3, tls, bucket):
    """Random (incompressible) data, so compression cannot hide it: an unencrypted control
    object proves the scan finds data where it lies, small (in the head) and large (in
    chunks); the encrypted copies of other random data must not show any 64-byte window."""
    small_plain, large_plain = os.urandom(3000), os.urandom(5 * MIB)
    secrets = {name: os.urandom(n) for name, n in [("s3", 3000), ("kms", 5 * MIB), ("c", 3000), ("mp", 6 * MIB)]}
    s3.put_object(Bucket=bucket, Key="control-small", Body=small_plain)
    s3.put_object(Bucket=bucket, Key="control-large", Body=large_plain)
    s3.put_object(Bucket=bucket, Key="s3", Body=secrets["s3"], ServerSideEncryption="AES256")
    s3.put_object(Bucket=bucket, Key="kms", Body=secrets["kms"], ServerSideEncryption="aws:kms", SSEKMSKeyId="kms-a")
    sse = customer_key()
    tls.put_object(Bucket=bucket, Key="c", Body=secrets["c"], **sse)
    mp = secrets["mp"]
    multipart(s3, bucket, "mp", [mp[:5 * MIB], mp[5 * MIB:]], create={"ServerSideEncryption": "AES256"})
    # Eight windows spread over each object, first and last included.
    def windows(blob):
        return [blob[i:i + 64] for i in range(0, len(blob) - 63, (len(blob) - 64) // 7)][:8]
    controls = {name: windows(blob) for name, blob in [("small", small_plain), ("large", large_plain)]}
    hidden = [w for blob in secrets.values() for w in windows(blob)]
    found = found_in_store([w for ws in controls.values() for w in ws] + hidden)
    # RocksDB's WAL cuts its records into 32 KiB blocks, each with a 7-byte header, so a
    # window of a value in the WAL can be split by one; a 3000-byte value crosses at most
    # one such boundary, so at most one of its windows can be split.
    for name, ws in controls.items():
        seen = sum(w in found for w in ws)
        assert seen >= len(ws) - 1, f"the scan must find unencrypted data (else it proves nothing): {name} {seen}/8"
    assert not found & set(hidden), "plaintext of an encrypted object is in the store's files"
    # The customer key itself is never stored either.
    assert not found_in_store([sse["SSECustomerKey"]])
    for key, blob in secrets.items():
        extra = sse if key == "c" else {}
        assert (tls if key == "c" else s3).get_object(Bucket=bucket, Key=key, **extra)["Body"].read() == blob
