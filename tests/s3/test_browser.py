"""What browsers do: CORS (the configuration API, preflights and actual requests answered
from a bucket's rules, a real headless Chromium uploading and reading across origins) and
POST uploads of HTML forms with a signed policy."""
import http.server
import json
import os
import shutil
import subprocess
import tempfile
import threading

import botocore
import pytest
import requests

from conftest import client

RULES = [{
    "AllowedOrigins": ["https://app.example.com", "http://*.example.org"],
    "AllowedMethods": ["PUT", "GET"],
    "AllowedHeaders": ["content-type", "x-amz-*"],
    "ExposeHeaders": ["ETag"],
    "MaxAgeSeconds": 600,
}]


def code_of(call, **kwargs):
    with pytest.raises(botocore.exceptions.ClientError) as e:
        call(**kwargs)
    return e.value.response["Error"]["Code"]


def test_cors_configuration_put_get_delete(s3, bucket):
    assert code_of(s3.get_bucket_cors, Bucket=bucket) == "NoSuchCORSConfiguration"
    s3.put_bucket_cors(Bucket=bucket, CORSConfiguration={"CORSRules": RULES})
    assert s3.get_bucket_cors(Bucket=bucket)["CORSRules"] == RULES
    bad = [{"AllowedOrigins": ["*"], "AllowedMethods": ["PATCH"]}]
    assert code_of(s3.put_bucket_cors, Bucket=bucket, CORSConfiguration={"CORSRules": bad}) == "InvalidRequest"
    s3.delete_bucket_cors(Bucket=bucket)
    assert code_of(s3.get_bucket_cors, Bucket=bucket) == "NoSuchCORSConfiguration"


def test_preflights_and_actual_requests_follow_the_rules(s3, bucket):
    base = os.environ["SHOAL_S3_ENDPOINT"]
    url = f"{base}/{bucket}/k"
    ask = {"Origin": "https://app.example.com", "Access-Control-Request-Method": "PUT",
           "Access-Control-Request-Headers": "Content-Type, X-Amz-Date"}
    r = requests.options(url, headers=ask)
    assert r.status_code == 403 and "CORS is not enabled" in r.text
    s3.put_bucket_cors(Bucket=bucket, CORSConfiguration={"CORSRules": RULES})
    r = requests.options(url, headers=ask)
    assert r.status_code == 200, r.text
    assert r.headers["Access-Control-Allow-Origin"] == "https://app.example.com"
    assert r.headers["Access-Control-Allow-Methods"] == "PUT, GET"
    assert r.headers["Access-Control-Allow-Headers"] == "content-type, x-amz-date"
    assert r.headers["Access-Control-Max-Age"] == "600"
    assert r.headers["Access-Control-Expose-Headers"] == "ETag"
    sub = requests.options(url, headers=dict(ask, Origin="http://a.example.org"))
    assert sub.headers["Access-Control-Allow-Origin"] == "http://a.example.org"
    for refused in [dict(ask, Origin="https://evil.example.com"), dict(ask, **{"Access-Control-Request-Method": "DELETE"}),
                    dict(ask, **{"Access-Control-Request-Headers": "authorization"})]:
        r = requests.options(url, headers=refused)
        assert r.status_code == 403 and "<Code>AccessForbidden</Code>" in r.text, refused
        assert "Access-Control-Allow-Origin" not in r.headers
    assert requests.options(url).status_code == 400, "no Origin"
    assert requests.options(f"{base}/no-such-bucket-cors/k", headers=ask).status_code == 404
    s3.put_object(Bucket=bucket, Key="k", Body=b"x")
    got = requests.get(url, headers={"Origin": "https://app.example.com"})
    assert got.status_code == 403, "CORS does not grant access, only shows answers"
    assert got.headers["Access-Control-Allow-Origin"] == "https://app.example.com"
    assert "Access-Control-Allow-Origin" not in requests.get(url, headers={"Origin": "https://evil.example.com"}).headers


class Page(http.server.BaseHTTPRequestHandler):
    body = b""

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.end_headers()
        self.wfile.write(Page.body)

    def log_message(self, *args):
        pass


