"""Topics and bucket notifications with boto3 (S3 and SNS clients), a local HTTP receiver,
RabbitMQ (pika) and Kafka (kafka-python). Broker addresses come from SHOAL_AMQP_PORT and
SHOAL_KAFKA_PORT (scripts/test.sh starts the brokers). The gateway runs with short
notification timings (see crates/shoal/tests/notify.rs)."""
import http.server
import json
import os
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import boto3
import botocore.config
import botocore.exceptions
import pytest
import requests
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from conftest import admin, client, purge

ENDPOINT = os.environ.get("SHOAL_S3_ENDPOINT", "")


def sns(endpoint=None, access_key=None, secret_key=None):
    return boto3.client(
        "sns", endpoint_url=endpoint or ENDPOINT, region_name="default",
        aws_access_key_id=access_key or os.environ["SHOAL_S3_ACCESS_KEY"],
        aws_secret_access_key=secret_key or os.environ["SHOAL_S3_SECRET_KEY"],
        config=botocore.config.Config(retries={"max_attempts": 3, "mode": "standard"}))


def name(prefix="t"):
    return prefix + "-" + uuid.uuid4().hex[:10]


class Receiver:
    """An HTTP endpoint that records every event it is sent (and can refuse them)."""

    def __init__(self):
        self.events, self.headers, self.lock = [], [], threading.Lock()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with outer.lock:
                    outer.headers.append(dict(self.headers))
                    outer.events.extend(json.loads(body)["Records"])
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args):
                pass

        http.server.ThreadingHTTPServer.request_queue_size = 256
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait(self, count, timeout=60):
        deadline = time.time() + timeout
        while time.time() < deadline:
            with self.lock:
                if len(self.events) >= count:
                    return list(self.events)
            time.sleep(0.1)
        with self.lock:
            raise AssertionError("got %d of %d events" % (len(self.events), count))

    def close(self):
        self.server.shutdown()


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


# Bound, never listening: connections are refused, and no other process (the suites run
# side by side) can take the port and accept pushes meant to fail.
_DEAD_SOCKETS = []


def dead_endpoint():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    _DEAD_SOCKETS.append(s)
    return "http://127.0.0.1:%d" % s.getsockname()[1]


def create_topic(attrs, topic=None):
    return sns().create_topic(Name=topic or name("topic"), Attributes=attrs)["TopicArn"]


ALL = ["s3:ObjectCreated:*", "s3:ObjectRemoved:*"]


def notify(s3, bucket, arn, events=None, key_filter=None, nid="n1"):
    conf = {"Id": nid, "TopicArn": arn, "Events": events or ALL}
    if key_filter:
        conf["Filter"] = {"Key": {"FilterRules": [{"Name": k, "Value": v} for k, v in key_filter]}}
    s3.put_bucket_notification_configuration(
        Bucket=bucket, NotificationConfiguration={"TopicConfigurations": [conf]})


def signed(method, url, body=b""):
    """A raw SigV4-signed S3 request (for XML boto3's model cannot express)."""
    req = AWSRequest(method=method, url=url, data=body)
    creds = Credentials(os.environ["SHOAL_S3_ACCESS_KEY"], os.environ["SHOAL_S3_SECRET_KEY"])
    import hashlib
    req.headers["x-amz-content-sha256"] = hashlib.sha256(body).hexdigest()
    SigV4Auth(creds, "s3", "us-east-1").add_auth(req)
    return requests.request(method, url, data=body, headers=dict(req.headers))


def stats(topic):
    return admin("topic", "stats", "--topic", topic)


