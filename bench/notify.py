"""Bucket notification benchmark: 4 KiB PUT and DELETE ops/s at 32 clients through one
gateway of a vstart cluster (3 and 6 OSDs, pools of size 3) with a persistent topic of 1
shard and of 11 shards (HTTP receiver), and of 11 shards to Kafka, each compared with the
same load on a bucket without notifications (`ratio` = with / without); then end-to-end
delivery: events per second (first event time to last arrival) and p50/p99 delivery
latency (arrival, or the Kafka record time, minus eventTime).

The PUT comparison alternates the two buckets in `--rounds` rounds of `--seconds` each
(ABBA order), because this VM's rate drifts and jumps by a quarter between identical runs
(RocksDB flushes and compactions land in some runs and not others); `ratio` is the mean
rate with notifications over the mean rate without, and `ratio_min`/`ratio_max` the
spread of the per-round ratios (all of them in `round_ratios`, with their median).
`osd_cpu_us` and `gateway_cpu_us` are the CPU time of all OSDs and of the gateway per
operation (from /proc; for runs with the topic including the moving they caused), a
measure of cost that does not depend on what else the VM runs at the time.

`--obj-size 4MiB --delete-objects 300 --shards 11` reproduces the article's 4 MB rows
within a few GiB of disk.

Usage (bench/notify.sh runs it with the test venv and brokers):
  python bench/notify.py [--seconds 8] [--rounds 6] [--osds 3,6] [--shards 1,11] [--obj-size 4KiB]
                         [--delete-objects 20000] [--kafka-port P] [--json]
Prints a table, or one JSON object per row with --json."""
import argparse
import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime

import boto3

SHOAL = os.environ.get("SHOAL") or os.path.join(
    os.environ.get("CARGO_TARGET_DIR", os.path.expanduser("~/.cache/shoal/target")), "release", "shoal")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_port(port):
    for _ in range(300):
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("nothing listens on %d" % port)


def event_ts(record):
    return datetime.strptime(record["eventTime"], "%Y-%m-%dT%H:%M:%S.%fZ").timestamp()


class Receiver:
    def __init__(self):
        self.arrivals = []  # (arrival time, event time)
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                now = time.time()
                for r in json.loads(body)["Records"]:
                    outer.arrivals.append((now, event_ts(r)))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else 0.0


def delivery_row(pairs):
    """Delivered events, their rate over the arrival window, and p50/p99 of arrival minus eventTime."""
    if not pairs:
        return {"delivered": 0}
    first = min(a for a, _ in pairs)
    last = max(a for a, _ in pairs)
    lat = [(a - e) * 1000 for a, e in pairs]
    return {"delivered": len(pairs), "delivered_per_sec": round(len(pairs) / max(last - first, 1e-6), 1),
            "delivery_p50_ms": round(pct(lat, 0.5), 1), "delivery_p99_ms": round(pct(lat, 0.99), 1)}


class Setup:
    def __init__(self, work, osds):
        self.work, self.osds = work, osds
        self.cluster = os.path.join(work, "cluster%d" % osds)
        subprocess.run([SHOAL, "vstart", "--dir", self.cluster, "--osds", str(osds), "--hosts", str(osds)],
                       check=True, stdout=subprocess.DEVNULL)
        self.conf = os.path.join(self.cluster, "shoal.conf")
        self.gateway = None

    def start_gateway(self, shards):
        self.stop_gateway()
        self.port = free_port()
        log = open(os.path.join(self.work, "gateway.log"), "a")
        self.gateway = subprocess.Popen(
            [SHOAL, "gateway", "-c", self.conf, "--port", str(self.port), "--bind", "127.0.0.1",
             "-o", "rgw_bucket_persistent_notif_num_shards=%d" % shards, "-o", "rgw_notify_poll_interval=1"],
            stdout=log, stderr=log)
        wait_port(self.port)
        if not hasattr(self, "keys"):
            out = subprocess.run([SHOAL, "admin", "-c", self.conf, "user", "create", "--uid", "bench",
                                  "--display-name", "Bench"], check=True, capture_output=True, text=True).stdout
            self.keys = json.loads(out)["keys"][0]
            self.keys_file = os.path.join(self.work, "keys.json")
            json.dump(self.keys, open(self.keys_file, "w"))
        self.endpoint = "http://127.0.0.1:%d" % self.port
        kw = dict(endpoint_url=self.endpoint, aws_access_key_id=self.keys["access_key"],
                  aws_secret_access_key=self.keys["secret_key"], region_name="default")
        self.s3, self.sns = boto3.client("s3", **kw), boto3.client("sns", **kw)

    def osd_cpu(self):
        """CPU seconds used so far by the cluster's OSDs (utime + stime from /proc)."""
        total = 0.0
        for line in open(os.path.join(self.cluster, "pids")):
            name, pid = line.split()
            if name.startswith("osd."):
                fields = open("/proc/%s/stat" % pid).read().rsplit(")", 1)[1].split()
                total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return total

    def stop_gateway(self):
        if self.gateway:
            self.gateway.terminate()
            self.gateway.wait()
            self.gateway = None

    def stop(self):
        self.stop_gateway()
        subprocess.run([SHOAL, "vstart", "--dir", self.cluster, "--stop"], stdout=subprocess.DEVNULL)

    def bench(self, bucket, workload, seconds, size, delete_objects):
        args = [SHOAL, "bench", "s3", "--endpoint", self.endpoint, "--keys-file", self.keys_file,
                "--server-pid", str(self.gateway.pid), "--bucket", bucket, "--workload", workload,
                "--obj-size", size, "--concurrent", "32", "--duration", "%ds" % seconds, "--json", "--no-progress"]
        if workload == "delete":
            args += ["--objects", str(delete_objects)]
        else:
            args += ["--noclear"]
        p = subprocess.run(args, capture_output=True, text=True)
        if p.returncode:
            raise RuntimeError("shoal bench s3 failed: %s" % p.stderr.strip()[-2000:])
        out = p.stdout
        return json.loads(out.strip().splitlines()[-1])

    def drained(self, topic, timeout=300):
        deadline = time.time() + timeout
        while time.time() < deadline:
            s = json.loads(subprocess.run([SHOAL, "admin", "-c", self.conf, "topic", "stats", "--topic", topic],
                                          check=True, capture_output=True, text=True).stdout)
            if s["entries"] == 0 and s["reservations"] == 0 and s["pending"] == 0:
                return
            time.sleep(0.5)


