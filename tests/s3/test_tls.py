"""S3 over HTTPS (crates/shoal/tests/s3.rs starts `shoal server` with both ports and a test
CA): boto3 and the aws CLI over TLS, aws:SecureTransport in bucket policies, trailing
checksums (what SDKs send over TLS), and a renewed certificate served without a restart."""
import json
import os
import shutil
import socket
import ssl
import subprocess
import time
import uuid

import botocore
import pytest

from conftest import client

HTTPS = os.environ.get("SHOAL_S3_HTTPS_ENDPOINT", "")
CA = os.environ.get("SHOAL_TLS_CA", "")


def _secure_client(**config):
    import boto3
    return boto3.client(
        "s3", endpoint_url=HTTPS, verify=CA, region_name="us-east-1",
        aws_access_key_id=os.environ["SHOAL_S3_ACCESS_KEY"], aws_secret_access_key=os.environ["SHOAL_S3_SECRET_KEY"],
        config=botocore.config.Config(s3={"addressing_style": "path"}, retries={"max_attempts": 3, "mode": "standard"}, **config),
    )


@pytest.fixture
def tls_bucket(s3):
    name = "tls-" + uuid.uuid4().hex[:12]
    s3.create_bucket(Bucket=name)
    yield name
    for o in s3.list_objects_v2(Bucket=name).get("Contents", []):
        s3.delete_object(Bucket=name, Key=o["Key"])
    s3.delete_bucket_policy(Bucket=name)
    s3.delete_bucket(Bucket=name)


def test_boto3_over_https_with_trailing_checksums(tls_bucket):
    c = _secure_client()
    seen = {}
    c.meta.events.register("before-send.s3.PutObject", lambda request, **_: seen.update(request.headers))
    data = os.urandom(3 << 20)
    c.put_object(Bucket=tls_bucket, Key="k", Body=data, ChecksumAlgorithm="SHA256")
    assert seen.get("X-Amz-Trailer") == b"x-amz-checksum-sha256", "over TLS the SDK sends the checksum as a trailer"
    got = c.get_object(Bucket=tls_bucket, Key="k", ChecksumMode="ENABLED")
    assert got["Body"].read() == data and "ChecksumSHA256" in got
    with pytest.raises(botocore.exceptions.SSLError):
        client(HTTPS).list_buckets()  # the test CA is not trusted by default


def test_aws_cli_smoke_over_https(tls_bucket, tmp_path):
    aws = shutil.which("aws")
    assert aws, "the aws CLI (scripts/test-env.sh installs it in the venv)"
    env = dict(os.environ, AWS_ACCESS_KEY_ID=os.environ["SHOAL_S3_ACCESS_KEY"],
               AWS_SECRET_ACCESS_KEY=os.environ["SHOAL_S3_SECRET_KEY"], AWS_DEFAULT_REGION="us-east-1")
    base = [aws, "--endpoint-url", HTTPS, "--ca-bundle", CA]
    run = lambda *args: subprocess.run(base + list(args), env=env, capture_output=True, text=True, timeout=120)
    src = tmp_path / "big.bin"
    src.write_bytes(os.urandom(20 << 20))  # multipart with the CLI's defaults (8 MiB parts)
    assert run("s3", "cp", str(src), f"s3://{tls_bucket}/big.bin").returncode == 0
    listed = run("s3", "ls", f"s3://{tls_bucket}/")
    assert listed.returncode == 0 and "big.bin" in listed.stdout
    back = tmp_path / "back.bin"
    assert run("s3", "cp", f"s3://{tls_bucket}/big.bin", str(back)).returncode == 0
    assert back.read_bytes() == src.read_bytes()
    head = json.loads(run("s3api", "head-object", "--bucket", tls_bucket, "--key", "big.bin").stdout)
    assert head["ContentLength"] == 20 << 20
    assert run("s3", "rm", f"s3://{tls_bucket}/big.bin").returncode == 0
    untrusted = subprocess.run([aws, "--endpoint-url", HTTPS, "s3", "ls"], env=env, capture_output=True, text=True, timeout=120)
    assert untrusted.returncode != 0 and "SSL" in untrusted.stderr


def test_a_policy_can_require_secure_transport(s3, tls_bucket):
    s3.put_object(Bucket=tls_bucket, Key="k", Body=b"x")
    s3.put_bucket_policy(Bucket=tls_bucket, Policy=json.dumps({"Statement": [{
        "Effect": "Deny", "Principal": "*", "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{tls_bucket}/*",
        "Condition": {"Bool": {"aws:SecureTransport": "false"}}}]}))
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.get_object(Bucket=tls_bucket, Key="k")
    assert e.value.response["Error"]["Code"] == "AccessDenied"
    assert _secure_client().get_object(Bucket=tls_bucket, Key="k")["Body"].read() == b"x"


def served_certificate():
    host, port = HTTPS.split("//")[1].split(":")
    context = ssl.create_default_context(cafile=CA)
    with socket.create_connection((host, int(port)), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname=host) as tls:
            return tls.getpeercert()


def test_a_renewed_certificate_is_served_without_a_restart():
    directory = os.environ["SHOAL_TLS_DIR"]
    before = served_certificate()["serialNumber"]

    def openssl(*args):
        subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True)

    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "renewed.key",
            "-out", "renewed.csr", "-subj", "/CN=renewed")
    openssl("x509", "-req", "-in", "renewed.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "renewed.pem", "-days", "2", "-extfile", "ext.cnf")
    # Key first: until the certificate follows, the pair does not match and the old one stays.
    os.replace(os.path.join(directory, "renewed.key"), os.path.join(directory, "server.key"))
    time.sleep(3)
    assert served_certificate()["serialNumber"] == before, "a mismatched pair is not served"
    os.replace(os.path.join(directory, "renewed.pem"), os.path.join(directory, "server.pem"))
    deadline = time.time() + 15
    while served_certificate()["serialNumber"] == before:
        assert time.time() < deadline, "the renewed certificate was not served"
        time.sleep(0.5)
    subject = dict(x[0] for x in served_certificate()["subject"])
    assert subject["commonName"] == "renewed"
    assert _secure_client().list_buckets()["Buckets"] is not None