def wait_drained(topic, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        s = stats(topic)
        if s["entries"] == 0 and s["reservations"] == 0 and s["pending"] == 0:
            return
        time.sleep(0.3)
    raise AssertionError("queue of %s did not drain: %s" % (topic, stats(topic)))


def topic_metric(series, topic, combine=sum):
    """SERIES{topic=TOPIC} combined over every gateway's Prometheus endpoint."""
    urls = [u for u in os.environ.get("SHOAL_METRICS_URLS", "").split(",") if u]
    assert urls, "SHOAL_METRICS_URLS names the gateways' metrics endpoints"
    values = [0.0]
    for url in urls:
        for line in requests.get(url, timeout=10).text.splitlines():
            if line.startswith('%s{topic="%s"}' % (series, topic)):
                values.append(float(line.rsplit(" ", 1)[1]))
    return combine(values)


def wait_metric(series, topic, expected, timeout=30):
    deadline = time.time() + timeout
    while topic_metric(series, topic) != expected and time.time() < deadline:
        time.sleep(0.3)
    assert topic_metric(series, topic) == expected, (series, topic, expected)


def wait_moved(topic, timeout=30):
    """Stats once no event waits in a bucket index log any more (moved to the queue)."""
    deadline = time.time() + timeout
    while True:
        s = stats(topic)
        if s["pending"] == 0 or time.time() > deadline:
            return s
        time.sleep(0.2)


# ---- topics ----

def test_topic_crud_errors_and_ownership(user):
    client_sns = sns()
    topic = name("crud")
    arn = client_sns.create_topic(Name=topic, Attributes={"push-endpoint": "http://127.0.0.1:9/x",
                                                          "OpaqueData": "me@example.com"})["TopicArn"]
    assert arn == "arn:aws:sns:default::" + topic
    attrs = client_sns.get_topic_attributes(TopicArn=arn)["Attributes"]
    assert attrs["Name"] == topic and attrs["TopicArn"] == arn and attrs["OpaqueData"] == "me@example.com"
    endpoint = json.loads(attrs["EndPoint"])
    assert endpoint["EndpointAddress"] == "http://127.0.0.1:9/x" and endpoint["Persistent"] is False
    assert arn in [t["TopicArn"] for t in client_sns.list_topics()["Topics"]]
    client_sns.set_topic_attributes(TopicArn=arn, AttributeName="OpaqueData", AttributeValue="other")
    assert client_sns.get_topic_attributes(TopicArn=arn)["Attributes"]["OpaqueData"] == "other"
    with pytest.raises(botocore.exceptions.ClientError) as e:
        client_sns.set_topic_attributes(TopicArn=arn, AttributeName="no-such", AttributeValue="1")
    assert e.value.response["Error"]["Code"] == "InvalidParameter"
    # Another user may neither read, change, delete nor re-create it.
    _, access, secret = user
    other = sns(access_key=access, secret_key=secret)
    for call in (lambda: other.get_topic_attributes(TopicArn=arn),
                 lambda: other.delete_topic(TopicArn=arn),
                 lambda: other.create_topic(Name=topic)):
        with pytest.raises(botocore.exceptions.ClientError) as e:
            call()
        assert e.value.response["Error"]["Code"] == "AuthorizationError"
        assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    assert arn not in [t["TopicArn"] for t in other.list_topics()["Topics"]]
    # Bad names, AMQP without an exchange, and passwords over plain HTTP are refused.
    for bad_name, attrs in (("bad.name", {}), ("amqp" + topic, {"push-endpoint": "amqp://h:5672"}),
                            ("pw" + topic, {"push-endpoint": "kafka://u:secret@h:9092"}),
                            ("sch" + topic, {"push-endpoint": "ftp://h"})):
        with pytest.raises(botocore.exceptions.ClientError) as e:
            client_sns.create_topic(Name=bad_name, Attributes=attrs)
        assert e.value.response["Error"]["Code"] == "InvalidParameter", bad_name
    # Nor attach it to a bucket of theirs, nor name it as their dead-letter topic.
    other_s3 = client(access_key=access, secret_key=secret)
    theirs = name("theirs")
    other_s3.create_bucket(Bucket=theirs)
    with pytest.raises(botocore.exceptions.ClientError) as e:
        notify(other_s3, theirs, arn)
    assert e.value.response["Error"]["Code"] == "AccessDenied"
    with pytest.raises(botocore.exceptions.ClientError) as e:
        other.create_topic(Name=name("dl"), Attributes={"push-endpoint": "http://127.0.0.1:9/x",
                                                        "persistent": "true", "dead_letter_topic": topic})
    assert e.value.response["Error"]["Code"] == "AuthorizationError"
    with pytest.raises(botocore.exceptions.ClientError) as e:
        client_sns.set_topic_attributes(TopicArn=arn, AttributeName="dead_letter_topic", AttributeValue=name("none"))
    assert e.value.response["Error"]["Code"] == "InvalidParameter"
    other_s3.delete_bucket(Bucket=theirs)
    client_sns.delete_topic(TopicArn=arn)
    with pytest.raises(botocore.exceptions.ClientError) as e:
        client_sns.get_topic_attributes(TopicArn=arn)
    assert e.value.response["Error"]["Code"] == "NotFound"
    client_sns.delete_topic(TopicArn=arn)  # deleting a missing topic succeeds


def test_persistent_toggle_creates_and_removes_shards():
    topic = name("toggle")
    arn = create_topic({"push-endpoint": dead_endpoint(), "persistent": "true"}, topic)
    got = admin("topic", "get", "--topic", topic)
    assert got["dest"]["queue"]["shards"] == 11
    assert stats(topic)["capacity"] > 0
    sns().set_topic_attributes(TopicArn=arn, AttributeName="persistent", AttributeValue="false")
    assert admin("topic", "get", "--topic", topic)["dest"]["queue"]["shards"] == 0
    sns().set_topic_attributes(TopicArn=arn, AttributeName="persistent", AttributeValue="true")
    assert admin("topic", "get", "--topic", topic)["dest"]["queue"]["shards"] == 11
    admin("topic", "rm", "--topic", topic)
    assert topic not in [t["name"] for t in admin("topic", "list")]


# ---- notification configurations ----

def test_notification_crud_and_validation(s3, bucket):
    arn = create_topic({"push-endpoint": dead_endpoint()})
    notify(s3, bucket, arn, ["s3:ObjectCreated:*"], [("prefix", "img/"), ("suffix", ".jpg")])
    # No Events means every created and removed event (boto3 insists on Events: raw XML).
    no_events = ("<NotificationConfiguration><TopicConfiguration><Id>n2</Id><Topic>%s</Topic>"
                 "</TopicConfiguration></NotificationConfiguration>" % arn)
    assert signed("PUT", "%s/%s?notification" % (ENDPOINT, bucket), no_events.encode()).status_code == 200
    got = s3.get_bucket_notification_configuration(Bucket=bucket)["TopicConfigurations"]
    assert sorted(c["Id"] for c in got) == ["n1", "n2"]
    n1 = [c for c in got if c["Id"] == "n1"][0]
    assert n1["Events"] == ["s3:ObjectCreated:*"] and n1["TopicArn"] == arn
    assert [c for c in got if c["Id"] == "n2"][0].get("Events", []) == []  # kept: merged by Id, as RGW does
    rules = {r["Name"]: r["Value"] for r in n1["Filter"]["Key"]["FilterRules"]}
    assert rules == {"prefix": "img/", "suffix": ".jpg"}
    assert [c["id"] for c in admin("notification", "list", "--bucket", bucket)] == ["n1", "n2"]
    # Ceph's metadata and tag filters, which boto3's model lacks, round-trip as XML.
    xml = ("<NotificationConfiguration><TopicConfiguration><Id>n3</Id><Topic>%s</Topic>"
           "<Filter><S3Metadata><FilterRule><Name>x-amz-meta-color</Name><Value>red</Value></FilterRule>"
           "</S3Metadata><S3Tags><FilterRule><Name>project</Name><Value>apollo</Value></FilterRule></S3Tags>"
           "</Filter></TopicConfiguration></NotificationConfiguration>" % arn)
    assert signed("PUT", "%s/%s?notification" % (ENDPOINT, bucket), xml.encode()).status_code == 200
    one = signed("GET", "%s/%s?notification=n3" % (ENDPOINT, bucket))
    assert one.status_code == 200 and "x-amz-meta-color" in one.text and "apollo" in one.text and "n1" not in one.text
    errors = {
        "bad event": ({"Id": "x", "TopicArn": arn, "Events": ["s3:ObjectCreated:Bogus"]}, "InvalidArgument"),
        "unknown topic": ({"Id": "x", "TopicArn": "arn:aws:sns:default::no-such-" + bucket, "Events": ALL},
                          "InvalidArgument"),
        "bad arn": ({"Id": "x", "TopicArn": "arn:aws:sqs:nope", "Events": ALL}, "InvalidArgument"),
    }
    for what, (conf, code) in errors.items():
        with pytest.raises(botocore.exceptions.ClientError) as e:
            s3.put_bucket_notification_configuration(
                Bucket=bucket, NotificationConfiguration={"TopicConfigurations": [conf]})
        assert e.value.response["Error"]["Code"] == code, what
    missing_id = ("<NotificationConfiguration><TopicConfiguration><Topic>%s</Topic></TopicConfiguration>"
                  "</NotificationConfiguration>" % arn)
    r = signed("PUT", "%s/%s?notification" % (ENDPOINT, bucket), missing_id.encode())
    assert r.status_code == 400 and "InvalidArgument" in r.text and "Id" in r.text
    assert signed("DELETE", "%s/%s?notification=n3" % (ENDPOINT, bucket)).status_code == 204
    admin("notification", "rm", "--bucket", bucket, "--notification-id", "n2")
    assert [c["Id"] for c in s3.get_bucket_notification_configuration(Bucket=bucket)["TopicConfigurations"]] == ["n1"]
    assert signed("DELETE", "%s/%s?notification" % (ENDPOINT, bucket)).status_code == 204
    assert "TopicConfigurations" not in s3.get_bucket_notification_configuration(Bucket=bucket)


# ---- events ----

def test_sync_http_events_for_put_copy_multipart_and_deletes(s3, bucket, receiver):
    arn = create_topic({"push-endpoint": receiver.url, "OpaqueData": "opaque-" + "x" * 2000, "cloudevents": "true"})
    notify(s3, bucket, arn)
    put = s3.put_object(Bucket=bucket, Key="a.txt", Body=b"hello", Metadata={"color": "red"},
                        Tagging="project=apollo")
    # Synchronous: the event is there when the PUT returns.
    assert len(receiver.events) == 1
    s3.copy_object(Bucket=bucket, Key="b.txt", CopySource={"Bucket": bucket, "Key": "a.txt"})
    mpu = s3.create_multipart_upload(Bucket=bucket, Key="big", Metadata={"kind": "mpu"})
    part = s3.upload_part(Bucket=bucket, Key="big", UploadId=mpu["UploadId"], PartNumber=1, Body=b"p" * 1000)
    done = s3.complete_multipart_upload(Bucket=bucket, Key="big", UploadId=mpu["UploadId"],
                                        MultipartUpload={"Parts": [{"ETag": part["ETag"], "PartNumber": 1}]})
    s3.delete_object(Bucket=bucket, Key="a.txt")
    s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "b.txt"}, {"Key": "big"}]})
    events = receiver.wait(6)
    names = [(e["eventName"], e["s3"]["object"]["key"]) for e in events]
    assert names[:4] == [("ObjectCreated:Put", "a.txt"), ("ObjectCreated:Copy", "b.txt"),
                         ("ObjectCreated:CompleteMultipartUpload", "big"), ("ObjectRemoved:Delete", "a.txt")]
    assert sorted(names[4:]) == [("ObjectRemoved:Delete", "b.txt"), ("ObjectRemoved:Delete", "big")]
    first = events[0]
    assert first["eventVersion"] == "2.1" and first["eventSource"] == "ceph:s3" and first["awsRegion"] == "default"
    assert first["s3"]["bucket"]["name"] == bucket and first["s3"]["bucket"]["arn"] == "arn:aws:s3:default::" + bucket
    assert first["s3"]["configurationId"] == "n1"
    assert first["s3"]["object"]["size"] == 5 and first["s3"]["object"]["eTag"] == put["ETag"].strip('"')
    assert {"key": "x-amz-meta-color", "val": "red"} in first["s3"]["object"]["metadata"]
    assert {"key": "project", "val": "apollo"} in first["s3"]["object"]["tags"]
    assert first["opaqueData"] == "opaque-" + "x" * 2000
    assert first["responseElements"]["x-amz-request-id"] == put["ResponseMetadata"]["RequestId"]
    assert first["requestParameters"]["sourceIPAddress"] == "127.0.0.1"
    assert first["eventTime"].endswith("Z") and len(first["eventTime"]) == 27
    assert events[2]["s3"]["object"]["eTag"] == done["ETag"].strip('"')
    assert {"key": "x-amz-meta-kind", "val": "mpu"} in events[2]["s3"]["object"]["metadata"]
    assert events[3]["s3"]["object"]["size"] == 5, "a removal reports the removed object's size"
    assert len({e["eventId"] for e in events}) == 6, "eventIds are unique"
    seq = [e["s3"]["object"]["sequencer"] for e in events if e["s3"]["object"]["key"] == "a.txt"]
    assert seq[0] < seq[1], "the sequencer grows per key"
    h = receiver.headers[0]
    assert h["ce-specversion"] == "1.0" and h["ce-type"] == "com.amazonaws.ObjectCreated:Put"
    assert h["ce-subject"] == "a.txt" and h["ce-source"] == "ceph:s3.default." + bucket


