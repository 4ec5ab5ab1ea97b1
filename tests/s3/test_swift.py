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
        rolled = requests.get(url + "?delimiter=-&format=json", headers={"X-Auth-Token": token}).json()
        assert rolled == [{"subdir": "sw-"}, {"subdir": "zz-"}]
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
        # Conditional reads: If-Match, If-None-Match (bare or quoted ETags), If-Modified-Since.
        obj = f"{url}/{container}/dir/obj"
        cond = lambda **h: requests.get(obj, headers={"X-Auth-Token": token, **h}).status_code
        assert (cond(**{"If-Match": md5}), cond(**{"If-Match": "0" * 32})) == (200, 412)
        assert (cond(**{"If-None-Match": f'"{md5}"'}), cond(**{"If-None-Match": "0" * 32})) == (304, 200)
        assert cond(**{"If-Modified-Since": "Fri, 01 Jan 2100 00:00:00 GMT"}) == 304
        assert cond(**{"If-Unmodified-Since": "Thu, 01 Jan 1970 00:00:00 GMT"}) == 412
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


def login(subuser):
    name, key = subuser
    return swift.get_auth(auth_url(), name, key, auth_version="1.0")


@pytest.fixture
def other_subuser():
    """A second user with a full-access subuser; returns (uid, subuser, key)."""
    import uuid
    uid = "u-" + uuid.uuid4().hex[:8]
    admin("user", "create", "--uid", uid, "--display-name", "Other " + uid)
    admin("subuser", "create", "--uid", uid, "--subuser", uid + ":swift", "--access", "full")
    admin("key", "create", "--subuser", uid + ":swift", "--key-type", "swift", "--secret-key", "k-" + uid)
    yield uid, uid + ":swift", "k-" + uid
    admin("user", "rm", "--uid", uid)


@pytest.fixture
def container(subuser, user):
    """A container of the subuser's user, emptied and removed afterwards."""
    from conftest import client, purge
    url, token = login(subuser)
    name = "sw-" + user[0]
    swift.put_container(url, token, name)
    yield name
    purge(client(access_key=user[1], secret_key=user[2]), name)


def test_container_listings_in_every_format_with_paging_prefix_delimiter_and_path(subuser, container):
    import xml.etree.ElementTree as ET
    url, token = login(subuser)
    names = ["a.txt", "b/1", "b/2", "b/c/3", "d"]
    for n in names:
        swift.put_object(url, token, container, n, n.encode(), content_type="text/x-" + n[0])
    _, listed = swift.get_container(url, token, container)
    assert [o["name"] for o in listed] == names
    first = listed[0]
    assert (first["bytes"], first["hash"], first["content_type"]) == (5, hashlib_md5(b"a.txt"), "text/x-a")
    assert len(first["last_modified"]) == len("2026-11-27T06:00:00.000000")
    page = lambda **q: [o.get("name", o.get("subdir")) for o in swift.get_container(url, token, container, **q)[1]]
    assert page(limit=2) == names[:2]
    assert page(marker="b/1", limit=2) == ["b/2", "b/c/3"]
    assert page(marker="a.txt", end_marker="b/c/3") == ["b/1", "b/2"]
    assert page(prefix="b/") == ["b/1", "b/2", "b/c/3"]
    assert page(delimiter="/") == ["a.txt", "b/", "d"]
    assert page(prefix="b/", delimiter="/") == ["b/1", "b/2", "b/c/"]
    assert page(path="b") == ["b/1", "b/2"]
    # Everything swiftclient pages through with full_listing.
    assert [o["name"] for o in swift.get_container(url, token, container, limit=2, full_listing=True)[1]] == names
    get = lambda q, **h: requests.get(f"{url}/{container}{q}", headers={"X-Auth-Token": token, **h})
    assert get("").text == "".join(n + "\n" for n in names)
    assert [o["name"] for o in get("?reverse=on&format=json&limit=2").json()] == ["d", "b/c/3"]
    assert [o["name"] for o in get("?reverse=on&format=json&marker=b/2").json()] == ["b/1", "a.txt"]
    assert [o["name"] for o in get("", Accept="application/json").json()] == names
    xml = get("?format=xml&delimiter=/")
    assert xml.headers["content-type"].startswith("application/xml")
    root = ET.fromstring(xml.content)
    assert (root.tag, root.get("name")) == ("container", container)
    assert [e.findtext("name") for e in root] == ["a.txt", "b/", "d"]
    assert root[0].findtext("hash") == hashlib_md5(b"a.txt") and root[1].tag == "subdir"
    account = ET.fromstring(requests.get(url + "?format=xml", headers={"X-Auth-Token": token}).content)
    assert account.tag == "account" and container in [c.findtext("name") for c in account]
    assert get("?prefix=zzz").status_code == 204
    assert get("?prefix=zzz&format=json").json() == []
    assert get("?limit=10001").status_code == 412
    assert get("?delimiter=ab").status_code == 400


