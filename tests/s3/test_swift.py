"""Swift v1 auth (TempAuth style) with python-swiftclient: subusers and their Swift keys
made with `shoal admin`, tokens from `/auth/v1.0`, refusals for wrong keys, unknown or
removed subusers and suspended users (401, as RGW); with SHOAL_S3_ENDPOINT2, both gateways of the
cluster answer the same credentials."""
import os

import pytest
import requests
from swiftclient import client as swift
from swiftclient.exceptions import ClientException

from conftest import admin


def auth_url(endpoint=None):
    return (endpoint or os.environ["SHOAL_S3_ENDPOINT"]) + "/auth/v1.0"


@pytest.fixture
def subuser(user):
    """A subuser with full access and a Swift key; returns (name, key)."""
    uid = user[0]
    name = uid + ":swift"
    info = admin("subuser", "create", "--uid", uid, "--subuser", name, "--access", "full")
    assert {"id": name, "permissions": "full-control"} in info["subusers"]
    info = admin("key", "create", "--subuser", name, "--key-type", "swift", "--secret-key", "s3cr3t-" + uid)
    assert {"user": name, "secret_key": "s3cr3t-" + uid} in info["swift_keys"]
    yield name, "s3cr3t-" + uid
    admin("subuser", "rm", "--subuser", name)


def refused(url, name, key):
    with pytest.raises(ClientException) as e:
        swift.get_auth(url, name, key, auth_version="1.0")
    return e.value.http_status


def test_a_subuser_gets_a_storage_url_and_a_token(subuser):
    name, key = subuser
    url, token = swift.get_auth(auth_url(), name, key, auth_version="1.0")
    assert url == os.environ["SHOAL_S3_ENDPOINT"] + "/swift/v1"
    assert token.startswith("AUTH_tk")
    # The raw answer, as Swift clients read it.
    r = requests.get(auth_url().replace("/v1.0", ""), headers={"X-Auth-User": name, "X-Auth-Key": key})
    assert r.status_code == 204, r.text
    assert r.headers["X-Storage-Token"] == r.headers["X-Auth-Token"]
    assert 86000 < int(r.headers["X-Auth-Token-Expires"]) <= 86400
    endpoint2 = os.environ.get("SHOAL_S3_ENDPOINT2")
    if endpoint2:
        url2, token2 = swift.get_auth(auth_url(endpoint2), name, key, auth_version="1.0")
        assert url2 == endpoint2 + "/swift/v1" and token2.startswith("AUTH_tk")


def test_wrong_keys_and_unknown_subusers_get_401(subuser, user):
    name, key = subuser
    assert refused(auth_url(), name, key + "x") == 401
    assert refused(auth_url(), user[0] + ":nobody", key) == 401
    assert refused(auth_url(), "no-such-user:swift", key) == 401
    assert refused(auth_url(), user[0], key) == 401  # not a subuser
    r = requests.get(auth_url(), headers={"X-Auth-User": name})
    assert r.status_code == 401


def test_a_removed_key_or_subuser_and_a_suspended_user_are_refused(subuser, user):
    name, key = subuser
    admin("key", "create", "--subuser", name, "--key-type", "swift", "--secret-key", "other")
    assert refused(auth_url(), name, key) == 401
    swift.get_auth(auth_url(), name, "other", auth_version="1.0")
    admin("key", "rm", "--subuser", name)
    assert refused(auth_url(), name, "other") == 401
    admin("key", "create", "--subuser", name, "--key-type", "swift", "--secret-key", key)
    admin("user", "suspend", "--uid", user[0])
    assert refused(auth_url(), name, key) == 401  # RGW's UserSuspended
    admin("user", "enable", "--uid", user[0])
    swift.get_auth(auth_url(), name, key, auth_version="1.0")


