"""aws-chunked uploads with a signature per chunk (STREAMING-AWS4-HMAC-SHA256-PAYLOAD), as
the Java/Go SDKs and minio-go send them; botocore does not, so the request is built here."""
import datetime
import hashlib
import hmac
import os
import urllib.parse

import requests

REGION, SERVICE = "us-east-1", "s3"
EMPTY_SHA = hashlib.sha256(b"").hexdigest()


def _hmac(key, msg):
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


def signed_chunked_put(bucket, key, data, chunk_size=64 * 1024, tamper_chunk=None):
    endpoint = os.environ["SHOAL_S3_ENDPOINT"]
    access, secret = os.environ["SHOAL_S3_ACCESS_KEY"], os.environ["SHOAL_S3_SECRET_KEY"]
    host = urllib.parse.urlparse(endpoint).netloc
    now = datetime.datetime.now(datetime.timezone.utc)
    stamp, date = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
    scope = f"{date}/{REGION}/{SERVICE}/aws4_request"
    key_bytes = _hmac(_hmac(_hmac(_hmac(("AWS4" + secret).encode(), date), REGION), SERVICE), "aws4_request")
    chunks = [data[i:i + chunk_size] for i in range(0, len(data), chunk_size)] + [b""]

    def frame_len(n):
        return len(f"{n:x};chunk-signature=") + 64 + 2 + n + 2

    encoded_len = sum(frame_len(len(c)) for c in chunks)
    headers = {
        "host": host,
        "content-encoding": "aws-chunked",
        "content-length": str(encoded_len),
        "x-amz-content-sha256": "STREAMING-AWS4-HMAC-SHA256-PAYLOAD",
        "x-amz-date": stamp,
        "x-amz-decoded-content-length": str(len(data)),
    }
    signed = ";".join(sorted(headers))
    canonical = "\n".join([
        "PUT", f"/{bucket}/{key}", "",
        *[f"{h}:{headers[h]}" for h in sorted(headers)], "", signed, "STREAMING-AWS4-HMAC-SHA256-PAYLOAD",
    ])
    to_sign = "\n".join(["AWS4-HMAC-SHA256", stamp, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    previous = hmac.new(key_bytes, to_sign.encode(), hashlib.sha256).hexdigest()
    headers["authorization"] = (f"AWS4-HMAC-SHA256 Credential={access}/{scope}, SignedHeaders={signed}, "
                                f"Signature={previous}")
    body = b""
    for i, chunk in enumerate(chunks):
        chunk_to_sign = "\n".join(["AWS4-HMAC-SHA256-PAYLOAD", stamp, scope, previous, EMPTY_SHA,
                                   hashlib.sha256(chunk).hexdigest()])
        previous = hmac.new(key_bytes, chunk_to_sign.encode(), hashlib.sha256).hexdigest()
        sent = chunk
        if tamper_chunk == i:
            sent = bytes([chunk[0] ^ 1]) + chunk[1:]
        body += f"{len(chunk):x};chunk-signature={previous}\r\n".encode() + sent + b"\r\n"
    return requests.put(f"{endpoint}/{bucket}/{key}", data=body, headers=headers)


def test_signed_chunks_are_verified(s3, bucket):
    data = os.urandom(300 * 1024 + 17)
    r = signed_chunked_put(bucket, "streamed", data)
    assert r.status_code == 200, r.text
    assert r.headers["ETag"] == '"%s"' % hashlib.md5(data).hexdigest()
    assert s3.get_object(Bucket=bucket, Key="streamed")["Body"].read() == data
    r = signed_chunked_put(bucket, "tampered", data, tamper_chunk=2)
    assert r.status_code == 403 and "<Code>SignatureDoesNotMatch</Code>" in r.text, r.text
    assert s3.list_objects_v2(Bucket=bucket, Prefix="tampered")["KeyCount"] == 0, "a bad chunk stores nothing"