def test_a_repeated_completion_answers_as_the_first_without_a_second_event(s3, bucket, receiver):
    arn = create_topic({"push-endpoint": receiver.url})
    notify(s3, bucket, arn)
    mpu = s3.create_multipart_upload(Bucket=bucket, Key="big")
    part = s3.upload_part(Bucket=bucket, Key="big", UploadId=mpu["UploadId"], PartNumber=1, Body=b"p" * 1000)
    parts = {"Parts": [{"ETag": part["ETag"], "PartNumber": 1}]}
    first = s3.complete_multipart_upload(Bucket=bucket, Key="big", UploadId=mpu["UploadId"], MultipartUpload=parts)
    again = s3.complete_multipart_upload(Bucket=bucket, Key="big", UploadId=mpu["UploadId"], MultipartUpload=parts)
    assert again["ETag"] == first["ETag"]
    s3.put_object(Bucket=bucket, Key="after", Body=b"x")
    # Synchronous: both events (and any third) are in when the PUT returns.
    names = [(e["eventName"], e["s3"]["object"]["key"]) for e in receiver.wait(2)]
    assert names == [("ObjectCreated:CompleteMultipartUpload", "big"), ("ObjectCreated:Put", "after")]


def test_versioned_events_carry_version_ids_and_markers(s3, bucket, receiver):
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    arn = create_topic({"push-endpoint": receiver.url, "persistent": "true"})
    notify(s3, bucket, arn)
    v1 = s3.put_object(Bucket=bucket, Key="k", Body=b"one")["VersionId"]
    marker = s3.delete_object(Bucket=bucket, Key="k")["VersionId"]
    s3.delete_object(Bucket=bucket, Key="k", VersionId=v1)
    events = receiver.wait(3)
    seen = [(e["eventName"], e["s3"]["object"]["versionId"]) for e in events]
    assert seen == [("ObjectCreated:Put", v1), ("ObjectRemoved:DeleteMarkerCreated", marker),
                    ("ObjectRemoved:Delete", v1)]
    assert events[2]["s3"]["object"]["size"] == 3, "a removed version reports its size"