class KafkaTail:
    """Reads a Kafka topic from the start, a batch at a time."""

    def __init__(self, topic, port):
        from kafka import KafkaConsumer
        self.consumer = KafkaConsumer(topic, bootstrap_servers="127.0.0.1:%d" % port,
                                      auto_offset_reset="earliest", consumer_timeout_ms=3000)

    def take(self):
        """Every (record time, event time) until the topic is idle for 3 s."""
        pairs = []
        for m in self.consumer:
            pairs.extend((m.timestamp / 1000.0, event_ts(r)) for r in json.loads(m.value)["Records"])
        return pairs


def summary(runs):
    """One row for equally long runs: their mean rate, median p50 and p99, CPU per operation."""
    mid = len(runs) // 2
    ops = sum(r["ops"] for r in runs)
    return dict(runs[0], ops_per_sec=round(sum(r["ops_per_sec"] for r in runs) / len(runs), 1),
                p50_ms=sorted(r["p50_ms"] for r in runs)[mid], p99_ms=sorted(r["p99_ms"] for r in runs)[mid],
                ops=ops, osd_cpu_s=round(sum(r["osd_cpu_s"] for r in runs), 2),
                gateway_cpu_s=round(sum(r["gateway_cpu_s"] or 0 for r in runs), 2),
                osd_cpu_us=round(sum(r["osd_cpu_s"] for r in runs) / ops * 1e6),
                gateway_cpu_us=round(sum(r["gateway_cpu_s"] or 0 for r in runs) / ops * 1e6), runs=len(runs))


def moved(setup, topic, timeout=5):
    """Waits (up to `timeout` s) until no event of `topic` is left in a bucket index log."""
    deadline = time.time() + timeout
    while stats(setup, topic)["pending"] and time.time() < deadline:
        time.sleep(0.1)


