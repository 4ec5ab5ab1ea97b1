//! The messenger: daemons listen on addresses, peers connect to them, and a connection
//! carries [`Message`]s both ways with bounded queues (a slow peer slows its sender).
//!
//! [`LocalNetwork`] connects peers inside one process through channels, moving messages
//! as values; [`TcpNetwork`] implements the same [`Network`] trait over TCP, with mutual
//! authentication by a cluster secret or a client's key and frames, sealed or
//! checksummed as the two sides agree, carrying each message's versioned encoding. Nothing above this crate knows which one it uses.

pub mod auth;
pub mod frame;
mod network;
pub mod rpc;
pub mod tcp;

pub use auth::FrameMode;
pub(crate) use network::ACCEPT_QUEUE;
pub use network::{CONNECTION_QUEUE, ConnectFuture, Connection, Listener, Network, Peer, connection_pair};
pub use rpc::Rpc;
use shoal_types::{Result, err};
use std::collections::HashMap;
use std::sync::Mutex;
pub use tcp::{Credentials, FrameModes, TcpNetwork};
use tokio::sync::mpsc;

/// An in-process network: addresses are names, connections are channel pairs.
#[derive(Default)]
pub struct LocalNetwork {
    listeners: Mutex<HashMap<String, mpsc::Sender<Connection>>>,
}

impl LocalNetwork {
    /// A network with nothing bound.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Network for LocalNetwork {
    fn bind(&self, addr: &str) -> Result<Listener> {
        let mut listeners = self.listeners.lock().map_err(|_| err::io("network lock poisoned"))?;
        if listeners.get(addr).is_some_and(|l| !l.is_closed()) {
            return Err(err::exists(format!("address {addr} is already bound")));
        }
        let (tx, rx) = mpsc::channel(ACCEPT_QUEUE);
        listeners.insert(addr.to_owned(), tx);
        Ok(Listener { incoming: rx, local_addr: addr.to_owned() })
    }

    fn connect<'a>(&'a self, addr: &'a str) -> ConnectFuture<'a> {
        Box::pin(async move {
            let accept_queue = self
                .listeners
                .lock()
                .map_err(|_| err::io("network lock poisoned"))?
                .get(addr)
                .cloned()
                .ok_or_else(|| err::not_connected(format!("nothing listens on {addr}")))?;
            let (ours, theirs) = connection_pair();
            accept_queue.send(theirs).await.map_err(|_| err::not_connected(format!("listener on {addr} is gone")))?;
            Ok(ours)
        })
    }
}

/// A network whose daemons also serve their own process without a socket: `bind` listens
/// on the inner network (TCP, for other processes) and registers the bound address, and
/// `connect` to a registered address hands over a channel pair, so messages move as
/// values: no encoding, copy, checksum or loopback round trip. `shoal server` runs its
/// gateway and its object layer over one.
pub struct LocalFirst {
    inner: std::sync::Arc<dyn Network>,
    local: Mutex<HashMap<String, mpsc::Sender<Connection>>>,
}

impl LocalFirst {
    /// Wraps `inner`, which carries every connection from or to another process.
    pub fn new(inner: std::sync::Arc<dyn Network>) -> Self {
        LocalFirst { inner, local: Mutex::new(HashMap::new()) }
    }
}

impl Network for LocalFirst {
    fn bind(&self, addr: &str) -> Result<Listener> {
        let mut outer = self.inner.bind(addr)?;
        let local_addr = outer.local_addr().to_owned();
        let (tx, rx) = mpsc::channel(ACCEPT_QUEUE);
        self.local.lock().map_err(|_| err::io("network lock poisoned"))?.insert(local_addr.clone(), tx.clone());
        tokio::spawn(async move {
            while let Some(conn) = tokio::select! {
                conn = outer.accept() => conn,
                () = tx.closed() => None,
            } {
                if tx.send(conn).await.is_err() {
                    return;
                }
            }
        });
        Ok(Listener { incoming: rx, local_addr })
    }

    fn connect<'a>(&'a self, addr: &'a str) -> ConnectFuture<'a> {
        let local = self.local.lock().ok().and_then(|l| l.get(addr).filter(|q| !q.is_closed()).cloned());
        match local {
            Some(accept_queue) => Box::pin(async move {
                let (ours, theirs) = connection_pair();
                accept_queue
                    .send(theirs)
                    .await
                    .map_err(|_| err::not_connected(format!("listener on {addr} is gone")))?;
                Ok(ours)
            }),
            None => self.inner.connect(addr),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_types::msg::{Message, Reply, Request};

    #[tokio::test]
    async fn local_first_keeps_own_connections_in_process() {
        let tcp: std::sync::Arc<dyn Network> =
            std::sync::Arc::new(TcpNetwork::new(Credentials::new("client.admin", b"secret"), 1 << 20));
        let net = LocalFirst::new(tcp.clone());
        let mut listener = net.bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().to_owned();
        assert!(addr.starts_with("127.0.0.1:") && !addr.ends_with(":0"), "{addr}");
        let server = tokio::spawn(async move {
            for _ in 0..2 {
                let mut conn = listener.accept().await.unwrap();
                tokio::spawn(async move {
                    while let Some(Message::Request { tid, .. }) = conn.receiver.recv().await {
                        conn.sender.send(Message::Reply { tid, reply: Ok(Reply::Done) }).await.unwrap();
                    }
                });
            }
        });
        let request = Message::Request { tid: 1, request: Request::Tell("df".into()) };
        // In process, through the shortcut; from "another process", over TCP.
        for mut conn in [net.connect(&addr).await.unwrap(), tcp.connect(&addr).await.unwrap()] {
            conn.sender.send(request.clone()).await.unwrap();
            assert_eq!(conn.receiver.recv().await, Some(Message::Reply { tid: 1, reply: Ok(Reply::Done) }));
        }
        server.await.unwrap();
    }

    #[tokio::test]
    async fn connect_and_exchange() {
        let net = LocalNetwork::new();
        let mut listener = net.bind("osd.0").unwrap();
        assert!(net.bind("osd.0").is_err(), "an address is bound once");
        let server = tokio::spawn(async move {
            let mut conn = listener.accept().await.unwrap();
            while let Some(Message::Request { tid, .. }) = conn.receiver.recv().await {
                conn.sender.send(Message::Reply { tid, reply: Ok(Reply::Done) }).await.unwrap();
            }
        });
        let mut conn = net.connect("osd.0").await.unwrap();
        conn.sender
            .send(Message::Request { tid: 5, request: Request::Map(shoal_types::msg::MapCommand::Get) })
            .await
            .unwrap();
        assert_eq!(conn.receiver.recv().await, Some(Message::Reply { tid: 5, reply: Ok(Reply::Done) }));
        drop(conn);
        server.await.unwrap();
        let e = net.connect("nowhere").await.err().unwrap();
        assert_eq!(e.errno, shoal_types::Errno::NotConnected);
    }
}
