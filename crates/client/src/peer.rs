//! One connection to a daemon: requests matched to replies, notifications routed to the
//! watches that asked for them.

use crate::watch::WatchTable;
use shoal_transport::{Network, Rpc};
use shoal_types::msg::{Message, Reply, Request};
use shoal_types::{ClientId, Result};
use std::sync::Arc;

/// A live connection to one daemon.
pub struct Peer {
    rpc: Arc<Rpc>,
    watches: Arc<WatchTable>,
}

impl Peer {
    /// Connects to `addr` and introduces the client.
    pub async fn open(network: &dyn Network, addr: &str, client: ClientId) -> Result<Arc<Peer>> {
        let watches = Arc::new(WatchTable::default());
        let (on_notify, on_close) = (watches.clone(), watches.clone());
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
            Box::new(move || on_close.connection_lost()),
        )
        .await?;
        Ok(Arc::new(Peer { rpc, watches }))
    }

    /// The watches registered through this connection.
    pub fn watches(&self) -> &WatchTable {
        &self.watches
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
