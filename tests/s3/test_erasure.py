"""S3 on an erasure-coded data pool (crates/shoal/tests/s3.rs starts a vstart cluster with
`--ec 4+2`). Run in two phases, named by SHOAL_EC_PHASE: `write` stores objects of 0 bytes to
64 MiB (single PUTs, a multipart upload, copies) in bucket SHOAL_EC_BUCKET and checks them
whole and by ranges; `read` runs after two OSDs were SIGKILLed and checks that every object
reads back the same, whole and by ranges, decoded from the shards left."""
import hashlib
import os
import random

from conftest import client

MiB = 1 << 20
# Sizes around the stripe unit (4 KiB), the gateway's data chunk (4 MiB) and beyond.
SIZES = [0, 1, 4095, 4096, 4097, MiB + 1, 4 * MiB, 4 * MiB + 3, 17 * MiB, 64 * MiB]
PART = 5 * MiB
PARTS = [PART, PART, PART, MiB + 7]


def content(key, size):
    """The bytes stored under `key`, the same in both phases."""
    return random.Random(key).randbytes(size)


def ranges(size):
    """Byte ranges (first, last) to read: the first byte, spans over stripe and chunk edges,
    the tail."""
    if size == 0:
        return []
    spans = [(0, 0), (size - 1, size - 1), (size // 3, min(size - 1, size // 3 + 100_000))]
    for edge in (4096, 4 * MiB, 16 * MiB):
        if edge < size:
            spans.append((edge - 5, min(size - 1, edge + 5)))
    return spans


def expected_objects():
    """Every key the write phase stores, with its bytes."""
    objects = {f"single-{size}": content(f"single-{size}", size) for size in SIZES}
    parts = [content(f"part-{n}", size) for n, size in enumerate(PARTS)]
    objects["multipart"] = b"".join(parts)
    objects["copy-of-single"] = objects[f"single-{17 * MiB}"]
    objects["copy-of-multipart"] = objects["multipart"]
    return objects


def check(s3, bucket, key, data):
    got = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    assert len(got) == len(data), f"{key}: {len(got)} bytes, not {len(data)}"
    assert hashlib.sha256(got).digest() == hashlib.sha256(data).digest(), f"{key}: other bytes"
    for first, last in ranges(len(data)):
        reply = s3.get_object(Bucket=bucket, Key=key, Range=f"bytes={first}-{last}")
        assert reply["Body"].read() == data[first:last + 1], f"{key}: range {first}-{last}"
        assert reply["ContentRange"] == f"bytes {first}-{last}/{len(data)}"


def test_the_phase_named_by_shoal_ec_phase():
    phase = os.environ["SHOAL_EC_PHASE"]
    assert phase in PHASES, f"SHOAL_EC_PHASE must be one of {sorted(PHASES)}, not {phase!r}"
    PHASES[phase](client(), os.environ["SHOAL_EC_BUCKET"])


def store_objects_of_every_size_and_read_them_back(s3, ec_bucket):
    s3.create_bucket(Bucket=ec_bucket)
    objects = expected_objects()
    for size in SIZES:
        key = f"single-{size}"
        reply = s3.put_object(Bucket=ec_bucket, Key=key, Body=objects[key])
        assert reply["ETag"] == '"%s"' % hashlib.md5(objects[key]).hexdigest()
    upload = s3.create_multipart_upload(Bucket=ec_bucket, Key="multipart")["UploadId"]
    done = []
    for n, size in enumerate(PARTS):
        part = s3.upload_part(Bucket=ec_bucket, Key="multipart", UploadId=upload, PartNumber=n + 1,
                              Body=content(f"part-{n}", size))
        done.append({"PartNumber": n + 1, "ETag": part["ETag"]})
    s3.complete_multipart_upload(Bucket=ec_bucket, Key="multipart", UploadId=upload,
                                 MultipartUpload={"Parts": done})
    for source in (f"single-{17 * MiB}", "multipart"):
        target = "copy-of-" + ("single" if source.startswith("single") else "multipart")
        s3.copy_object(Bucket=ec_bucket, Key=target, CopySource={"Bucket": ec_bucket, "Key": source})
    for key, data in objects.items():
        check(s3, ec_bucket, key, data)
    second = s3.get_object(Bucket=ec_bucket, Key="multipart", PartNumber=2)
    assert second["Body"].read() == content("part-1", PARTS[1])


def read_every_object_back_degraded(s3, ec_bucket):
    listed = {o["Key"]: o["Size"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket=ec_bucket)
              for o in page.get("Contents", [])}
    objects = expected_objects()
    assert listed == {key: len(data) for key, data in objects.items()}
    for key, data in objects.items():
        check(s3, ec_bucket, key, data)
        head = s3.head_object(Bucket=ec_bucket, Key=key)
        assert head["ContentLength"] == len(data)


PHASES = {"write": store_objects_of_every_size_and_read_them_back, "read": read_every_object_back_degraded}