@pytest.mark.parametrize("versioning", [None, "Enabled"])
def test_lifecycle_events_reach_the_endpoint(s3, bucket, receiver, versioning):
    """The gateways run with rgw_lc_debug_interval=2: a lifecycle day is two seconds."""
    if versioning:
        s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": versioning})
    arn = create_topic({"push-endpoint": receiver.url, "persistent": "true"})
    notify(s3, bucket, arn, events=["s3:ObjectLifecycle:*"])
    s3.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration={"Rules": [
        {"ID": "r", "Status": "Enabled", "Filter": {"Prefix": ""}, "Expiration": {"Days": 1},
         "NoncurrentVersionExpiration": {"NoncurrentDays": 1}}]})
    first = s3.put_object(Bucket=bucket, Key="k", Body=b"one").get("VersionId")
    s3.delete_object(Bucket=bucket, Key="nothing")  # a user removal: not a lifecycle event
    if not versioning:
        events = receiver.wait(1)
        assert [(e["eventName"], e["s3"]["object"]["key"]) for e in events] == \
            [("ObjectLifecycle:Expiration:Current", "k")]
        assert events[0]["s3"]["object"]["size"] == 3
        return
    # (In the versioned bucket the user's DELETE left a lone marker of "nothing": it goes too.)
    def events_of_k():
        return [e for e in receiver.wait(1) if e["s3"]["object"]["key"] == "k"]
    deadline = time.time() + 60
    while len(events_of_k()) < 3 and time.time() < deadline:
        time.sleep(0.2)
    seen = [(e["eventName"], e["s3"]["object"]["versionId"]) for e in events_of_k()[:3]]
    assert seen[0][0] == "ObjectLifecycle:Expiration:DeleteMarkerCreated"
    assert seen[1] == ("ObjectLifecycle:Expiration:Noncurrent", first)
    assert seen[2] == ("ObjectLifecycle:Expiration:DeleteMarker", seen[0][1]), "the lone marker goes last"