def hashlib_md5(data):
    import hashlib
    return hashlib.md5(data).hexdigest()


def test_metadata_is_posted_to_account_container_and_object_within_swifts_limits(subuser, container):
    url, token = login(subuser)
    status = {}
    swift.post_account(url, token, {"X-Account-Meta-Team": "storage"}, response_dict=status)
    assert status["status"] == 204
    assert swift.head_account(url, token)["x-account-meta-team"] == "storage"
    swift.post_account(url, token, {"X-Remove-Account-Meta-Team": "x"})
    assert "x-account-meta-team" not in swift.head_account(url, token)
    swift.post_container(url, token, container, {"X-Container-Meta-Color": "red", "X-Container-Meta-Size": "9"},
                         response_dict=status)
    assert status["status"] == 204
    headers = swift.head_container(url, token, container)
    assert (headers["x-container-meta-color"], headers["x-container-meta-size"]) == ("red", "9")
    swift.post_container(url, token, container, {"X-Container-Meta-Color": ""})
    headers = swift.head_container(url, token, container)
    assert "x-container-meta-color" not in headers and headers["x-container-meta-size"] == "9"
    swift.put_object(url, token, container, "o", b"data", content_type="text/plain",
                     headers={"X-Object-Meta-A": "1", "X-Object-Meta-B": "2"})
    swift.post_object(url, token, container, "o", {"X-Object-Meta-C": "3", "Content-Type": "text/x-new"},
                      response_dict=status)
    assert status["status"] == 202
    headers, body = swift.get_object(url, token, container, "o")
    assert body == b"data" and headers["content-type"] == "text/x-new"
    assert headers["x-object-meta-c"] == "3" and "x-object-meta-a" not in headers, "POST replaces the metadata"
    # Swift's limits: 90 items, 128-byte names, 256-byte values, 4 KiB in all.
    too_many = {f"X-Object-Meta-K{i}": "v" for i in range(91)}
    long_name = {"X-Object-Meta-" + "n" * 129: "v"}
    long_value = {"X-Object-Meta-N": "v" * 257}
    too_big = {f"X-Object-Meta-K{i:02}": "v" * 250 for i in range(17)}
    fits = {f"X-Object-Meta-K{i:02}": "v" * 250 for i in range(15)}
    for bad in (too_many, long_name, long_value, too_big):
        for call in (lambda h: swift.put_object(url, token, container, "m", b"x", headers=h),
                     lambda h: swift.post_object(url, token, container, "o", h),
                     lambda h: swift.post_container(url, token, container,
                                                    {k.replace("Object", "Container"): v for k, v in h.items()})):
            with pytest.raises(ClientException) as e:
                call(bad)
            assert e.value.http_status == 400
    swift.put_object(url, token, container, "m", b"x", headers=fits)
    assert len([h for h in swift.head_object(url, token, container, "m") if h.startswith("x-object-meta-")]) == 15


def test_concurrent_metadata_posts_to_a_container_and_its_account_all_survive(subuser, container):
    import concurrent.futures
    url, token = login(subuser)
    names = [f"k{i}" for i in range(12)]
    with concurrent.futures.ThreadPoolExecutor(len(names)) as pool:
        list(pool.map(lambda n: swift.post_container(url, token, container, {"X-Container-Meta-" + n: n}), names))
        list(pool.map(lambda n: swift.post_account(url, token, {"X-Account-Meta-" + n: n}), names))
    try:
        container_meta = swift.head_container(url, token, container)
        account_meta = swift.head_account(url, token)
        assert [n for n in names if container_meta.get("x-container-meta-" + n) != n] == []
        assert [n for n in names if account_meta.get("x-account-meta-" + n) != n] == []
    finally:
        swift.post_account(url, token, {"X-Remove-Account-Meta-" + n: "x" for n in names})


