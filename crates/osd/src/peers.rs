//! Links to other OSDs. Each destination has one task and one connection; requests to it
//! leave in the order they were queued, which replication relies on (a push of an object
//! and a later write to it must arrive in that order). A lost connection fails the
//! requests in flight; the PG that sent them peers again, and the next request connects
//! anew. A peer that stops reading (stopped, partitioned) cannot make its link hold more
//! than [`LINK_QUEUE_BYTES`]: later requests fail at once with EAGAIN.

use shoal_transport::{Network, Rpc};
use shoal_types::msg::{PeerRequest, Request};
use shoal_types::{ClientId, OsdId, OsdMap, Result, err};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, watch};

pub use shoal_transport::rpc::OnReply;

/// Most bytes of requests queued on one link, not counting the one being sent.
pub const LINK_QUEUE_BYTES: usize = 256 << 20;

/// What a queued request counts against [`LINK_QUEUE_BYTES`]: its payload, plus 1 KiB.
fn queued_cost(request: &PeerRequest) -> usize {
    let payload = match request {
        PeerRequest::RepOp(rep) => rep.txn.len(),
        PeerRequest::EcWrite(ec) => ec.write.txn.len(),
        PeerRequest::Push { txn, .. } | PeerRequest::PushAt { txn, .. } | PeerRequest::PushRebuilt { txn, .. } => {
            txn.len()
        }
        _ => 0,
    };
    payload + 1024
}

struct Outgoing {
    request: PeerRequest,
    on_reply: OnReply,
    cost: usize,
}

/// The sending end of one link, and the bytes queued on it.
struct LinkQueue {
    tx: mpsc::UnboundedSender<Outgoing>,
    queued: Arc<AtomicUsize>,
}

/// Ordered request links from this OSD to its peers.
pub struct PeerNet {
    me: OsdId,
    network: Arc<dyn Network>,
    map: watch::Receiver<Arc<OsdMap>>,
    runtime: tokio::runtime::Handle,
    links: Mutex<HashMap<OsdId, LinkQueue>>,
    /// Where each peer whose connection closed is named, if anywhere.
    closed: Option<mpsc::UnboundedSender<OsdId>>,
}

impl PeerNet {
    /// Links for OSD `me`, resolving peers' addresses in `map`; tasks run on `runtime`.
    pub fn new(
        me: OsdId,
        network: Arc<dyn Network>,
        map: watch::Receiver<Arc<OsdMap>>,
        runtime: tokio::runtime::Handle,
    ) -> Arc<PeerNet> {
        Self::with_closed(me, network, map, runtime, None)
    }

    /// Links as [`PeerNet::new`] makes, and a receiver that names the peer each time a
    /// connection to one closes (the peer may have died).
    pub fn watched(
        me: OsdId,
        network: Arc<dyn Network>,
        map: watch::Receiver<Arc<OsdMap>>,
        runtime: tokio::runtime::Handle,
    ) -> (Arc<PeerNet>, mpsc::UnboundedReceiver<OsdId>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Self::with_closed(me, network, map, runtime, Some(tx)), rx)
    }

    fn with_closed(
        me: OsdId,
        network: Arc<dyn Network>,
        map: watch::Receiver<Arc<OsdMap>>,
        runtime: tokio::runtime::Handle,
        closed: Option<mpsc::UnboundedSender<OsdId>>,
    ) -> Arc<PeerNet> {
        Arc::new(PeerNet { me, network, map, runtime, links: Mutex::default(), closed })
    }

    /// Queues `request` to `to`; `on_reply` gets the reply or the failure (EAGAIN at once
    /// when the link is full). Never blocks.
    pub fn send(&self, to: OsdId, request: PeerRequest, on_reply: OnReply) {
        let mut links = self.links.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let cost = queued_cost(&request);
        let outgoing = Outgoing { request, on_reply, cost };
        let outgoing = match links.get(&to) {
            Some(link) => {
                let queued = link.queued.load(Ordering::Acquire);
                if queued + cost > LINK_QUEUE_BYTES {
                    drop(links);
                    let full = format!("{queued} bytes wait on the link to {to}: it does not keep up");
                    return (outgoing.on_reply)(Err(err::again(full)));
                }
                link.queued.fetch_add(cost, Ordering::AcqRel);
                match link.tx.send(outgoing) {
                    Ok(()) => return,
                    Err(mpsc::error::SendError(back)) => back,
                }
            }
            None => outgoing,
        };
        let (tx, rx) = mpsc::unbounded_channel();
        let queued = Arc::new(AtomicUsize::new(outgoing.cost));
        let _ = tx.send(outgoing);
        links.insert(to, LinkQueue { tx, queued: queued.clone() });
        let link = Link {
            me: self.me,
            to,
            network: self.network.clone(),
            map: self.map.clone(),
            queued,
            closed: self.closed.clone(),
        };
        self.runtime.spawn(link.run(rx));
    }
}