def test_filters_by_key_metadata_and_tags(s3, bucket, receiver):
    arn = create_topic({"push-endpoint": receiver.url})
    xml = ("<NotificationConfiguration><TopicConfiguration><Id>f</Id><Topic>%s</Topic>"
           "<Event>s3:ObjectCreated:Put</Event><Filter><S3Key>"
           "<FilterRule><Name>prefix</Name><Value>img/</Value></FilterRule>"
           "<FilterRule><Name>regex</Name><Value>img/[a-z]+\\.jpg</Value></FilterRule></S3Key>"
           "<S3Metadata><FilterRule><Name>x-amz-meta-color</Name><Value>red</Value></FilterRule></S3Metadata>"
           "<S3Tags><FilterRule><Name>project</Name><Value>apollo</Value></FilterRule></S3Tags>"
           "</Filter></TopicConfiguration></NotificationConfiguration>" % arn)
    assert signed("PUT", "%s/%s?notification" % (ENDPOINT, bucket), xml.encode()).status_code == 200
    good = dict(Metadata={"color": "red"}, Tagging="project=apollo")
    s3.put_object(Bucket=bucket, Key="img/cat.jpg", Body=b"1", **good)
    s3.put_object(Bucket=bucket, Key="img/cat1.jpg", Body=b"1", **good)   # regex is whole-key
    s3.put_object(Bucket=bucket, Key="doc/cat.jpg", Body=b"1", **good)    # prefix
    s3.put_object(Bucket=bucket, Key="img/dog.jpg", Body=b"1", Metadata={"color": "blue"}, Tagging="project=apollo")
    s3.put_object(Bucket=bucket, Key="img/eel.jpg", Body=b"1", Metadata={"color": "red"})
    s3.delete_object(Bucket=bucket, Key="img/cat.jpg")                    # not a Put
    s3.put_object(Bucket=bucket, Key="img/fox.jpg", Body=b"1", **good)
    events = receiver.wait(2)
    time.sleep(0.5)
    assert [e["s3"]["object"]["key"] for e in receiver.events] == ["img/cat.jpg", "img/fox.jpg"]


