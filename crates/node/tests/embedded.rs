//! The object layer end to end in one process: client → messenger → OSD → RocksDB.

use bytes::Bytes;
use shoal_client::{IoCtx, ListCursor, OpBuilder, ReadOp, WatchEvent, WriteOp};
use shoal_node::config::Config;
use shoal_node::embedded::Embedded;
use shoal_objclass::guard::{AppendRequest, Epoch};
use shoal_objclass::lock::{AssertRequest, LockRequest, LockType};
use shoal_objclass::queue2pc::{
    CommitRequest, InitRequest, ListReply, ListRequest, QueueHeader, ReserveReply, ReserveRequest,
};
use shoal_types::{CmpMode, CmpOp, Errno, PoolSpec, StepOutput, Versioned};
use std::time::Duration;

async fn cluster(options: &[&str]) -> (tempfile::TempDir, Embedded) {
    let dir = tempfile::tempdir().unwrap();
    let options: Vec<String> = options.iter().map(|s| s.to_string()).collect();
    let embedded = Embedded::open(dir.path(), &Config::from_settings(&options).unwrap()).await.unwrap();
    (dir, embedded)
}

async fn pool(e: &Embedded, name: &str) -> IoCtx {
    e.rados.pool_create(PoolSpec { pg_num: 16, ..PoolSpec::named(name, 1) }).await.unwrap();
    e.rados.ioctx(name).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compound_write_is_atomic_and_returns_class_output() {
    let (_dir, e) = cluster(&[]).await;
    let io = pool(&e, "p").await;
    io.operate("q", WriteOp::new().exec("2pc_queue", "init", InitRequest { capacity_bytes: 1000 }.encode()))
        .await
        .unwrap();
    // A write op returns the reservation id from inside the transaction.
    let reply = io
        .operate(
            "q",
            WriteOp::new().exec(
                "2pc_queue",
                "reserve",
                ReserveRequest { bytes: 10, entries: 1, info: Bytes::new() }.encode(),
            ),
        )
        .await
        .unwrap();
    let StepOutput::Data(out) = &reply.outputs[0] else { panic!("{reply:?}") };
    let id = ReserveReply::decode(out).unwrap().id;
    // Reserve + commit + a failing guard in one op: nothing of it may stick.
    let failing = WriteOp::new()
        .exec("2pc_queue", "commit", CommitRequest { id, entries: vec![Bytes::from_static(b"event")] }.encode())
        .set_xattr("touched", "yes")
        .cmp_xattr("touched", CmpOp::Eq, CmpMode::Bytes, "no");
    assert_eq!(io.operate("q", failing).await.unwrap_err().errno, Errno::Canceled);
    let listed =
        io.exec("q", "2pc_queue", "list_entries", ListRequest { after: None, max: 10 }.encode()).await.unwrap();
    assert!(ListReply::decode(&listed).unwrap().entries.is_empty(), "the commit was rolled back");
    let read = io.read("q", ReadOp::new().get_xattr("touched")).await.unwrap_err();
    assert_eq!(read.errno, Errno::NoData);
    io.exec("q", "2pc_queue", "commit", CommitRequest { id, entries: vec![Bytes::from_static(b"event")] }.encode())
        .await
        .unwrap();
    let header = QueueHeader::decode(&io.exec("q", "2pc_queue", "get_capacity", Bytes::new()).await.unwrap()).unwrap();
    assert_eq!((header.committed_bytes, header.reserved_bytes), (5, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guard_cache_follows_commits_only() {
    let (_dir, e) = cluster(&[]).await;
    let io = pool(&e, "p").await;
    let set = |epoch| WriteOp::new().exec("guard", "set_epoch", Epoch { epoch }.encode());
    let append = |epoch| {
        WriteOp::new().exec("guard", "append", AppendRequest { epoch, payload: Bytes::from_static(b"x") }.encode())
    };
    io.operate("log", set(3)).await.unwrap();
    io.operate("log", append(3)).await.unwrap();
    // Raising the epoch in an op that then fails must not reach the cache.
    let aborted = set(9).assert_version(1);
    assert_eq!(io.operate("log", aborted).await.unwrap_err().errno, Errno::Range);
    io.operate("log", append(3)).await.expect("the aborted epoch change was not published");
    // A plain xattr write bypasses the class: its cache must not serve the old epoch.
    io.operate("log", WriteOp::new().set_xattr("guard.epoch", Bytes::from(Epoch { epoch: 7 }.encode()))).await.unwrap();
    assert_eq!(io.operate("log", append(3)).await.unwrap_err().errno, Errno::StaleEpoch);
    io.operate("log", append(7)).await.unwrap();
    assert_eq!(io.read_full("log").await.unwrap().as_ref(), b"xxx");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_guards_a_compound_write() {
    let (_dir, e) = cluster(&[]).await;
    let io = pool(&e, "p").await;
    let lock = LockRequest {
        name: "owner".into(),
        lock_type: LockType::Exclusive,
        cookie: "c1".into(),
        tag: String::new(),
        description: "test".into(),
        duration_ns: 60_000_000_000,
        may_renew: false,
        must_renew: false,
    };
    io.exec("shard", "lock", "lock", lock.encode()).await.unwrap();
    let assert =
        AssertRequest { name: "owner".into(), lock_type: LockType::Exclusive, cookie: "c1".into(), tag: String::new() };
    io.operate("shard", WriteOp::new().exec("lock", "assert_locked", assert.encode()).append("guarded")).await.unwrap();
    let wrong = AssertRequest { cookie: "other".into(), ..assert };
    let e2 = io
        .operate("shard", WriteOp::new().exec("lock", "assert_locked", wrong.encode()).append("nope"))
        .await
        .unwrap_err();
    assert_eq!(e2.errno, Errno::Busy);
    assert_eq!(io.read_full("shard").await.unwrap().as_ref(), b"guarded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_clear_errors() {
    let (_dir, e) = cluster(&["osd_max_object_size=1000", "osd_max_write_size=600"]).await;
    let missing = e.rados.ioctx("nope").await.err().unwrap();
    assert_eq!(missing.errno, Errno::NotFound);
    assert!(missing.message.contains("nope"), "{missing}");
    let io = pool(&e, "p").await;
    let cases: Vec<(WriteOp, Errno, &str)> = vec![
        (WriteOp::new().exec("nosuch", "m", Bytes::new()), Errno::NotSupported, "nosuch"),
        (WriteOp::new().exec("lock", "nosuch", Bytes::new()), Errno::NotSupported, "nosuch"),
        (WriteOp::new().exec("lock", "lock", Bytes::from_static(b"\x01\xff\xff")), Errno::InvalidArgument, "lock.lock"),
        (WriteOp::new().exec("lock", "lock", Bytes::new()), Errno::InvalidArgument, "lock.lock"),
        (WriteOp::new().set_xattr("big", vec![0u8; 70_000]), Errno::TooBig, "osd_max_attr_size"),
        (WriteOp::new().set_xattr(&"n".repeat(101), "v"), Errno::NameTooLong, "osd_max_attr_name_len"),
        (WriteOp::new().write(900, vec![1u8; 200]), Errno::FileTooBig, "osd_max_object_size"),
        (WriteOp::new().write(0, vec![1u8; 700]), Errno::TooBig, "osd_max_write_size"),
        (WriteOp::new().truncate(5000), Errno::FileTooBig, "osd_max_object_size"),
        (WriteOp::new().assert_version(0), Errno::InvalidArgument, "version 0"),
    ];
    for (op, errno, needle) in cases {
        let e = io.operate("obj", op.clone()).await.unwrap_err();
        assert_eq!(e.errno, errno, "{op:?}: {e}");
        assert!(e.message.contains(needle), "{op:?}: '{e}' should mention {needle}");
    }
    assert_eq!(io.stat("obj").await.unwrap_err().errno, Errno::NotFound, "no failed op created the object");
    let sneaky = ReadOp::new().push(shoal_types::Step::Append { data: Bytes::from_static(b"x") });
    assert_eq!(io.read("obj", sneaky).await.unwrap_err().errno, Errno::InvalidArgument);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listing_spans_pgs_namespaces_and_pages() {
    let (_dir, e) = cluster(&[]).await;
    let mut io = pool(&e, "p").await;
    for i in 0..150 {
        io.set_namespace(if i % 3 == 0 { "ns1" } else { "" });
        io.write_full(&format!("o{i}"), Bytes::from(vec![1])).await.unwrap();
    }
    io.set_namespace("ns1");
    let mut names: Vec<String> = Vec::new();
    let mut cursor = Some(ListCursor::default());
    while let Some(c) = cursor {
        let (page, next) = io.list(c, 7, false).await.unwrap();
        assert!(page.len() <= 7);
        names.extend(page.into_iter().map(|o| o.name));
        cursor = next;
    }
    names.sort();
    let mut expected: Vec<String> = (0..150).filter(|i| i % 3 == 0).map(|i| format!("o{i}")).collect();
    expected.sort();
    assert_eq!(names, expected);
    assert_eq!(io.list_all(true).await.unwrap().len(), 150);
    e.rados.pool_delete("p").await.unwrap();
    assert_eq!(e.rados.ioctx("p").await.err().unwrap().errno, Errno::NotFound);
    let again = pool(&e, "p").await;
    assert!(again.list_all(true).await.unwrap().is_empty(), "a deleted pool's objects are gone");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchers_receive_notifies_and_silent_ones_time_out() {
    let (_dir, e) = cluster(&[]).await;
    let io = pool(&e, "p").await;
    assert_eq!(io.watch("missing").await.err().unwrap().errno, Errno::NotFound);
    io.write_full("ctl", Bytes::new()).await.unwrap();
    let mut acking = io.watch("ctl").await.unwrap();
    let _silent = io.watch("ctl").await.unwrap();
    let responder = tokio::spawn(async move {
        match acking.next().await {
            Some(WatchEvent::Notify(n)) => {
                assert_eq!(n.event.payload.as_ref(), b"invalidate user.1");
                n.ack(Bytes::from_static(b"done")).await.unwrap();
            }
            other => panic!("{other:?}"),
        }
        acking
    });
    let reply = io.notify("ctl", Bytes::from_static(b"invalidate user.1"), Duration::from_millis(500)).await.unwrap();
    assert_eq!(reply.acks.len(), 1);
    assert_eq!(reply.acks[0].1.as_ref(), b"done");
    assert_eq!(reply.timed_out.len(), 1, "the watcher that never acks is reported");
    let acking = responder.await.unwrap();
    acking.unwatch().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_share_wal_syncs_and_keep_order() {
    let (_dir, e) = cluster(&[]).await;
    let io = pool(&e, "p").await;
    let before = e.store.stats().wal_syncs;
    let tasks: Vec<_> = (0..16)
        .map(|w| {
            let io = io.clone();
            tokio::spawn(async move {
                for i in 0..50u32 {
                    let entry = (Bytes::from(format!("{i:04}")), Bytes::new());
                    io.operate(
                        &format!("w{w}"),
                        WriteOp::new().append(Bytes::from(i.to_be_bytes().to_vec())).omap_set([entry]),
                    )
                    .await
                    .unwrap();
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let syncs = e.store.stats().wal_syncs - before;
    assert!(syncs < 800, "800 acknowledged writes took {syncs} WAL syncs: group commit is not sharing them");
    for w in 0..16 {
        let data = io.read_full(&format!("w{w}")).await.unwrap();
        let seen: Vec<u32> = data.chunks(4).map(|c| u32::from_be_bytes(c.try_into().unwrap())).collect();
        assert_eq!(seen, (0..50).collect::<Vec<_>>(), "one client's ops apply in order");
    }
    let stat = io.stat("w0").await.unwrap();
    assert_eq!(stat.size, 200);
    let vals = io.read("w0", ReadOp::new().omap_get_vals(Bytes::new(), Bytes::from_static(b"004"), 100)).await.unwrap();
    let StepOutput::OmapVals { entries, more } = &vals.outputs[0] else { panic!() };
    assert_eq!((entries.len(), *more), (10, false));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_reach_the_object_layer_over_authenticated_tcp() {
    use shoal_transport::{Credentials, TcpNetwork};
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let network = Arc::new(TcpNetwork::new(Credentials::new("client.admin", b"cluster secret"), 64 << 20));
    let config = Config::from_settings(&[]).unwrap();
    let e = Embedded::open_on(dir.path(), &config, network, "127.0.0.1:0", "127.0.0.1:0", 1).await.unwrap();
    let io = pool(&e, "p").await;
    io.write_full("obj", Bytes::from(vec![7u8; 100_000])).await.unwrap();
    assert_eq!(io.read_full("obj").await.unwrap().len(), 100_000);
    let osd_addr = e.rados.map().osds.values().next().unwrap().addr.clone();
    assert!(osd_addr.starts_with("127.0.0.1:"), "the OSD is reached over TCP: {osd_addr}");

    // A second client that knows the secret gets in; one that does not is refused.
    let mon = e.mon_addr().to_owned();
    let friend = shoal_client::Rados::connect(
        Arc::new(TcpNetwork::new(Credentials::new("client.admin", b"cluster secret"), 1 << 20)),
        &mon,
    )
    .await
    .unwrap();
    assert_eq!(friend.ioctx("p").await.unwrap().read_full("obj").await.unwrap().len(), 100_000);
    let refused = shoal_client::Rados::connect(
        Arc::new(TcpNetwork::new(Credentials::new("client.admin", b"wrong"), 1 << 20)),
        &mon,
    )
    .await
    .err()
    .unwrap();
    assert_eq!(refused.errno, Errno::AccessDenied);
    assert!(refused.message.contains("authentication failed"), "{refused}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resent_write_is_applied_once_even_after_restart() {
    use shoal_transport::{Credentials, Network, TcpNetwork};
    use shoal_types::msg::{Message, OsdOp, Reply, Request};
    use shoal_types::{ClientId, ObjectName, ReqId, Step};
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let network = Arc::new(TcpNetwork::new(Credentials::new("client.admin", b"s"), 1 << 20));
    let config = Config::from_settings(&[]).unwrap();
    let mut replies = Vec::new();
    for restart in 0..2 {
        let e = Embedded::open_on(dir.path(), &config, network.clone(), "127.0.0.1:0", "127.0.0.1:0", 1).await.unwrap();
        if restart == 0 {
            pool(&e, "p").await;
        }
        let io = e.rados.ioctx("p").await.unwrap();
        let map = e.rados.map();
        let osd_addr = map.osds.values().next().unwrap().addr.clone();
        let mut conn = network.connect(&osd_addr).await.unwrap();
        let op = OsdOp {
            reqid: ReqId { client: ClientId(42), tid: 1 },
            pool: io.pool().id,
            object: ObjectName::new("", "once"),
            map_epoch: map.epoch,
            steps: vec![Step::Append { data: Bytes::from_static(b"x") }],
        };
        for tid in 0..2 {
            conn.sender.send(Message::Request { tid, request: Request::Op(op.clone()) }).await.unwrap();
            match conn.receiver.recv().await {
                Some(Message::Reply { reply: Ok(Reply::Op(r)), .. }) => replies.push(r.version),
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(io.read_full("once").await.unwrap().as_ref(), b"x", "applied exactly once");
        e.close();
    }
    assert!(replies.windows(2).all(|w| w[0] == w[1]), "every resend got the first reply: {replies:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_notify_over_tcp_reports_a_vanished_watcher() {
    use shoal_transport::{Credentials, TcpNetwork};
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let net = || Arc::new(TcpNetwork::new(Credentials::new("client.admin", b"secret"), 1 << 20));
    let config = Config::from_settings(&[]).unwrap();
    let e = Embedded::open_on(dir.path(), &config, net(), "127.0.0.1:0", "127.0.0.1:0", 1).await.unwrap();
    let io = pool(&e, "p").await;
    io.write_full("ctl", Bytes::new()).await.unwrap();
    let watcher = shoal_client::Rados::connect(net(), e.mon_addr()).await.unwrap();
    let mut watch = watcher.ioctx("p").await.unwrap().watch("ctl").await.unwrap();
    let acker = tokio::spawn(async move {
        if let Some(WatchEvent::Notify(n)) = watch.next().await {
            n.ack(Bytes::from_static(b"seen")).await.unwrap();
        }
        watch
    });
    let reply = io.notify("ctl", Bytes::from_static(b"hello"), Duration::from_secs(5)).await.unwrap();
    assert_eq!(reply.acks.len(), 1);
    assert_eq!(reply.acks[0].0.client, watcher.client_id());
    // The watcher's process goes away: its watch is dropped and a notify reports it.
    let watch = acker.await.unwrap();
    drop(watch);
    drop(watcher);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let reply = io.notify("ctl", Bytes::from_static(b"again"), Duration::from_millis(300)).await.unwrap();
        if reply.acks.is_empty() && reply.timed_out.is_empty() {
            break; // the OSD noticed the closed connection and forgot the watch
        }
        assert!(reply.acks.is_empty(), "a vanished watcher cannot ack");
        assert!(std::time::Instant::now() < deadline, "the closed connection's watch was never dropped");
    }
}

/// An operation or a reply with more data than one message may carry gets E2BIG at once.
/// Over TCP its frame would be refused, the connection dropped and the operation resent
/// until it timed out (a 128 MiB `rados put` hung for 300 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operation_or_reply_larger_than_a_message_gets_e2big_at_once() {
    let (_dir, e) = cluster(&["osd_max_write_size=268435456"]).await;
    let io = pool(&e, "p").await;
    let half = vec![7u8; 64 << 20];
    let whole = io.write_full("big", [half.clone(), half.clone()].concat()).await.map(|()| "written").unwrap_err();
    assert_eq!(whole.errno, Errno::TooBig, "{whole}");
    assert!(whole.message.contains("'big'") && whole.message.contains("parts"), "{whole}");
    io.write_full("big", half.clone()).await.unwrap();
    io.operate("big", WriteOp::new().write(64 << 20, half.clone())).await.unwrap();
    let read = io.read_full("big").await.map(|data| data.len()).unwrap_err();
    assert_eq!(read.errno, Errno::TooBig, "a 128 MiB reply: {read}");
    let reply = io.read("big", ReadOp::new().read(64 << 20, 64 << 20)).await.unwrap();
    assert!(reply.outputs == [StepOutput::Data(half.into())], "a part fits");
}