def test_admin_refuses_bad_subusers_and_key_types(user):
    import subprocess
    def fails(*args):
        out = subprocess.run([os.environ["SHOAL_BIN"], "admin", "-c", os.environ["SHOAL_CONF"], *args],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode != 0, out.stdout
        return out.stderr
    uid = user[0]
    assert "bad subuser" in fails("subuser", "create", "--uid", uid, "--subuser", "other:swift")
    assert "bad subuser" in fails("subuser", "create", "--uid", uid, "--subuser", uid + ":a/b")
    assert "access" in fails("subuser", "create", "--uid", uid, "--subuser", uid + ":s", "--access", "root")
    assert "no subuser" in fails("key", "create", "--subuser", uid + ":ghost", "--key-type", "swift")
    assert "subuser" in fails("key", "create", "--uid", uid, "--key-type", "swift")


def test_the_account_counts_and_lists_its_containers_and_any_gateway_takes_the_token(subuser, user):
    from conftest import client, purge
    name, key = subuser
    url, token = swift.get_auth(auth_url(), name, key, auth_version="1.0")
    headers = swift.head_account(url, token)
    assert (headers["x-account-container-count"], headers["x-account-object-count"]) == ("0", "0")
    assert swift.get_account(url, token)[1] == []
    s3 = client(access_key=user[1], secret_key=user[2])
    buckets = ["sw-a-" + user[0], "sw-b-" + user[0], "zz-" + user[0]]
    try:
        for bucket in buckets:
            s3.create_bucket(Bucket=bucket)
        s3.put_object(Bucket=buckets[0], Key="k", Body=b"hello")
        headers = swift.head_account(url, token)
        assert headers["x-account-container-count"] == "3"
        assert (headers["x-account-object-count"], headers["x-account-bytes-used"]) == ("1", "5")
        listed = swift.get_account(url, token)[1]
        assert [c["name"] for c in listed] == buckets
        assert (listed[0]["count"], listed[0]["bytes"]) == (1, 5)
        assert len(listed[0]["last_modified"]) == len("2026-11-27T06:00:00.000000")
        page = lambda **q: [c["name"] for c in swift.get_account(url, token, **q)[1]]
        assert page(limit=1) == buckets[:1]
        assert page(marker=buckets[0]) == buckets[1:]
        assert page(end_marker=buckets[2]) == buckets[:2]
        assert page(prefix="sw-") == buckets[:2]
        plain = requests.get(url, headers={"X-Auth-Token": token})
        assert (plain.status_code, plain.text) == (200, "".join(b + "\n" for b in buckets))
        reverse = requests.get(url + "?reverse=true&format=json", headers={"X-Storage-Token": token})
        assert [c["name"] for c in reverse.json()] == buckets[::-1]
        assert requests.get(url + "?limit=10001", headers={"X-Auth-Token": token}).status_code == 412
        assert requests.get(url + "?limit=x", headers={"X-Auth-Token": token}).status_code == 400
        assert requests.get(url + "?prefix=nothing", headers={"X-Auth-Token": token}).status_code == 204
        # A token from one gateway is good at another of the cluster.
        endpoint2 = os.environ.get("SHOAL_S3_ENDPOINT2")
        if endpoint2:
            url2 = endpoint2 + "/swift/v1"
            assert swift.head_account(url2, token)["x-account-container-count"] == "3"
    finally:
        for bucket in buckets:
            purge(s3, bucket)


def test_bad_tokens_and_subusers_without_read_access_are_refused(subuser, user):
    name, key = subuser
    url, token = swift.get_auth(auth_url(), name, key, auth_version="1.0")
    for bad in [token + "x", token[:-2], "AUTH_tk" + token[9:], "", "AUTH_rgwtk00"]:
        r = requests.head(url, headers={"X-Auth-Token": bad} if bad else {})
        assert r.status_code == 401, bad
    writer = user[0] + ":writer"
    admin("subuser", "create", "--uid", user[0], "--subuser", writer, "--access", "write")
    admin("key", "create", "--subuser", writer, "--key-type", "swift", "--secret-key", "w")
    url_w, token_w = swift.get_auth(auth_url(), writer, "w", auth_version="1.0")
    assert requests.get(url_w, headers={"X-Auth-Token": token_w}).status_code == 403
    # Removing the subuser ends its tokens.
    admin("subuser", "rm", "--subuser", writer)
    assert requests.head(url_w, headers={"X-Auth-Token": token_w}).status_code == 401


def test_containers_are_buckets_created_counted_and_deleted_through_either_api(subuser, user):
    from conftest import client
    name, key = subuser
    url, token = swift.get_auth(auth_url(), name, key, auth_version="1.0")
    s3 = client(access_key=user[1], secret_key=user[2])
    container = "sw-c-" + user[0]
    status = {}
    swift.put_container(url, token, container, response_dict=status)
    assert status["status"] == 201
    swift.put_container(url, token, container, response_dict=status)
    assert status["status"] == 202, "already the user's"
    s3.head_bucket(Bucket=container)
    s3.put_object(Bucket=container, Key="a/b", Body=b"abc")
    headers = swift.head_container(url, token, container)
    assert (headers["x-container-object-count"], headers["x-container-bytes-used"]) == ("1", "3")
    with pytest.raises(ClientException) as e:
        swift.delete_container(url, token, container)
    assert e.value.http_status == 409, "not empty"
    s3.delete_object(Bucket=container, Key="a/b")
    swift.delete_container(url, token, container, response_dict=status)
    assert status["status"] == 204
    for call in (swift.delete_container, swift.head_container):
        with pytest.raises(ClientException) as e:
            call(url, token, container)
        assert e.value.http_status == 404
    # Another user's bucket, bad names, and a read-only subuser.
    admin_s3 = client()
    taken = "sw-taken-" + user[0]
    admin_s3.create_bucket(Bucket=taken)
    try:
        for bad, expected in [(taken, 409), ("ab", 400), ("." + container, 400), ("x" * 256, 400)]:
            with pytest.raises(ClientException) as e:
                swift.put_container(url, token, bad)
            assert e.value.http_status == expected, bad
        with pytest.raises(ClientException) as e:
            swift.head_container(url, token, taken)
        assert e.value.http_status == 403
    finally:
        admin_s3.delete_bucket(Bucket=taken)
    reader = user[0] + ":reader"
    admin("subuser", "create", "--uid", user[0], "--subuser", reader, "--access", "read")
    admin("key", "create", "--subuser", reader, "--key-type", "swift", "--secret-key", "r")
    url_r, token_r = swift.get_auth(auth_url(), reader, "r", auth_version="1.0")
    with pytest.raises(ClientException) as e:
        swift.put_container(url_r, token_r, container)
    assert e.value.http_status == 403
    admin("subuser", "rm", "--subuser", reader)


def test_objects_round_trip_through_swift_and_s3(subuser, user):
    import hashlib
    import io
    from conftest import client, purge
    name, key = subuser
    url, token = swift.get_auth(auth_url(), name, key, auth_version="1.0")
    s3 = client(access_key=user[1], secret_key=user[2])
    container = "sw-o-" + user[0]
    swift.put_container(url, token, container)
    try:
        data = bytes(range(256)) * 4097
        md5 = hashlib.md5(data).hexdigest()
        etag = swift.put_object(url, token, container, "dir/obj", data, content_type="text/x-test",
                                headers={"X-Object-Meta-Color": "blue"})
        assert etag == md5
        headers, body = swift.get_object(url, token, container, "dir/obj")
        assert body == data and headers["etag"] == md5
        assert (headers["content-type"], headers["x-object-meta-color"]) == ("text/x-test", "blue")
        assert int(headers["content-length"]) == len(data) and "last-modified" in headers
        headers, part = swift.get_object(url, token, container, "dir/obj", headers={"Range": "bytes=10-19"})
        assert part == data[10:20] and headers["content-range"] == f"bytes 10-19/{len(data)}"
        assert swift.head_object(url, token, container, "dir/obj")["content-length"] == str(len(data))
        # The same object through S3: bytes, ETag and metadata.
        got = s3.get_object(Bucket=container, Key="dir/obj")
        assert got["Body"].read() == data and got["ETag"] == f'"{md5}"'
        assert (got["ContentType"], got["Metadata"]) == ("text/x-test", {"color": "blue"})
        # And back: an S3 write read through Swift; no Content-Type stored reads as RGW's default.
        s3.put_object(Bucket=container, Key="from-s3", Body=b"s3 bytes", Metadata={"k": "v"})
        headers, body = swift.get_object(url, token, container, "from-s3")
        assert (body, headers["x-object-meta-k"]) == (b"s3 bytes", "v")
        # A chunked upload (no length known) and a wrong ETag.
        etag = swift.put_object(url, token, container, "chunked", io.BytesIO(data), chunk_size=65536)
        assert etag == md5 and swift.get_object(url, token, container, "chunked")[1] == data
        with pytest.raises(ClientException) as e:
            swift.put_object(url, token, container, "bad", b"abc", etag="0" * 32)
        assert e.value.http_status == 422
        with pytest.raises(ClientException) as e:
            swift.get_object(url, token, container, "dir/obj", headers={"Range": f"bytes={len(data)}-"})
        assert e.value.http_status == 416
        status = {}
        swift.delete_object(url, token, container, "dir/obj", response_dict=status)
        assert status["status"] == 204
        for call in (swift.delete_object, swift.get_object, swift.head_object):
            with pytest.raises(ClientException) as e:
                call(url, token, container, "dir/obj")
            assert e.value.http_status == 404
        with pytest.raises(ClientException) as e:
            swift.put_object(url, token, "no-such-" + user[0], "o", b"x")
        assert e.value.http_status == 404
    finally:
        purge(s3, container)


@pytest.mark.skipif(bool(os.environ.get("SHOAL_S3_ENDPOINT2")), reason="run once, against shoal server")
def test_swift_bench_runs_the_articles_command_without_failures(subuser, tmp_path):
    """The seed article's `swift-bench -c 64 -s 4096 -n N -g N swift.conf`, v1.0 auth, at
    N = 10,000: every PUT, GET and DELETE succeeds."""
    import re
    import subprocess
    import sys
    name, key = subuser
    conf = tmp_path / "swift.conf"
    conf.write_text(f"[bench]\nauth = {auth_url()}\nuser = {name}\nkey = {key}\nauth_version = 1.0\n")
    bench = os.path.join(os.path.dirname(sys.executable), "swift-bench")
    out = subprocess.run([bench, "-c", "64", "-s", "4096", "-n", "10000", "-g", "10000", str(conf)],
                         capture_output=True, text=True, timeout=600)
    log = out.stdout + out.stderr
    assert out.returncode == 0, log
    finals = re.findall(r"(\d+) (PUTS|GETS|DEL) \*\*FINAL\*\* \[(\d+) failures\]", log)
    assert sorted(kind for _, kind, _ in finals) == ["DEL", "GETS", "PUTS"], log
    assert all(count == "10000" and failures == "0" for count, _, failures in finals), log
