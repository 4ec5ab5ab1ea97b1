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

/// Who waits for a reply: a task (through a oneshot), or a callback run by the reader.
enum Waiter {
    Task(oneshot::Sender<Result<Reply>>),
    Callback(OnReply),
}

impl Waiter {
    fn deliver(self, reply: Result<Reply>) {
        match self {
            Waiter::Task(tx) => {
                let _ = tx.send(reply);
            }
            Waiter::Callback(f) => f(reply),
        }
    }
}

/// A reply callback; it runs on the connection's reader task, so it must not block.
pub type OnReply = Box<dyn FnOnce(Result<Reply>) + Send>;

type Waiters = HashMap<u64, Waiter>;

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
        let Connection { sender, mut receiver, .. } = network.connect(addr).await?;
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
                            w.deliver(reply);
                        }
                    }
                    other => on_push(other, &weak),
                }
            }
            let waiters = lock(&pending).take().unwrap_or_default();
            for (_, w) in waiters {
                w.deliver(Err(err::not_connected("the connection closed")));
            }
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
        let (tx, rx) = oneshot::channel();
        let sent = self.send_request(request, Waiter::Task(tx)).await;
        let addr = self.addr.clone();
        async move {
            sent?;
            rx.await.unwrap_or_else(|_| Err(err::not_connected(format!("connection to {addr} closed"))))
        }
    }

    /// Sends `request` now (after every request started before it); `on_reply` runs with
    /// its reply or failure, on the connection's reader task.
    pub async fn start_with(&self, request: Request, on_reply: OnReply) {
        // A failure to send has already been given to the callback.
        let _ = self.send_request(request, Waiter::Callback(on_reply)).await;
    }

    /// Registers `waiter` for a fresh tid and sends the request; a failure to send is
    /// delivered to the waiter and returned.
    async fn send_request(&self, request: Request, waiter: Waiter) -> Result<()> {
        let tid = self.next_tid.fetch_add(1, Ordering::Relaxed);
        let closed = || err::not_connected(format!("connection to {} closed", self.addr));
        let rejected = match lock(&self.pending).as_mut() {
            Some(w) => {
                w.insert(tid, waiter);
                None
            }
            None => Some(waiter),
        };
        if let Some(waiter) = rejected {
            waiter.deliver(Err(closed()));
            return Err(closed());
        }
        if self.sender.send(Message::Request { tid, request }).await.is_err() {
            let waiter = lock(&self.pending).as_mut().and_then(|w| w.remove(&tid));
            if let Some(w) = waiter {
                w.deliver(Err(closed()));
            }
            return Err(closed());
        }
        Ok(())
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