def test_copy_and_x_copy_from_keep_bytes_and_merge_metadata(subuser, container):
    url, token = login(subuser)
    swift.put_object(url, token, container, "src", b"source bytes", content_type="text/x-src",
                     headers={"X-Object-Meta-A": "1"})
    status = {}
    swift.copy_object(url, token, container, "src", f"/{container}/dst", headers={"X-Object-Meta-B": "2"},
                      response_dict=status)
    assert status["status"] == 201
    assert status["headers"]["x-copied-from"] == f"{container}/src"
    headers, body = swift.get_object(url, token, container, "dst")
    assert body == b"source bytes" and headers["content-type"] == "text/x-src"
    assert (headers["x-object-meta-a"], headers["x-object-meta-b"]) == ("1", "2")
    swift.put_object(url, token, container, "dst2", b"", headers={"X-Copy-From": f"/{container}/src",
                                                                  "X-Fresh-Metadata": "true"})
    headers, body = swift.get_object(url, token, container, "dst2")
    assert body == b"source bytes" and "x-object-meta-a" not in headers
    for bad, expected in [(f"/{container}/missing", 404), (f"/{container}", 412), (f"/{container}/../x", 400)]:
        with pytest.raises(ClientException) as e:
            swift.put_object(url, token, container, "dst3", b"", headers={"X-Copy-From": bad})
        assert e.value.http_status == expected, bad


def test_container_acls_let_another_user_and_anonymous_readers_in(subuser, container, other_subuser):
    url, token = login(subuser)
    other_url, other_token = swift.get_auth(auth_url(), other_subuser[1], other_subuser[2], auth_version="1.0")
    swift.put_object(url, token, container, "shared", b"shared bytes")

    def status_of(call):
        try:
            call()
            return 200
        except ClientException as e:
            return e.http_status

    other_get = lambda: swift.get_object(other_url, other_token, container, "shared")
    other_put = lambda: swift.put_object(other_url, other_token, container, "from-other", b"hi")
    other_list = lambda: swift.get_container(other_url, other_token, container)
    assert (status_of(other_get), status_of(other_put), status_of(other_list)) == (403, 403, 403)
    swift.post_container(url, token, container, {"X-Container-Read": other_subuser[0],
                                                 "X-Container-Write": other_subuser[1]})
    headers = swift.head_container(url, token, container)
    assert (headers["x-container-read"], headers["x-container-write"]) == (other_subuser[0], other_subuser[1])
    assert other_get()[1] == b"shared bytes"
    assert [o["name"] for o in other_list()[1]] == ["shared"]
    other_put()
    assert swift.get_object(url, token, container, "from-other")[1] == b"hi"
    assert "x-container-read" not in swift.head_container(other_url, other_token, container), "ACLs are the owner's"
    # Anonymous readers: .r:* reads objects, .rlistings also lists.
    anonymous = lambda path: requests.get(f"{url}/{container}{path}")
    assert anonymous("/shared").status_code == 401
    swift.post_container(url, token, container, {"X-Container-Read": ".r:*"})
    assert anonymous("/shared").content == b"shared bytes"
    assert anonymous("").status_code == 401
    assert requests.put(f"{url}/{container}/anon", data=b"x").status_code == 401
    swift.post_container(url, token, container, {"X-Container-Read": ".r:*,.rlistings"})
    assert anonymous("?format=json").json()[0]["name"] == "from-other"
    swift.post_container(url, token, container, {"X-Container-Read": ".r:.example.com"})
    assert requests.get(f"{url}/{container}/shared", headers={"Referer": "https://www.example.com/p"}).status_code == 200
    assert requests.get(f"{url}/{container}/shared", headers={"Referer": "https://evil.org/"}).status_code == 401
    for bad in [".r:", ".bad"]:
        with pytest.raises(ClientException) as e:
            swift.post_container(url, token, container, {"X-Container-Read": bad})
        assert e.value.http_status == 400
    with pytest.raises(ClientException) as e:
        swift.post_container(url, token, container, {"X-Container-Write": ".r:*"})
    assert e.value.http_status == 400
    swift.post_container(url, token, container, {"X-Remove-Container-Read": "x", "X-Remove-Container-Write": "x"})
    assert (status_of(other_get), anonymous("/shared").status_code) == (403, 401)


