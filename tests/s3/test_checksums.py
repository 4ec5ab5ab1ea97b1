"""Additional checksums (CRC32, CRC32C, CRC64NVME, SHA1, SHA256): checked on PutObject and
UploadPart whether sent in a header or in the aws-chunked trailer, stored, and returned with
x-amz-checksum-mode: ENABLED and by GetObjectAttributes. Expected values are computed here,
independently of the server and of botocore."""
import base64
import hashlib
import zlib

import botocore
import pytest

from conftest import client


def crc(data, width, poly, init, xorout):
    """A reflected CRC, bit by bit (slow, and independent of any library)."""
    mask = (1 << width) - 1
    value = init
    for byte in data:
        value ^= byte
        for _ in range(8):
            value = (value >> 1) ^ poly if value & 1 else value >> 1
    return (value ^ xorout) & mask


def expected(algorithm, data):
    digest = {
        "CRC32": lambda: zlib.crc32(data).to_bytes(4, "big"),
        "CRC32C": lambda: crc(data, 32, 0x82F63B78, 0xFFFFFFFF, 0xFFFFFFFF).to_bytes(4, "big"),
        "CRC64NVME": lambda: crc(data, 64, 0x9A6C9329AC4BC9B5, (1 << 64) - 1, (1 << 64) - 1).to_bytes(8, "big"),
        "SHA1": lambda: hashlib.sha1(data).digest(),
        "SHA256": lambda: hashlib.sha256(data).digest(),
    }[algorithm]()
    return base64.b64encode(digest).decode()


ALGORITHMS = ["CRC32", "CRC32C", "CRC64NVME", "SHA1", "SHA256"]
# botocore computes these only with awscrt: the tests send the values they computed.
NEEDS_CRT = {"CRC32C", "CRC64NVME"}


def checksum_args(algorithm, data):
    if algorithm in NEEDS_CRT:
        return {f"Checksum{algorithm}": expected(algorithm, data)}
    return {"ChecksumAlgorithm": algorithm}


def test_the_reference_crcs_match_their_catalogue_check_values():
    assert crc(b"123456789", 32, 0x82F63B78, 0xFFFFFFFF, 0xFFFFFFFF) == 0xE3069283
    assert crc(b"123456789", 64, 0x9A6C9329AC4BC9B5, (1 << 64) - 1, (1 << 64) - 1) == 0xAE8B14860A799888


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_a_checksum_sent_in_a_header_is_checked_stored_and_shown(s3, bucket, algorithm):
    data = b"checksummed " * 1000
    put = s3.put_object(Bucket=bucket, Key="k", Body=data, **checksum_args(algorithm, data))
    value = expected(algorithm, data)
    assert put[f"Checksum{algorithm}"] == value
    head = s3.head_object(Bucket=bucket, Key="k", ChecksumMode="ENABLED")
    assert (head[f"Checksum{algorithm}"], head["ChecksumType"]) == (value, "FULL_OBJECT")
    got = s3.get_object(Bucket=bucket, Key="k", ChecksumMode="ENABLED")
    assert got[f"Checksum{algorithm}"] == value and got["Body"].read() == data
    assert f"Checksum{algorithm}" not in s3.head_object(Bucket=bucket, Key="k"), "only when asked"
    attributes = s3.get_object_attributes(Bucket=bucket, Key="k", ObjectAttributes=["Checksum", "ObjectSize"])
    assert attributes["Checksum"][f"Checksum{algorithm}"] == value


def test_a_wrong_checksum_is_refused_and_nothing_is_stored(s3, bucket):
    wrong = expected("CRC32", b"something else")
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.put_object(Bucket=bucket, Key="bad", Body=b"data", ChecksumCRC32=wrong)
    assert e.value.response["Error"]["Code"] == "BadDigest"
    assert "CRC32" in e.value.response["Error"]["Message"]
    assert s3.list_objects_v2(Bucket=bucket)["KeyCount"] == 0


@pytest.mark.parametrize("directive", ["COPY", "REPLACE"])
def test_a_copy_keeps_the_source_checksum_or_computes_the_one_asked_for(s3, bucket, directive):
    data = b"copied " * 1000
    s3.put_object(Bucket=bucket, Key="src", Body=data, ChecksumAlgorithm="SHA1")
    source = {"Bucket": bucket, "Key": "src"}
    kept = s3.copy_object(Bucket=bucket, Key="kept", CopySource=source, MetadataDirective=directive)
    assert kept["CopyObjectResult"]["ChecksumSHA1"] == expected("SHA1", data)
    assert s3.head_object(Bucket=bucket, Key="kept", ChecksumMode="ENABLED")["ChecksumSHA1"] == expected("SHA1", data)

    s3.copy_object(Bucket=bucket, Key="new", CopySource=source, MetadataDirective=directive, ChecksumAlgorithm="SHA256")
    head = s3.head_object(Bucket=bucket, Key="new", ChecksumMode="ENABLED")
    assert head["ChecksumSHA256"] == expected("SHA256", data) and "ChecksumSHA1" not in head