def stats(setup, topic):
    return json.loads(subprocess.run([SHOAL, "admin", "-c", setup.conf, "topic", "stats", "--topic", topic],
                                     check=True, capture_output=True, text=True).stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=8, help="length of one PUT run (DELETE and live runs: twice)")
    ap.add_argument("--rounds", type=int, default=6, help="alternating rounds of the PUT comparison")
    ap.add_argument("--osds", default="3,6")
    ap.add_argument("--shards", default="1,11", help="persistent topics of these many shards (HTTP)")
    ap.add_argument("--obj-size", default="4KiB")
    ap.add_argument("--delete-objects", type=int, default=20000, help="objects a DELETE run removes")
    ap.add_argument("--kafka-port", type=int, default=int(os.environ.get("SHOAL_KAFKA_PORT", "0")))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = []

    def emit(row):
        rows.append(row)
        print(json.dumps(row) if args.json else row, file=sys.stdout if args.json else sys.stderr, flush=True)

    work = tempfile.mkdtemp(prefix="notify-bench-")
    for osds in [int(o) for o in args.osds.split(",")]:
        setup = Setup(work, osds)
        cases = [("persistent %s shard%s" % (n, "" if n == "1" else "s"), int(n), "http")
                 for n in args.shards.split(",")]
        if args.kafka_port:
            cases.append(("persistent 11 shards", 11, "kafka"))
        try:
            for i, (case, shards, kind) in enumerate(cases):
                setup.start_gateway(shards)
                bucket, plain = "bench-%d-%d" % (osds, i), "plain-%d-%d" % (osds, i)
                setup.s3.create_bucket(Bucket=bucket)
                setup.s3.create_bucket(Bucket=plain)
                base = {"osds": osds, "case": case, "endpoint": kind, "obj_size": args.obj_size}

                def load(b, workload, phase, baseline=None, seconds=2 * args.seconds, then=None):
                    cpu = setup.osd_cpu()
                    r = setup.bench(b, workload, seconds, args.obj_size, args.delete_objects)
                    if then:
                        then()
                    ops = r["ops_per_sec"] * seconds
                    row = dict(base, workload=workload, phase=phase, ops_per_sec=r["ops_per_sec"],
                               p50_ms=r["p50_ms"], p99_ms=r["p99_ms"], ops=ops,
                               osd_cpu_s=round(setup.osd_cpu() - cpu, 2), gateway_cpu_s=r.get("server_cpu_s"))
                    if workload == "put":  # a DELETE run first creates its objects: no CPU per DELETE
                        row["osd_cpu_us"] = round(row["osd_cpu_s"] / max(ops, 1) * 1e6)
                        row["gateway_cpu_us"] = round((row["gateway_cpu_s"] or 0) / max(ops, 1) * 1e6)
                    if baseline:
                        row["ratio"] = round(r["ops_per_sec"] / baseline["ops_per_sec"], 3)
                    return row

                topic = "bench-%d-%d-%d" % (osds, i, int(time.time()))
                receiver = Receiver() if kind == "http" else None
                live = receiver.url if receiver else "kafka://127.0.0.1:%d" % args.kafka_port
                down = "http://127.0.0.1:9" if receiver else "kafka://127.0.0.1:9"
                arn = setup.sns.create_topic(Name=topic, Attributes={
                    "push-endpoint": down, "persistent": "true", "kafka-ack-level": "broker"})["TopicArn"]
                setup.s3.put_bucket_notification_configuration(Bucket=bucket, NotificationConfiguration={
                    "TopicConfigurations": [{"Id": "bench", "TopicArn": arn,
                                             "Events": ["s3:ObjectCreated:*", "s3:ObjectRemoved:*"]}]})
                # The write path alone (events queue while the endpoint is down), alternating
                # with the same load on a bucket without notifications.
                runs = {plain: [], bucket: []}
                for r in range(args.rounds):
                    for b in (plain, bucket) if r % 2 == 0 else (bucket, plain):
                        # The moving a run with the topic caused stays in it.
                        then = (lambda: moved(setup, topic)) if b == bucket else None
                        runs[b].append(load(b, "put", "", seconds=args.seconds, then=then))
                plain_put, queueing = [summary(runs[b]) for b in (plain, bucket)]
                emit(dict(plain_put, phase="no notification"))
                rounds = [q["ops_per_sec"] / p["ops_per_sec"] for p, q in zip(runs[plain], runs[bucket])]
                emit(dict(queueing, phase="queueing (endpoint down)",
                          ratio=round(queueing["ops_per_sec"] / plain_put["ops_per_sec"], 3),
                          ratio_min=round(min(rounds), 3), ratio_max=round(max(rounds), 3),
                          ratio_median=round(sorted(rounds)[len(rounds) // 2], 3),
                          round_ratios=[round(x, 3) for x in rounds]))
                plain_delete = load(plain, "delete", "no notification")
                emit(plain_delete)
                emit(load(bucket, "delete", "queueing (endpoint down)", plain_delete))
                # Delivery of the backlog once the endpoint is fixed.
                tail = KafkaTail(topic, args.kafka_port) if kind == "kafka" else None
                s = stats(setup, topic)
                while s["pending"]:  # events still on their way from the bucket index logs
                    time.sleep(0.2)
                    s = stats(setup, topic)
                backlog = s["entries"]
                started = time.time()
                setup.sns.set_topic_attributes(TopicArn=arn, AttributeName="push-endpoint", AttributeValue=live)
                setup.drained(topic)
                drain = time.time() - started
                emit(dict(base, phase="backlog delivery", delivered=backlog,
                          delivered_per_sec=round(backlog / max(drain, 1e-6), 1)))
                if receiver:
                    receiver.arrivals = []
                else:
                    tail.take()
                # Writes with live delivery: PUT rate and end-to-end latency.
                row = load(bucket, "put", "live delivery", plain_put)
                setup.drained(topic)
                time.sleep(1)
                if receiver:
                    pairs, receiver.arrivals = receiver.arrivals, []
                    receiver.server.shutdown()
                else:
                    pairs = tail.take()
                row.update(delivery_row(pairs))
                emit(row)
                # An idle topic still costs polls: remove it before the next case.
                setup.s3.put_bucket_notification_configuration(Bucket=bucket, NotificationConfiguration={})
                setup.sns.delete_topic(TopicArn=arn)
        finally:
            setup.stop()
            shutil.rmtree(setup.cluster, ignore_errors=True)  # gigabytes of stores
    shutil.rmtree(work, ignore_errors=True)
    if not args.json:
        cols = ["osds", "case", "endpoint", "phase", "workload", "runs", "ops_per_sec", "ratio", "ratio_min",
                "ratio_max", "p50_ms", "p99_ms", "osd_cpu_us", "gateway_cpu_us", "delivered", "delivered_per_sec",
                "delivery_p50_ms", "delivery_p99_ms"]
        print(" | ".join(cols))
        for r in rows:
            print(" | ".join(str(r.get(c, "")) for c in cols))


if __name__ == "__main__":
    main()
