//! What connects peers, whatever carries the bytes: a [`Network`] binds listeners and makes
//! [`Connection`]s, each a pair of message channels.

use shoal_types::Result;
use shoal_types::msg::Message;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use tokio::sync::mpsc;

/// Connections waiting to be accepted before connectors wait.
pub(crate) const ACCEPT_QUEUE: usize = 128;
/// Messages queued per direction of a connection before senders wait.
pub const CONNECTION_QUEUE: usize = 4096;

/// One end of a connection.
pub struct Connection {
    /// Sends to the peer; clone it to send from several tasks.
    pub sender: mpsc::Sender<Message>,
    /// Receives from the peer; `None` once the peer has gone.
    pub receiver: mpsc::Receiver<Message>,
    /// Who the peer authenticated as.
    pub peer: Peer,
}

/// Who is at the other end of a connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Peer {
    /// The entity it authenticated as (`osd.3`, `client.rgw.0`).
    pub entity: Arc<str>,
    /// Whether it proved the cluster secret: a daemon of the cluster or its
    /// administrator, allowed everything; otherwise its caps say what it may do.
    pub cluster: bool,
}

impl Peer {
    /// A peer of the cluster itself: in-process connections, and the daemons a client
    /// connected to.
    pub fn daemon() -> Peer {
        Peer { entity: Arc::from("cluster"), cluster: true }
    }
}

/// Two connected ends, each trusting the other as the cluster's.
pub fn connection_pair() -> (Connection, Connection) {
    let (a_tx, a_rx) = mpsc::channel(CONNECTION_QUEUE);
    let (b_tx, b_rx) = mpsc::channel(CONNECTION_QUEUE);
    (
        Connection { sender: a_tx, receiver: b_rx, peer: Peer::daemon() },
        Connection { sender: b_tx, receiver: a_rx, peer: Peer::daemon() },
    )
}

/// Incoming connections on one address.
pub struct Listener {
    pub(crate) incoming: mpsc::Receiver<Connection>,
    pub(crate) local_addr: String,
}

impl Listener {
    /// The address peers reach this listener at (for TCP, with the port actually bound).
    pub fn local_addr(&self) -> &str {
        &self.local_addr
    }

    /// The next incoming connection; `None` when the network is gone.
    pub async fn accept(&mut self) -> Option<Connection> {
        self.incoming.recv().await
    }
}

/// A future returned by [`Network::connect`].
pub type ConnectFuture<'a> = Pin<Box<dyn Future<Output = Result<Connection>> + Send + 'a>>;

/// Where daemons listen and clients connect.
pub trait Network: Send + Sync + 'static {
    /// Starts listening on `addr`.
    fn bind(&self, addr: &str) -> Result<Listener>;
    /// Opens a connection to whoever listens on `addr`.
    fn connect<'a>(&'a self, addr: &'a str) -> ConnectFuture<'a>;
}