def test_temp_urls_valid_expired_and_tampered(subuser, container):
    import hmac
    import time
    url, token = login(subuser)
    swift.put_object(url, token, container, "t", b"temp bytes")
    swift.post_account(url, token, {"X-Account-Meta-Temp-URL-Key": "mykey"})
    try:
        base = os.environ["SHOAL_S3_ENDPOINT"]
        path = f"/swift/v1/{container}/t"

        def signed(method, expires, key="mykey", digest="sha256", p=path):
            sig = hmac.new(key.encode(), f"{method}\n{expires}\n{p}".encode(), digest).hexdigest()
            return f"{base}{p}?temp_url_sig={sig}&temp_url_expires={expires}"

        later = int(time.time()) + 300
        assert requests.get(signed("GET", later)).content == b"temp bytes"
        assert requests.get(signed("GET", later, digest="sha1")).content == b"temp bytes"
        assert requests.head(signed("GET", later)).status_code == 200
        assert requests.get(signed("GET", int(time.time()) - 1)).status_code == 401, "expired"
        assert requests.get(signed("GET", later, key="other")).status_code == 401
        assert requests.get(signed("GET", later).replace("temp_url_expires=", "temp_url_expires=1")).status_code == 401
        assert requests.get(signed("PUT", later)).status_code == 401, "a PUT signature does not GET"
        put = requests.put(signed("PUT", later, p=f"/swift/v1/{container}/uploaded"), data=b"via temp url")
        assert put.status_code == 201, put.text
        assert swift.get_object(url, token, container, "uploaded")[1] == b"via temp url"
        # The container's key signs too.
        swift.post_container(url, token, container, {"X-Container-Meta-Temp-URL-Key": "ckey"})
        assert requests.get(signed("GET", later, key="ckey")).content == b"temp bytes"
    finally:
        swift.post_account(url, token, {"X-Remove-Account-Meta-Temp-URL-Key": "x"})


def test_x_delete_after_expires_objects_and_bad_times_are_refused(subuser, container):
    import time
    url, token = login(subuser)
    swift.put_object(url, token, container, "short", b"gone soon", headers={"X-Delete-After": "2"})
    at = int(swift.head_object(url, token, container, "short")["x-delete-at"])
    assert 0 < at - time.time() <= 3
    swift.put_object(url, token, container, "later", b"stays", headers={"X-Delete-At": str(int(time.time()) + 3600)})
    swift.put_object(url, token, container, "cancelled", b"stays too", headers={"X-Delete-After": "2"})
    swift.post_object(url, token, container, "cancelled", {"X-Remove-Delete-At": "x"})
    for bad in [{"X-Delete-After": "soon"}, {"X-Delete-At": "1"}]:
        with pytest.raises(ClientException) as e:
            swift.put_object(url, token, container, "bad", b"x", headers=bad)
        assert e.value.http_status == 400
    time.sleep(3)
    with pytest.raises(ClientException) as e:
        swift.get_object(url, token, container, "short")
    assert e.value.http_status == 404
    assert swift.get_object(url, token, container, "later")[1] == b"stays"
    assert swift.get_object(url, token, container, "cancelled")[1] == b"stays too"
    # The expired object is removed, not only hidden.
    deadline = time.time() + 10
    while "short" in [o["name"] for o in swift.get_container(url, token, container)[1]] and time.time() < deadline:
        time.sleep(0.2)
    assert [o["name"] for o in swift.get_container(url, token, container)[1]] == ["cancelled", "later"]


