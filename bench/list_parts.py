"""ListParts of one upload with many parts: time per page of 1,000 at several markers, and the
whole listing. Usage: SHOAL_S3_ENDPOINT=… SHOAL_S3_ACCESS_KEY=… SHOAL_S3_SECRET_KEY=… [N=10000]
python bench/list_parts.py (tests/s3/conftest.py gives the client)."""
import os, time, sys, json, concurrent.futures
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "s3"))
from conftest import client
s3 = client()
b = "parts-bench"
s3.create_bucket(Bucket=b)
up = s3.create_multipart_upload(Bucket=b, Key="k")["UploadId"]
N = int(os.environ.get("N", "10000"))
with concurrent.futures.ThreadPoolExecutor(16) as pool:
    list(pool.map(lambda n: s3.upload_part(Bucket=b, Key="k", UploadId=up, PartNumber=n, Body=b"x"), range(1, N + 1)))
rows = []
for marker in [0, N // 2, N - 1000]:
    t = []
    for _ in range(5):
        t0 = time.perf_counter()
        r = s3.list_parts(Bucket=b, Key="k", UploadId=up, PartNumberMarker=marker, MaxParts=1000)
        t.append(time.perf_counter() - t0)
        assert len(r["Parts"]) == min(1000, N - marker)
    rows.append((marker, sorted(t)[2] * 1000))
t0 = time.perf_counter()
marker, pages = 0, 0
while True:
    r = s3.list_parts(Bucket=b, Key="k", UploadId=up, PartNumberMarker=marker, MaxParts=1000)
    pages += 1
    if not r["IsTruncated"]:
        break
    marker = r["NextPartNumberMarker"]
whole = time.perf_counter() - t0
print("| part number marker | ms per page of 1,000 (median of 5) |")
print("|---|---|")
for m, ms in rows:
    print(f"| {m} | {ms:.1f} |")
print(f"all {pages} pages of {N} parts: {whole*1000:.0f} ms")
s3.abort_multipart_upload(Bucket=b, Key="k", UploadId=up)
s3.delete_bucket(Bucket=b)
