//! One connection to a daemon: requests matched to replies by tid, notifications routed
//! to the watches that asked for them.

use crate::watch::WatchTable;
use shoal_transport::{Connection, Network};
use shoal_types::msg::{Message, Reply, Request};
use shoal_types::{ClientId, Result, err};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, oneshot};

/// Requests awaiting replies; `None` once the connection's reader has finished, so that a
/// request registered after that fails at once instead of waiting forever.
type PendingMap = Arc<Mutex<Option<HashMap<u64, oneshot::Sender<Result<Reply>>>>>>;

fn lock(pending: &PendingMap) -> std::sync::MutexGuard<'_, Option<HashMap<u64, oneshot::Sender<Result<Reply>>>>> {
    pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A live connection to one daemon.
pub struct Peer {
    addr: String,
    sender: mpsc::Sender<Message>,
    pending: PendingMap,
    next_tid: AtomicU64,
    closed: Arc<AtomicBool>,
    watches: Arc<WatchTable>,
}

impl Peer {
    /// Connects to `addr` and introduces the client.
    pub async fn open(network: &dyn Network, addr: &str, client: ClientId) -> Result<Arc<Peer>> {
        let Connection { sender, mut receiver } = network.connect(addr).await?;
        let pending: PendingMap = Arc::new(Mutex::new(Some(HashMap::new())));
        let closed = Arc::new(AtomicBool::new(false));
        let watches = Arc::new(WatchTable::default());
        // The reader task only holds a weak sender (for acks): when the last Peer handle is
        // dropped, the connection closes and the daemon forgets this client's watches.
        let ack_sender = sender.downgrade();
        let peer = Arc::new(Peer {
            addr: addr.to_owned(),
            sender,
            pending: pending.clone(),
            next_tid: AtomicU64::new(1),
            closed: closed.clone(),
            watches: watches.clone(),
        });
        let addr_owned = addr.to_owned();
        tokio::spawn(async move {
            while let Some(message) = receiver.recv().await {
                match message {
                    Message::Reply { tid, reply } => {
                        let waiter = lock(&pending).as_mut().and_then(|w| w.remove(&tid));
                        if let Some(waiter) = waiter {
                            let _ = waiter.send(reply);
                        }
                    }
                    Message::Notify(event) => {
                        if let Some(ack_to) = ack_sender.upgrade() {
                            watches.deliver(event, ack_to);
                        }
                    }
                    other => tracing::warn!(?other, addr = %addr_owned, "unexpected message"),
                }
            }
            closed.store(true, Ordering::Release);
            let waiters = lock(&pending).take().unwrap_or_default();
            for (_, w) in waiters {
                let _ = w.send(Err(err::not_connected(format!("connection to {addr_owned} closed"))));
            }
            watches.connection_lost();
        });
        peer.call(Request::Hello(client)).await?;
        Ok(peer)
    }

    /// The watches registered through this connection.
    pub fn watches(&self) -> &WatchTable {
        &self.watches
    }

    /// Whether the connection has closed.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire) || self.sender.is_closed()
    }

    /// Sends a request and waits for its reply.
    pub async fn call(&self, request: Request) -> Result<Reply> {
        let tid = self.next_tid.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        match lock(&self.pending).as_mut() {
            Some(waiting) => waiting.insert(tid, tx),
            None => return Err(err::not_connected(format!("connection to {} closed", self.addr))),
        };
        if self.sender.send(Message::Request { tid, request }).await.is_err() {
            lock(&self.pending).as_mut().map(|w| w.remove(&tid));
            return Err(err::not_connected(format!("connection to {} closed", self.addr)));
        }
        rx.await.unwrap_or_else(|_| Err(err::not_connected(format!("connection to {} closed", self.addr))))
    }
}