def test_expired_objects_are_removed_unread_and_deleting_one_answers_404(subuser, container):
    """The expirer (rgw_objexp_gc_interval, 1 s here) removes objects nobody reads; an
    expired object is absent to DELETE as to GET."""
    import time
    url, token = login(subuser)
    for name in ["unread", "deleted"]:
        swift.put_object(url, token, container, name, b"short-lived", headers={"X-Delete-After": "1"})
    swift.put_object(url, token, container, "kept", b"stays")
    time.sleep(2.5)
    with pytest.raises(ClientException) as e:
        swift.delete_object(url, token, container, "deleted")
    assert e.value.http_status == 404
    deadline = time.time() + 15
    names = lambda: [o["name"] for o in swift.get_container(url, token, container)[1]]
    while names() != ["kept"] and time.time() < deadline:
        time.sleep(0.3)
    assert names() == ["kept"]


def test_bulk_delete_info_and_bad_names(subuser, container):
    url, token = login(subuser)
    for n in ["x1", "x2", "dir/x3"]:
        swift.put_object(url, token, container, n, b"x")
    body = "\n".join([f"/{container}/x1", f"/{container}/dir%2Fx3", f"/{container}/missing", f"/{container}/x2"])
    r = requests.post(f"{url}?bulk-delete", data=body, headers={"X-Auth-Token": token, "Accept": "application/json"})
    assert r.status_code == 200, r.text
    result = r.json()
    assert (result["Number Deleted"], result["Number Not Found"], result["Errors"]) == (3, 1, [])
    assert swift.get_container(url, token, container)[1] == []
    # A body over the 64 KiB cap on unsigned bodies: the token is checked before it is read.
    many = "\n".join(f"/{container}/missing-{i:06}-" + "x" * 40 for i in range(2000))
    r = requests.post(f"{url}?bulk-delete", data=many, headers={"X-Auth-Token": token, "Accept": "application/json"})
    assert r.status_code == 200 and r.json()["Number Not Found"] == 2000, r.text[:300]
    info = requests.get(os.environ["SHOAL_S3_ENDPOINT"] + "/info").json()
    assert info["slo"]["max_manifest_segments"] == 1000 and "bulk_delete" in info and "tempurl" in info
    assert info["swift"]["max_meta_count"] == 90
    # Names that climb out of their container, or are not UTF-8, are refused (sent as they
    # are: requests would resolve the dot segments).
    for path, expected in [("a/../b", 400), ("%2E%2E", 400), ("./a", 400), ("%FF", 412), ("n" * 1025, 400)]:
        assert raw_put(url, token, f"{container}/{path}") == expected, path


def raw_put(url, token, path):
    """PUTs b"x" at url/path with the path exactly as given; returns the status."""
    import http.client
    import urllib.parse
    parsed = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=30)
    try:
        conn.request("PUT", f"{parsed.path}/{path}", body=b"x", headers={"X-Auth-Token": token})
        return conn.getresponse().status
    finally:
        conn.close()


def swift_cli(subuser, *args, cwd=None):
    import subprocess
    import sys
    name, key = subuser
    cli = os.path.join(os.path.dirname(sys.executable), "swift")
    out = subprocess.run([cli, "-A", auth_url(), "-U", name, "-K", key, *args], capture_output=True, text=True,
                         timeout=600, cwd=cwd)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