def test_a_failed_push_does_not_fail_the_write(s3, bucket):
    arn = create_topic({"push-endpoint": dead_endpoint()})
    notify(s3, bucket, arn)
    s3.put_object(Bucket=bucket, Key="k", Body=b"v")
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"v"


def test_persistent_stats_grow_while_down_and_drain_after_fix(s3, bucket, receiver):
    topic = name("persist")
    arn = create_topic({"push-endpoint": dead_endpoint(), "persistent": "true"}, topic)
    notify(s3, bucket, arn)
    for i in range(20):
        s3.put_object(Bucket=bucket, Key="k%d" % i, Body=b"x" * i)
    s = stats(topic)
    # Every event is logged with its write: in the bucket index log or already in the queue
    # (one moving while stats reads may be counted in both).
    assert s["entries"] + s["pending"] >= 20, s
    s = wait_moved(topic)
    assert s["entries"] == 20 and s["pending"] == 0 and s["reservations"] == 0 and s["size"] > 0, json.dumps(s)
    dump = admin("topic", "dump", "--topic", topic)
    assert sorted(e["record"]["s3"]["object"]["key"] for e in dump) == sorted("k%d" % i for i in range(20))
    time.sleep(1)
    assert stats(topic)["oldest_age_secs"] >= 1
    # The gateways' metrics show the same lag: 20 events pending, the oldest a second old.
    wait_metric("shoal_notify_pending", topic, 20)
    assert topic_metric("shoal_notify_oldest_pending_seconds", topic, max) >= 1
    sns().set_topic_attributes(TopicArn=arn, AttributeName="push-endpoint", AttributeValue=receiver.url)
    events = receiver.wait(20)
    wait_drained(topic)
    wait_metric("shoal_notify_pending", topic, 0)
    assert topic_metric("shoal_notify_oldest_pending_seconds", topic, max) == 0
    assert sorted(e["s3"]["object"]["key"] for e in events) == sorted("k%d" % i for i in range(20))


def test_expired_events_go_to_the_dead_letter_topic(s3, bucket, receiver):
    dlq = name("dlq")
    create_topic({"push-endpoint": receiver.url, "persistent": "true"}, dlq)
    retries = name("retries")
    arn = create_topic({"push-endpoint": dead_endpoint(), "persistent": "true", "max_retries": "2",
                        "retry_sleep_duration": "0", "dead_letter_topic": dlq}, retries)
    ttl = name("ttl")
    arn_ttl = create_topic({"push-endpoint": dead_endpoint(), "persistent": "true", "time_to_live": "2",
                            "dead_letter_topic": dlq}, ttl)
    dropped = name("dropped")
    arn_dropped = create_topic({"push-endpoint": dead_endpoint(), "persistent": "true", "max_retries": "1"}, dropped)
    s3.put_bucket_notification_configuration(Bucket=bucket, NotificationConfiguration={"TopicConfigurations": [
        {"Id": "r", "TopicArn": arn, "Events": ALL, "Filter": {"Key": {"FilterRules": [{"Name": "prefix", "Value": "r/"}]}}},
        {"Id": "t", "TopicArn": arn_ttl, "Events": ALL, "Filter": {"Key": {"FilterRules": [{"Name": "prefix", "Value": "t/"}]}}},
        {"Id": "d", "TopicArn": arn_dropped, "Events": ALL, "Filter": {"Key": {"FilterRules": [{"Name": "prefix", "Value": "d/"}]}}},
    ]})
    for p in ("r/", "t/", "d/"):
        for i in range(3):
            s3.put_object(Bucket=bucket, Key="%s%d" % (p, i), Body=b"v")
    events = receiver.wait(6, timeout=90)
    assert sorted(e["s3"]["object"]["key"] for e in events) == ["r/0", "r/1", "r/2", "t/0", "t/1", "t/2"]
    assert {e["s3"]["configurationId"] for e in events} == {"r", "t"}
    for t in (retries, ttl, dropped, dlq):
        wait_drained(t)


def test_per_key_order_with_32_writers_on_11_shards(s3, bucket, receiver):
    topic = name("order")
    arn = create_topic({"push-endpoint": receiver.url, "persistent": "true"}, topic)
    assert admin("topic", "get", "--topic", topic)["dest"]["queue"]["shards"] == 11
    notify(s3, bucket, arn, ["s3:ObjectCreated:*"])
    versions = 8

    def writer(w):
        c = client()
        etags = {}
        for v in range(versions):
            for k in range(2):
                key = "w%02d-k%d" % (w, k)
                etags.setdefault(key, []).append(c.put_object(Bucket=bucket, Key=key, Body=b"%d" % v)["ETag"].strip('"'))
        return etags

    with ThreadPoolExecutor(32) as pool:
        written = {}
        for etags in pool.map(writer, range(32)):
            written.update(etags)
    receiver.wait(32 * 2 * versions, timeout=120)
    wait_drained(topic)
    # At-least-once: a push that timed out may have arrived; its redelivery has the same
    # eventId and the same record, so a consumer drops it.
    got, seen = {}, {}
    for e in list(receiver.events):
        if e["eventId"] in seen:
            assert seen[e["eventId"]] == e
            continue
        seen[e["eventId"]] = e
        got.setdefault(e["s3"]["object"]["key"], []).append(e)
    for key, etags in written.items():
        assert [e["s3"]["object"]["eTag"] for e in got[key]] == etags, key
        seq = [e["s3"]["object"]["sequencer"] for e in got[key]]
        assert seq == sorted(seq), key