PAGE = """<!doctype html><html><body><pre id="out">running</pre><script>
async function attempt(url, init) {
  try { const r = await fetch(url, init); return [r.status, await r.text()]; }
  catch (e) { return "blocked"; }
}
async function run() {
  const urls = %s;
  const out = {};
  out.put = await attempt(urls.put, {method: "PUT", body: "from the browser", headers: {"Content-Type": "text/plain"}});
  out.get = await attempt(urls.get);
  out.denied_put = await attempt(urls.denied_put, {method: "PUT", body: "no", headers: {"Content-Type": "text/plain"}});
  out.denied_get = await attempt(urls.denied_get);
  document.getElementById("out").textContent = JSON.stringify(out);
}
run();
</script></body></html>"""


def test_a_browser_uploads_and_reads_where_the_rules_allow_and_is_stopped_where_they_do_not(s3, bucket):
    chromium = shutil.which("chromium")
    assert chromium, "headless Chromium is needed (scripts/test-env.sh installs Debian's chromium)"
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    page_origin = f"http://127.0.0.1:{server.server_address[1]}"
    other = bucket + "-x"
    s3.create_bucket(Bucket=other)
    try:
        allow = {"AllowedOrigins": [page_origin], "AllowedMethods": ["PUT", "GET"], "AllowedHeaders": ["*"]}
        s3.put_bucket_cors(Bucket=bucket, CORSConfiguration={"CORSRules": [allow]})
        s3.put_bucket_cors(Bucket=other, CORSConfiguration={"CORSRules": [dict(allow, AllowedOrigins=["https://elsewhere.example"])]})
        s3.put_object(Bucket=other, Key="k", Body=b"hidden")
        signer = client(signature_version="s3v4")
        presign = lambda method, b: signer.generate_presigned_url(method, Params={"Bucket": b, "Key": "k"}, ExpiresIn=300)
        urls = {"put": presign("put_object", bucket), "get": presign("get_object", bucket),
                "denied_put": presign("put_object", other), "denied_get": presign("get_object", other)}
        Page.body = (PAGE % json.dumps(urls)).encode()
        with tempfile.TemporaryDirectory(prefix="shoal-chromium-") as profile:
            dom = subprocess.run(
                [chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--user-data-dir=" + profile,
                 "--virtual-time-budget=15000", "--dump-dom", page_origin + "/"],
                capture_output=True, text=True, timeout=120,
            ).stdout
        out = json.loads(dom.split('<pre id="out">')[1].split("</pre>")[0])
        assert out["put"] == [200, ""], out
        assert out["get"] == [200, "from the browser"], out
        assert out["denied_put"] == "blocked" and out["denied_get"] == "blocked", out
        assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"from the browser"
        assert s3.get_object(Bucket=other, Key="k")["Body"].read() == b"hidden", "the preflight stopped the PUT"
    finally:
        server.shutdown()
        s3.delete_object(Bucket=other, Key="k")
        s3.delete_bucket(Bucket=other)


# ---- POST uploads ----

def post_form(s3v4, bucket, key, conditions, fields=None, expires=300):
    return s3v4.generate_presigned_post(bucket, key, Fields=fields or {}, Conditions=conditions, ExpiresIn=expires)


