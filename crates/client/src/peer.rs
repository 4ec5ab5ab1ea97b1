//! One connection to a daemon: requests matched to replies, notifications routed to the
//! client's watches.

use crate::watch::WatchTable;
use shoal_transport::{Network, Rpc};
use shoal_types::msg::{Message, Reply, Request};
use shoal_types::{ClientId, Result};
use std::sync::Arc;

/// A live connection to one daemon.
pub struct Peer {
    rpc: Arc<Rpc>,
}

impl Peer {
    /// Connects to `addr` and introduces the client; notifications go to `watches`, and
    /// `closed` is told when the connection ends (watches on it must move).
    pub async fn open(
        network: &dyn Network,
        addr: &str,
        client: ClientId,
        watches: Arc<WatchTable>,
        closed: Arc<tokio::sync::Notify>,
    ) -> Result<Arc<Peer>> {
        let on_notify = watches;
        let addr_owned = addr.to_owned();
        let rpc = Rpc::open(
            network,
            addr,
            client,
            Box::new(move |message, ack| match message {
                Message::Notify(event) => {
                    if let Some(ack_to) = ack.upgrade() {
                        on_notify.deliver(event, ack_to);
                    }
                }
                other => tracing::warn!(?other, addr = %addr_owned, "unexpected message"),
            }),
            Box::new(move || closed.notify_one()),
        )
        .await?;
        Ok(Arc::new(Peer { rpc }))
    }

    /// Whether the connection has closed.
    pub fn is_closed(&self) -> bool {
        self.rpc.is_closed()
    }

    /// Sends a request and waits for its reply.
    pub async fn call(&self, request: Request) -> Result<Reply> {
        self.rpc.call(request).await
    }
}