def test_live_reshard_keeps_per_key_order(s3, bucket, receiver):
    topic = name("reshard")
    arn = create_topic({"push-endpoint": dead_endpoint(), "persistent": "true"}, topic)
    notify(s3, bucket, arn, ["s3:ObjectCreated:*"])
    keys = ["key%d" % i for i in range(6)]
    for v in range(3):
        for k in keys:
            s3.put_object(Bucket=bucket, Key=k, Body=b"a%d" % v)
    resharded = admin("topic", "reshard", "--topic", topic, "--shards", "3")
    assert resharded["dest"]["queue"] == {"generation": 1, "shards": 3}
    assert resharded["dest"]["draining"] == [{"generation": 0, "shards": 11}]
    for v in range(3):
        for k in keys:
            s3.put_object(Bucket=bucket, Key=k, Body=b"b%d" % v)
    assert wait_moved(topic)["entries"] == 36
    sns().set_topic_attributes(TopicArn=arn, AttributeName="push-endpoint", AttributeValue=receiver.url)
    events = receiver.wait(36)
    wait_drained(topic)
    for k in keys:
        seq = [e["s3"]["object"]["sequencer"] for e in events if e["s3"]["object"]["key"] == k]
        assert len(seq) == 6 and seq == sorted(seq), k
    deadline = time.time() + 30
    while admin("topic", "get", "--topic", topic)["dest"]["draining"] and time.time() < deadline:
        time.sleep(0.3)
    assert admin("topic", "get", "--topic", topic)["dest"]["draining"] == []


def test_bucket_removal_waits_for_its_logged_events(s3):
    topic = name("rmb")
    arn = create_topic({"push-endpoint": dead_endpoint(), "persistent": "true"}, topic)
    gone = name("gone")
    s3.create_bucket(Bucket=gone)
    notify(s3, gone, arn)
    keys = ["k%d" % i for i in range(10)]
    for k in keys:
        s3.put_object(Bucket=gone, Key=k, Body=b"x")
    s3.delete_objects(Bucket=gone, Delete={"Objects": [{"Key": k} for k in keys]})
    # At once: the last events may still be in the bucket's index logs, which go with it.
    s3.delete_bucket(Bucket=gone)
    s = stats(topic)
    assert s["pending"] == 0 and s["entries"] == 20, s
    events = [e["record"] for e in admin("topic", "dump", "--topic", topic)]
    assert sorted(e["eventName"] for e in events) == ["ObjectCreated:Put"] * 10 + ["ObjectRemoved:Delete"] * 10
    admin("topic", "rm", "--topic", topic)


def test_queue_full_waits_then_answers_slow_down(s3, bucket):
    topic = name("full")
    arn = create_topic({"push-endpoint": dead_endpoint(), "persistent": "true",
                        "persistent_queue_size": str(11 * 4096)}, topic)  # the least: 4 KiB per shard
    notify(s3, bucket, arn)
    once = client(retries={"max_attempts": 1})
    status = None
    # About 20 compact events fill a shard: the first 503 comes after some 130-190 PUTs.
    for i in range(1000):
        try:
            once.put_object(Bucket=bucket, Key="k%03d" % i, Body=b"x")
        except botocore.exceptions.ClientError as e:
            status = (i, e.response["Error"]["Code"], e.response["ResponseMetadata"]["HTTPStatusCode"])
            break
    assert status is not None and status[1:] == ("SlowDown", 503), status
    refused_key = "k%03d" % status[0]
    with pytest.raises(botocore.exceptions.ClientError):
        s3.head_object(Bucket=bucket, Key=refused_key)
    # Every accepted write's event is queued or, when the queue filled up meanwhile, waits
    # in the bucket index log (the fill level is read from time to time). Read once
    # nothing moves any more: an event moving during a read is counted twice.
    s, previous = stats(topic), None
    while (s["entries"], s["pending"]) != previous:
        previous = (s["entries"], s["pending"])
        time.sleep(0.6)
        s = stats(topic)
    assert s["entries"] + s["pending"] == status[0], s
    assert s["size"] <= s["capacity"], s
    # The refused request waited for room first (counters are published every poll).
    deadline = time.time() + 10
    while stats(topic)["counters"]["full"] < 1 and time.time() < deadline:
        time.sleep(0.2)
    counters = stats(topic)["counters"]
    assert counters["full"] >= 1 and counters["waits"] >= 1, counters
    admin("topic", "rm", "--topic", topic)