def force_trailer(params, **_):
    """Makes botocore send its checksum in the aws-chunked trailer, as it does over HTTPS."""
    algorithm = params["context"].get("checksum", {}).get("request_algorithm")
    if isinstance(algorithm, dict):
        algorithm["in"] = "trailer"


@pytest.mark.parametrize("algorithm", ["CRC32", "SHA256"])
def test_a_checksum_sent_in_the_trailer_is_checked_and_stored(bucket, algorithm):
    trailing = client()
    trailing.meta.events.register("before-call.s3.PutObject", force_trailer)
    trailing.meta.events.register("before-call.s3.UploadPart", force_trailer)
    data = b"trailer " * 5000
    trailing.put_object(Bucket=bucket, Key="t", Body=data, ChecksumAlgorithm=algorithm)
    head = trailing.head_object(Bucket=bucket, Key="t", ChecksumMode="ENABLED")
    assert head[f"Checksum{algorithm}"] == expected(algorithm, data)
    upload = trailing.create_multipart_upload(Bucket=bucket, Key="m", ChecksumAlgorithm=algorithm)
    part = trailing.upload_part(Bucket=bucket, Key="m", UploadId=upload["UploadId"], PartNumber=1, Body=data,
                                ChecksumAlgorithm=algorithm)
    assert part[f"Checksum{algorithm}"] == expected(algorithm, data)
    trailing.abort_multipart_upload(Bucket=bucket, Key="m", UploadId=upload["UploadId"])


def test_a_wrong_checksum_in_the_trailer_is_refused(bucket):
    import unittest.mock
    import botocore.httpchecksum as hc

    class Wrong(hc.CrtCrc32Checksum if hc.HAS_CRT else hc.Crc32Checksum):
        def b64digest(self):
            return expected("CRC32", b"not the data")

    trailing = client()
    trailing.meta.events.register("before-call.s3.PutObject", force_trailer)
    with unittest.mock.patch.dict(hc._CHECKSUM_CLS, {"crc32": Wrong}):
        with pytest.raises(botocore.exceptions.ClientError) as e:
            trailing.put_object(Bucket=bucket, Key="w", Body=b"data" * 100, ChecksumAlgorithm="CRC32")
    assert e.value.response["Error"]["Code"] == "BadDigest"
    assert trailing.list_objects_v2(Bucket=bucket)["KeyCount"] == 0


def test_a_part_checksum_is_checked(s3, bucket):
    upload = s3.create_multipart_upload(Bucket=bucket, Key="m")
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.upload_part(Bucket=bucket, Key="m", UploadId=upload["UploadId"], PartNumber=1, Body=b"part",
                       ChecksumSHA1=expected("SHA1", b"other"))
    assert e.value.response["Error"]["Code"] == "BadDigest"
    part = s3.upload_part(Bucket=bucket, Key="m", UploadId=upload["UploadId"], PartNumber=1, Body=b"part",
                          **checksum_args("CRC32C", b"part"))
    assert part["ChecksumCRC32C"] == expected("CRC32C", b"part")
    s3.abort_multipart_upload(Bucket=bucket, Key="m", UploadId=upload["UploadId"])


@pytest.mark.parametrize("algorithm", ["CRC32C", "SHA256"])
def test_a_multipart_object_gets_the_composite_of_its_part_checksums(s3, bucket, algorithm):
    parts = [b"a" * (5 << 20), b"tail of the object"]
    upload = s3.create_multipart_upload(Bucket=bucket, Key="m", ChecksumAlgorithm=algorithm)
    done = []
    for n, data in enumerate(parts, 1):
        r = s3.upload_part(Bucket=bucket, Key="m", UploadId=upload["UploadId"], PartNumber=n, Body=data,
                           **{f"Checksum{algorithm}": expected(algorithm, data)})
        done.append({"PartNumber": n, "ETag": r["ETag"]})
    listed = s3.list_parts(Bucket=bucket, Key="m", UploadId=upload["UploadId"])["Parts"]
    assert [p[f"Checksum{algorithm}"] for p in listed] == [expected(algorithm, d) for d in parts]
    s3.complete_multipart_upload(Bucket=bucket, Key="m", UploadId=upload["UploadId"], MultipartUpload={"Parts": done})
    # The algorithm over the concatenated binary part checksums, then "-<parts>".
    joined = b"".join(base64.b64decode(expected(algorithm, d)) for d in parts)
    composite = f"{expected(algorithm, joined)}-2"
    head = s3.head_object(Bucket=bucket, Key="m", ChecksumMode="ENABLED")
    assert head[f"Checksum{algorithm}"] == composite and head["ChecksumType"] == "COMPOSITE"
    got = s3.get_object(Bucket=bucket, Key="m", ChecksumMode="ENABLED")
    assert got[f"Checksum{algorithm}"] == composite
    assert got["Body"].read() == b"".join(parts)