/// Requests awaiting replies; `None` once the connection's reader has finished (a request
/// registered after that would never be answered).
struct Link {
    me: OsdId,
    to: OsdId,
    network: Arc<dyn Network>,
    map: watch::Receiver<Arc<OsdMap>>,
    /// Bytes queued and not yet taken by this task.
    queued: Arc<AtomicUsize>,
    closed: Option<mpsc::UnboundedSender<OsdId>>,
}

impl Link {
    async fn run(self, mut queue: mpsc::UnboundedReceiver<Outgoing>) {
        let mut conn: Option<Arc<Rpc>> = None;
        while let Some(Outgoing { request, on_reply, cost }) = queue.recv().await {
            // Out of the queue: the one being sent waits in the connection's bounded channel.
            self.queued.fetch_sub(cost, Ordering::AcqRel);
            if conn.as_ref().is_none_or(|c| c.is_closed()) {
                match self.connect().await {
                    Ok(c) => conn = Some(c),
                    Err(e) => {
                        on_reply(Err(e));
                        continue;
                    }
                }
            }
            let Some(rpc) = conn.as_ref() else { continue };
            // Sent now, in queue order; the reply runs the callback on the reader task.
            rpc.start_with(Request::Peer(request), on_reply).await;
        }
    }

    async fn connect(&self) -> Result<Arc<Rpc>> {
        let addr = self
            .map
            .borrow()
            .osds
            .get(&self.to)
            .filter(|o| o.up)
            .map(|o| o.addr.clone())
            .ok_or_else(|| err::not_connected(format!("{} is not up in the map", self.to)))?;
        let hello = ClientId(u64::from(self.me.0) | 1 << 63);
        let (to, closed) = (self.to, self.closed.clone());
        Rpc::open(
            self.network.as_ref(),
            &addr,
            hello,
            Box::new(move |message, _| tracing::warn!(?message, peer = %to, "unexpected message from a peer")),
            Box::new(move || {
                if let Some(closed) = closed {
                    let _ = closed.send(to);
                }
            }),
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use shoal_transport::{CONNECTION_QUEUE, LocalNetwork};
    use shoal_types::msg::{Message, Reply};
    use shoal_types::{Errno, OsdEntry, PgId, PoolId};

    #[test]
    fn a_peer_that_stops_reading_fills_its_link_and_later_requests_fail_at_once() {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        runtime.block_on(async {
            let network = Arc::new(LocalNetwork::new());
            let mut listener = network.bind("osd.1").unwrap();
            // The peer answers the hello, then never reads again (a stopped process).
            let (held_tx, held_rx) = tokio::sync::oneshot::channel();
            tokio::spawn(async move {
                let mut conn = listener.accept().await.unwrap();
                if let Some(Message::Request { tid, .. }) = conn.receiver.recv().await {
                    conn.sender.send(Message::Reply { tid, reply: Ok(Reply::Done) }).await.unwrap();
                }
                let _ = held_tx.send(conn);
            });
            let mut map = OsdMap::default();
            let entry = OsdEntry { addr: "osd.1".into(), host: "h1".into(), weight: 0x10000, up: true, is_in: true };
            map.osds.insert(OsdId(1), entry);
            let (_map_tx, map_rx) = watch::channel(Arc::new(map));
            let links = PeerNet::new(OsdId(0), network, map_rx, tokio::runtime::Handle::current());
            let (results_tx, mut results) = mpsc::unbounded_channel();
            let txn = Bytes::from(vec![0u8; 1 << 20]);
            let pg = PgId { pool: PoolId(1), seed: 0 };
            let fit = LINK_QUEUE_BYTES / ((1 << 20) + 1024);
            let sent = fit + CONNECTION_QUEUE + 100;
            for _ in 0..sent {
                let tx = results_tx.clone();
                let push = PeerRequest::Push { pg, interval: 1, txn: txn.clone() };
                links.send(OsdId(1), push, Box::new(move |r| drop(tx.send(r))));
            }
            // Nothing is answered: whatever came back was refused by `send` itself.
            let mut refused = 0;
            while let Ok(result) = results.try_recv() {
                let e = result.expect_err("the peer answers nothing");
                assert_eq!(e.errno, Errno::Again, "{e}");
                refused += 1;
            }
            // The link queue holds `fit`; the connection's channel, the hello and the one
            // being sent take at most CONNECTION_QUEUE + 2 more.
            assert!(refused >= sent - fit - CONNECTION_QUEUE - 2, "{refused} of {sent} refused");
            assert!(refused < sent, "the link took nothing");
            drop(held_rx);
        });
    }
}