@pytest.mark.parametrize("kind", ["slo", "dlo"])
def test_100_mib_large_objects_in_5_mib_segments_through_the_swift_cli(subuser, container, tmp_path, kind):
    import hashlib
    data = os.urandom(1 << 20) * 100
    (tmp_path / "big").write_bytes(data)
    flags = ["--use-slo"] if kind == "slo" else []
    swift_cli(subuser, "upload", container, "big", "-S", str(5 << 20), *flags, cwd=tmp_path)
    url, token = login(subuser)
    headers = swift.head_object(url, token, container, "big")
    assert int(headers["content-length"]) == len(data)
    assert ("x-static-large-object" in headers) == (kind == "slo")
    assert ("x-object-manifest" in headers) == (kind == "dlo")
    segments = swift.get_container(url, token, container + "_segments")[1]
    assert len(segments) == 20 and all(s["bytes"] == 5 << 20 for s in segments)
    expected_etag = hashlib.md5("".join(s["hash"] for s in segments).encode()).hexdigest()
    assert headers["etag"].strip('"') == expected_etag
    swift_cli(subuser, "download", container, "big", "-o", str(tmp_path / "back"))
    assert hashlib.sha256((tmp_path / "back").read_bytes()).digest() == hashlib.sha256(data).digest()
    # A range across a segment boundary.
    start = (5 << 20) - 10
    headers, part = swift.get_object(url, token, container, "big", headers={"Range": f"bytes={start}-{start + 19}"})
    assert part == data[start:start + 20] and headers["content-range"] == f"bytes {start}-{start + 19}/{len(data)}"
    if kind == "slo":
        _, manifest = swift.get_object(url, token, container, "big", query_string="multipart-manifest=get")
        import json
        listed = json.loads(manifest)
        assert [m["name"] for m in listed] == [f"/{container}_segments/{s['name']}" for s in segments]
    swift_cli(subuser, "delete", container, "big")
    assert swift.get_container(url, token, container)[1] == []
    assert swift.get_container(url, token, container + "_segments")[1] == [], "the segments go with the manifest"
    swift_cli(subuser, "delete", container + "_segments")


def test_a_static_large_object_reads_whole_through_s3(subuser, container, user):
    """S3 GET of a static large object's manifest answers with its segments laid end to
    end (as RGW does), ranges included; Swift still reads the manifest itself on request."""
    import json
    from conftest import client
    url, token = login(subuser)
    blobs = [os.urandom(1000), os.urandom(3000), os.urandom(10)]
    for i, blob in enumerate(blobs):
        swift.put_object(url, token, container, f"seg/{i}", blob)
    manifest = json.dumps([{"path": f"/{container}/seg/{i}"} for i in range(len(blobs))])
    r = requests.put(f"{url}/{container}/slo?multipart-manifest=put", data=manifest, headers={"X-Auth-Token": token})
    assert r.status_code == 201, r.text
    whole = b"".join(blobs)
    s3 = client(access_key=user[1], secret_key=user[2])
    got = s3.get_object(Bucket=container, Key="slo")
    assert got["Body"].read() == whole and got["ContentLength"] == len(whole)
    assert got["ETag"] == swift.head_object(url, token, container, "slo")["etag"]
    head = s3.head_object(Bucket=container, Key="slo")
    assert (head["ContentLength"], head["ETag"]) == (len(whole), got["ETag"])
    part = s3.get_object(Bucket=container, Key="slo", Range="bytes=900-1099")
    assert part["Body"].read() == whole[900:1100] and part["ContentRange"] == f"bytes 900-1099/{len(whole)}"
    stored = requests.get(f"{url}/{container}/slo?multipart-manifest=get", headers={"X-Auth-Token": token})
    assert [s["bytes"] for s in stored.json()] == [len(b) for b in blobs]


def test_malformed_manifests_and_bad_segments_are_refused(subuser, container):
    import json
    url, token = login(subuser)
    swift.put_object(url, token, container, "seg", b"12345")
    seg_etag = hashlib_md5(b"12345")
    put = lambda manifest: requests.put(f"{url}/{container}/m?multipart-manifest=put", data=manifest,
                                        headers={"X-Auth-Token": token})
    for bad in ["not json", "[]", "{}", json.dumps([{"path": f"/{container}/seg", "bogus": 1}]),
                json.dumps([{"path": "nocontainer"}])]:
        assert put(bad).status_code == 400, bad
    for segment, why in [({"path": f"/{container}/missing"}, "404"),
                         ({"path": f"/{container}/seg", "etag": "0" * 32}, "Etag Mismatch"),
                         ({"path": f"/{container}/seg", "size_bytes": 6}, "Size Mismatch")]:
        r = put(json.dumps([segment]))
        assert r.status_code == 400 and why in r.text, r.text
    r = put(json.dumps([{"path": f"/{container}/seg", "etag": seg_etag, "size_bytes": 5}] * 2))
    assert r.status_code == 201, r.text
    headers, body = swift.get_object(url, token, container, "m")
    assert body == b"1234512345" and headers["etag"].strip('"') == hashlib_md5((seg_etag * 2).encode())
