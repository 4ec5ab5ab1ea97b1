"""SIGKILL of a gateway during PUTs and during delivery: no acknowledged write loses its
event, no event reports a write that did not happen, and redeliveries carry the same
eventId. Needs the second gateway's pid and command line (SHOAL_GATEWAY2_PID,
SHOAL_GATEWAY2_ARGS, SHOAL_GATEWAY2_LOG), which crates/shoal/tests/s3.rs passes."""
import json
import os
import signal
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import botocore.exceptions
import pytest

from conftest import client
from test_notify import Receiver, create_topic, dead_endpoint, name, notify, sns, stats, wait_drained


@pytest.fixture(scope="module")
def gateway2():
    state = {"pid": int(os.environ["SHOAL_GATEWAY2_PID"]), "proc": None}

    def kill_and_restart():
        os.kill(state["pid"], signal.SIGKILL)
        time.sleep(0.5)
        log = open(os.environ["SHOAL_GATEWAY2_LOG"], "a")
        proc = subprocess.Popen([os.environ["SHOAL_BIN"], *json.loads(os.environ["SHOAL_GATEWAY2_ARGS"])],
                                stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        state.update(pid=proc.pid, proc=proc)
        endpoint = os.environ["SHOAL_S3_ENDPOINT2"]
        for _ in range(100):
            try:
                client(endpoint=endpoint).list_buckets()
                return
            except Exception:
                time.sleep(0.2)
        raise AssertionError("gateway 2 did not come back")

    yield kill_and_restart
    if state["proc"] is not None:
        state["proc"].kill()
        state["proc"].wait()


def check_events(events, bucket, s3):
    """Every event names an existing object version; duplicates have equal records."""
    by_id = {}
    for e in events:
        by_id.setdefault(e["eventId"], []).append(e)
    for copies in by_id.values():
        assert all(c == copies[0] for c in copies), "redeliveries of one eventId differ"
    # Existence as GET sees it: a gateway killed between the head write and the index link
    # leaves an object that GET returns but the listing does not show yet (a known gap).
    for copies in by_id.values():
        key, etag = copies[0]["s3"]["object"]["key"], copies[0]["s3"]["object"]["eTag"]
        try:
            got = s3.head_object(Bucket=bucket, Key=key)["ETag"].strip('"')
        except botocore.exceptions.ClientError:
            got = None
        assert got == etag, "an event reports a write that did not happen: %s" % key
    return {e["s3"]["object"]["key"] for e in events}


def test_sigkill_during_puts_loses_no_acknowledged_event(s3, bucket, gateway2):
    receiver = Receiver()
    topic = name("crash")
    arn = create_topic({"push-endpoint": receiver.url, "persistent": "true"}, topic)
    notify(s3, bucket, arn)
    gw2 = client(endpoint=os.environ["SHOAL_S3_ENDPOINT2"], retries={"max_attempts": 1})
    acked, stop = [], threading.Event()

    def writer(w):
        i = 0
        while not stop.is_set():
            key = "w%d-%d" % (w, i)
            try:
                gw2.put_object(Bucket=bucket, Key=key, Body=b"v")
                acked.append(key)
            except Exception:
                pass
            i += 1

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    time.sleep(1.5)
    gateway2()  # SIGKILL mid-PUTs, then restart
    stop.set()
    for t in threads:
        t.join()
    assert len(acked) > 20
    # The killed gateway's queue shards and event logs move to the other one (leases of 3 s).
    deadline = time.time() + 90
    while time.time() < deadline and not set(acked) <= {e["s3"]["object"]["key"] for e in list(receiver.events)}:
        time.sleep(0.3)
    wait_drained(topic)
    time.sleep(1)
    delivered = check_events(list(receiver.events), bucket, s3)
    assert set(acked) <= delivered, "acknowledged writes without events: %s" % sorted(set(acked) - delivered)[:5]
    s = stats(topic)
    print("after the kill:", len(acked), "acknowledged,", len(delivered), "delivered,", s["counters"])
    assert s["pending"] == 0 and s["entries"] == 0 and s["reservations"] == 0, s
    receiver.close()


def test_sigkill_during_delivery_redelivers_with_the_same_event_ids(s3, bucket, gateway2):
    receiver = Receiver()
    topic = name("crashd")
    arn = create_topic({"push-endpoint": dead_endpoint(), "persistent": "true"}, topic)
    notify(s3, bucket, arn)
    keys = ["k%04d" % i for i in range(1000)]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda k: s3.put_object(Bucket=bucket, Key=k, Body=b"v"), keys))
    sns().set_topic_attributes(TopicArn=arn, AttributeName="push-endpoint", AttributeValue=receiver.url)
    receiver.wait(100, timeout=30)
    gateway2()  # SIGKILL while both gateways deliver their shards
    receiver.wait(1000, timeout=90)
    wait_drained(topic)
    delivered = check_events(list(receiver.events), bucket, s3)
    assert delivered == set(keys)
    print("delivery crash:", len(receiver.events), "pushes for", len(keys), "events")
    receiver.close()