def test_post_uploads_check_the_signed_policy(s3, bucket):
    signer = client(signature_version="s3v4")
    form = post_form(signer, bucket, "uploads/hello.txt",
                     [["starts-with", "$key", "uploads/"], ["content-length-range", 1, 64],
                      {"success_action_status": "201"}, ["starts-with", "$Content-Type", "text/"]],
                     fields={"success_action_status": "201", "Content-Type": "text/plain"})
    r = requests.post(form["url"], data=form["fields"], files={"file": ("hello.txt", b"hello form")})
    assert r.status_code == 201, r.text
    assert "<Key>uploads/hello.txt</Key>" in r.text and "<ETag>" in r.text
    got = s3.get_object(Bucket=bucket, Key="uploads/hello.txt")
    assert (got["Body"].read(), got["ContentType"]) == (b"hello form", "text/plain")
    too_big = requests.post(form["url"], data=form["fields"], files={"file": ("big.txt", b"x" * 65)})
    assert too_big.status_code == 400 and "EntityTooLarge" in too_big.text, too_big.text
    tampered = dict(form["fields"], key="elsewhere/x")
    r = requests.post(form["url"], data=tampered, files={"file": ("x.txt", b"x")})
    assert r.status_code == 403 and "<Code>AccessDenied</Code>" in r.text, r.text
    assert "Invalid according to Policy: Policy condition" in r.text and "starts-with" in r.text
    wider = post_form(signer, bucket, "elsewhere/x", [])
    forged = dict(wider["fields"], **{"x-amz-signature": form["fields"]["x-amz-signature"]})
    r = requests.post(form["url"], data=forged, files={"file": ("x.txt", b"x")})
    assert r.status_code == 403 and "<Code>SignatureDoesNotMatch</Code>" in r.text, r.text
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]] == ["uploads/hello.txt"]


def test_post_upload_keys_take_the_file_name(s3, bucket):
    signer = client(signature_version="s3v4")
    form = post_form(signer, bucket, "uploads/${filename}", [["starts-with", "$key", "uploads/"]])
    for name in ["photo.jpg", "with space.txt"]:
        r = requests.post(form["url"], data=form["fields"], files={"file": (name, b"picture " + name.encode())})
        assert r.status_code == 204, r.text
        assert s3.get_object(Bucket=bucket, Key=f"uploads/{name}")["Body"].read() == b"picture " + name.encode()
    # A path sent as the file name (old browsers) gives its last component.
    r = requests.post(form["url"], data=form["fields"], files={"file": ("C:\\tmp\\x.bin", b"x")})
    assert r.status_code == 204, r.text
    keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"])
    assert keys == ["uploads/photo.jpg", "uploads/with space.txt", "uploads/x.bin"]


def test_post_upload_redirects_and_default_status(s3, bucket):
    signer = client(signature_version="s3v4")
    redirect = "http://127.0.0.1:9/done"
    form = post_form(signer, bucket, "r", [{"success_action_redirect": redirect}],
                     fields={"success_action_redirect": redirect})
    r = requests.post(form["url"], data=form["fields"], files={"file": ("r", b"r")}, allow_redirects=False)
    assert r.status_code == 303
    assert r.headers["Location"].startswith(redirect + "?bucket=" + bucket) and "key=r" in r.headers["Location"]
    plain = post_form(signer, bucket, "p", [])
    r = requests.post(plain["url"], data=plain["fields"], files={"file": ("p", b"p")})
    assert r.status_code == 204
    expired = post_form(signer, bucket, "e", [], expires=-10)
    r = requests.post(expired["url"], data=expired["fields"], files={"file": ("e", b"e")})
    assert r.status_code == 403 and "expired" in r.text.lower(), r.text
    assert s3.get_object(Bucket=bucket, Key="p")["Body"].read() == b"p"


# ---- virtual-host addressing (the suite's servers run with rgw_dns_name=s3.test) ----

def test_virtual_host_requests_address_the_bucket(s3, bucket):
    port = os.environ["SHOAL_S3_ENDPOINT"].rsplit(":", 1)[1]
    s3.put_object(Bucket=bucket, Key="dir/k", Body=b"by host")
    virtual = client("http://s3.test:" + port, signature_version="s3v4", s3={"addressing_style": "virtual"})
    url = virtual.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "dir/k"}, ExpiresIn=60)
    host = f"{bucket}.s3.test:{port}"
    assert url.startswith(f"http://{host}/dir/k?"), url
    local = url.replace(host, "127.0.0.1:" + port, 1)
    r = requests.get(local, headers={"Host": host})
    assert r.status_code == 200 and r.content == b"by host", r.text
    listed = requests.get(f"http://127.0.0.1:{port}/?list-type=2", headers={"Host": host})
    assert listed.status_code == 403, "a private bucket, addressed by host"
    assert requests.get(local).status_code != 200, "path style: another bucket, and the signature was for the host"
    assert s3.get_object(Bucket=bucket, Key="dir/k")["Body"].read() == b"by host", "path style still works"