# ---- brokers ----

def test_amqp_persistent_and_sync(s3, bucket):
    import pika
    port = int(os.environ["SHOAL_AMQP_PORT"])
    conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port))
    ch = conn.channel()
    exchange = name("ex")
    ch.exchange_declare(exchange, exchange_type="topic", durable=True)
    q = ch.queue_declare("", exclusive=True).method.queue
    ch.queue_bind(q, exchange, routing_key="#")
    endpoint = "amqp://127.0.0.1:%d" % port
    persistent = create_topic({"push-endpoint": endpoint, "amqp-exchange": exchange, "persistent": "true",
                               "amqp-ack-level": "routable"})
    sync = create_topic({"push-endpoint": endpoint, "amqp-exchange": exchange, "amqp-ack-level": "broker"})
    s3.put_bucket_notification_configuration(Bucket=bucket, NotificationConfiguration={"TopicConfigurations": [
        {"Id": "p", "TopicArn": persistent, "Events": ALL}, {"Id": "s", "TopicArn": sync, "Events": ALL}]})
    for i in range(5):
        s3.put_object(Bucket=bucket, Key="a%d" % i, Body=b"v")
    got = []
    deadline = time.time() + 60
    while len(got) < 10 and time.time() < deadline:
        _, props, body = ch.basic_get(q, auto_ack=True)
        if body is None:
            time.sleep(0.1)
            continue
        got.extend(json.loads(body)["Records"])
    conn.close()
    assert sorted((e["s3"]["configurationId"], e["s3"]["object"]["key"]) for e in got) == sorted(
        [(c, "a%d" % i) for c in "ps" for i in range(5)])


def test_kafka_persistent(s3, bucket):
    from kafka import KafkaConsumer
    port = int(os.environ["SHOAL_KAFKA_PORT"])
    topic = name("kafka")
    arn = create_topic({"push-endpoint": "kafka://127.0.0.1:%d" % port, "persistent": "true",
                        "kafka-ack-level": "broker"}, topic)
    notify(s3, bucket, arn)
    for i in range(5):
        s3.put_object(Bucket=bucket, Key="k%d" % i, Body=b"v")
    wait_drained(topic)
    consumer = KafkaConsumer(topic, bootstrap_servers="127.0.0.1:%d" % port, auto_offset_reset="earliest",
                             consumer_timeout_ms=20000)
    got = []
    for message in consumer:
        got.extend(json.loads(message.value)["Records"])
        if len(got) >= 5:
            break
    consumer.close()
    assert sorted(e["s3"]["object"]["key"] for e in got) == ["k%d" % i for i in range(5)]


def test_swift_writes_copies_and_deletes_notify_as_s3_ones(user, receiver):
    from swiftclient import client as swift
    uid, access_key, secret_key = user
    admin("subuser", "create", "--uid", uid, "--subuser", uid + ":swift", "--access", "full")
    admin("key", "create", "--subuser", uid + ":swift", "--key-type", "swift", "--secret-key", "k")
    s3 = client(access_key=access_key, secret_key=secret_key)
    bucket = name("sw")
    s3.create_bucket(Bucket=bucket)
    topics = sns(access_key=access_key, secret_key=secret_key)
    arn = topics.create_topic(Name=name("topic"), Attributes={"push-endpoint": receiver.url})["TopicArn"]
    try:
        notify(s3, bucket, arn)
        url, token = swift.get_auth(os.environ["SHOAL_S3_ENDPOINT"] + "/auth/v1.0", uid + ":swift", "k",
                                    auth_version="1.0")
        swift.put_object(url, token, bucket, "a", b"hello", headers={"X-Object-Meta-Color": "red"})
        assert len(receiver.events) == 1, "synchronous, as for S3"
        swift.copy_object(url, token, bucket, "a", f"/{bucket}/b")
        swift.delete_object(url, token, bucket, "a")
        events = receiver.wait(3)
        assert [(e["eventName"], e["s3"]["object"]["key"]) for e in events] == [
            ("ObjectCreated:Put", "a"), ("ObjectCreated:Copy", "b"), ("ObjectRemoved:Delete", "a")]
        assert {"key": "x-amz-meta-color", "val": "red"} in events[0]["s3"]["object"]["metadata"]
        assert events[0]["s3"]["object"]["size"] == 5
    finally:
        purge(s3, bucket)
        topics.delete_topic(TopicArn=arn)
