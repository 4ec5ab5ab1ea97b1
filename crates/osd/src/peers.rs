//! Links to other OSDs. Each destination has one task and one connection; requests to it
//! leave in the order they were queued, which replication relies on (a push of an object
//! and a later write to it must arrive in that order). A lost connection fails the
//! requests in flight; the PG that sent them peers again, and the next request connects
//! anew.

use shoal_transport::{Network, Rpc};
use shoal_types::msg::{PeerRequest, Request};
use shoal_types::{ClientId, OsdId, OsdMap, Result, err};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, watch};

pub use shoal_transport::rpc::OnReply;

struct Outgoing {
    request: PeerRequest,
    on_reply: OnReply,
}

/// Ordered request links from this OSD to its peers.
pub struct PeerNet {
    me: OsdId,
    network: Arc<dyn Network>,
    map: watch::Receiver<Arc<OsdMap>>,
    runtime: tokio::runtime::Handle,
    links: Mutex<HashMap<OsdId, mpsc::UnboundedSender<Outgoing>>>,
}

impl PeerNet {
    /// Links for OSD `me`, resolving peers' addresses in `map`; tasks run on `runtime`.
    pub fn new(
        me: OsdId,
        network: Arc<dyn Network>,
        map: watch::Receiver<Arc<OsdMap>>,
        runtime: tokio::runtime::Handle,
    ) -> Arc<PeerNet> {
        Arc::new(PeerNet { me, network, map, runtime, links: Mutex::default() })
    }

    /// Queues `request` to `to`; `on_reply` gets the reply or the failure. Never blocks.
    pub fn send(&self, to: OsdId, request: PeerRequest, on_reply: OnReply) {
        let mut links = self.links.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let outgoing = Outgoing { request, on_reply };
        let outgoing = match links.get(&to) {
            Some(link) => match link.send(outgoing) {
                Ok(()) => return,
                Err(mpsc::error::SendError(back)) => back,
            },
            None => outgoing,
        };
        let (tx, rx) = mpsc::unbounded_channel();
        let _ = tx.send(outgoing);
        links.insert(to, tx);
        let link = Link { me: self.me, to, network: self.network.clone(), map: self.map.clone() };
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
}

impl Link {
    async fn run(self, mut queue: mpsc::UnboundedReceiver<Outgoing>) {
        let mut conn: Option<Arc<Rpc>> = None;
        while let Some(Outgoing { request, on_reply }) = queue.recv().await {
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
        let to = self.to;
        Rpc::open(
            self.network.as_ref(),
            &addr,
            hello,
            Box::new(move |message, _| tracing::warn!(?message, peer = %to, "unexpected message from a peer")),
            Box::new(|| {}),
        )
        .await
    }
}
