//! Requests and replies over one connection: each request gets a fresh tid and its reply
//! is matched back to it. Requests leave in the order they were started. Messages that are
//! not replies (notifications) go to a handler. When the connection closes, every request
//! still waiting fails with ENOTCONN, and so does every later one.

use crate::{Connection, Network};
use shoal_types::msg::{Message, Reply, Request};
use shoal_types::{ClientId, Result, err};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, oneshot};

type Waiters = HashMap<u64, oneshot::Sender<Result<Reply>>>;

/// Requests awaiting replies; `None` once the connection's reader has finished.
type Pending = Arc<Mutex<Option<Waiters>>>;

fn lock(pending: &Pending) -> std::sync::MutexGuard<'_, Option<Waiters>> {
    pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What to do with a message that is not a reply, and how to answer on this connection.
pub type PushHandler = Box<dyn Fn(Message, &mpsc::WeakSender<Message>) + Send + Sync>;

/// A connection used for requests and replies.
pub struct Rpc {
    addr: String,
    sender: mpsc::Sender<Message>,
    pending: Pending,
    next_tid: AtomicU64,
}

impl Rpc {
    /// Connects to `addr`, introduces itself as `hello`, routes non-reply messages to
    /// `on_push` and calls `on_close` when the connection ends. The reader holds only a
    /// weak sender, so dropping the `Rpc` closes the connection.
    pub async fn open(
        network: &dyn Network,
        addr: &str,
        hello: ClientId,
        on_push: PushHandler,
        on_close: Box<dyn FnOnce() + Send>,
    ) -> Result<Arc<Rpc>> {
        let Connection { sender, mut receiver } = network.connect(addr).await?;
        let pending: Pending = Arc::new(Mutex::new(Some(HashMap::new())));
        let rpc = Arc::new(Rpc {
            addr: addr.to_owned(),
            sender: sender.clone(),
            pending: pending.clone(),
            next_tid: AtomicU64::new(1),
        });
        let weak = sender.downgrade();
        drop(sender);
        tokio::spawn(async move {
            while let Some(message) = receiver.recv().await {
                match message {
                    Message::Reply { tid, reply } => {
                        let waiter = lock(&pending).as_mut().and_then(|w| w.remove(&tid));
                        if let Some(w) = waiter {
                            let _ = w.send(reply);
                        }
                    }
                    other => on_push(other, &weak),
                }
            }
            // Dropping the waiters fails them (see `start`).
            lock(&pending).take();
            on_close();
        });
        rpc.call(Request::Hello(hello)).await?;
        Ok(rpc)
    }

    /// Whether the connection has closed.
    pub fn is_closed(&self) -> bool {
        self.sender.is_closed() || lock(&self.pending).is_none()
    }

    /// The address this connection reaches.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Sends `request` now (after every request started before it); the returned future
    /// resolves to its reply.
    pub async fn start(&self, request: Request) -> impl Future<Output = Result<Reply>> + use<> {
        let tid = self.next_tid.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        let closed = || err::not_connected(format!("connection to {} closed", self.addr));
        let registered = lock(&self.pending).as_mut().map(|w| w.insert(tid, tx)).is_some();
        let failure = if !registered {
            Some(closed())
        } else if self.sender.send(Message::Request { tid, request }).await.is_err() {
            lock(&self.pending).as_mut().map(|w| w.remove(&tid));
            Some(closed())
        } else {
            None
        };
        let addr = self.addr.clone();
        async move {
            if let Some(e) = failure {
                return Err(e);
            }
            rx.await.unwrap_or_else(|_| Err(err::not_connected(format!("connection to {addr} closed"))))
        }
    }

    /// Sends a message that expects no reply.
    pub async fn send(&self, message: Message) -> Result<()> {
        self.sender.send(message).await.map_err(|_| err::not_connected(format!("connection to {} closed", self.addr)))
    }

    /// Sends a request and waits for its reply.
    pub async fn call(&self, request: Request) -> Result<Reply> {
        self.start(request).await.await
    }
}
