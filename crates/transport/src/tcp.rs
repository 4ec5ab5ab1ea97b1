//! The messenger over TCP: every connection starts with mutual authentication by the
//! cluster secret (see [`crate::auth`]); then each [`Message`] travels as one checksummed
//! frame (see [`crate::frame`]). Above this module a TCP connection is the same pair of
//! bounded channels as a local one.

use crate::auth::{self, Handshake, NONCE_LEN};
use crate::frame::{self, Decoder};
use crate::{ACCEPT_QUEUE, CONNECTION_QUEUE, ConnectFuture, Connection, Listener, Network};
use bytes::Bytes;
use shoal_types::msg::Message;
use shoal_types::{RadosError, Result, Versioned, err};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::mpsc;

/// How long a peer has to complete the handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// A TCP network whose peers share a cluster secret.
#[derive(Clone)]
pub struct TcpNetwork {
    secret: Arc<Vec<u8>>,
    max_message_bytes: usize,
}

impl TcpNetwork {
    /// A network authenticating peers with `secret` and refusing messages over `max_message_bytes`.
    pub fn new(secret: &[u8], max_message_bytes: usize) -> Self {
        TcpNetwork { secret: Arc::new(secret.to_vec()), max_message_bytes }
    }
}

fn io_err(context: &str, e: std::io::Error) -> RadosError {
    err::not_connected(format!("{context}: {e}"))
}

fn nonce() -> [u8; NONCE_LEN] {
    rand::random()
}

/// Reads one frame (handshake phase) from the stream.
async fn read_frame(stream: &mut TcpStream, decoder: &mut Decoder) -> Result<Bytes> {
    let mut buf = [0u8; 4096];
    loop {
        if let Some(payload) = decoder.next_frame()? {
            return Ok(payload);
        }
        let n = stream.read(&mut buf).await.map_err(|e| io_err("handshake read", e))?;
        if n == 0 {
            return Err(err::not_connected("the peer closed the connection during the handshake"));
        }
        decoder.feed(&buf[..n]);
    }
}

async fn send(stream: &mut TcpStream, h: &Handshake) -> Result<()> {
    stream.write_all(&frame::encode(&h.encode())).await.map_err(|e| io_err("handshake write", e))
}

async fn server_handshake(stream: &mut TcpStream, secret: &[u8], decoder: &mut Decoder) -> Result<()> {
    let server_nonce = nonce();
    send(stream, &Handshake::Challenge { nonce: server_nonce }).await?;
    match Handshake::decode(&read_frame(stream, decoder).await?)? {
        Handshake::ClientProof { nonce: client_nonce, proof } => {
            if !auth::verify_client(secret, &server_nonce, &client_nonce, &proof) {
                return Err(err::not_connected("authentication failed: the peer does not know the cluster secret"));
            }
            let proof = auth::server_proof(secret, &client_nonce, &server_nonce);
            send(stream, &Handshake::ServerProof { proof }).await
        }
        other => Err(err::invalid(format!("handshake: expected a client proof, got {other:?}"))),
    }
}

async fn client_handshake(stream: &mut TcpStream, secret: &[u8], decoder: &mut Decoder) -> Result<()> {
    let Handshake::Challenge { nonce: server_nonce } = Handshake::decode(&read_frame(stream, decoder).await?)? else {
        return Err(err::invalid("handshake: expected a challenge"));
    };
    let client_nonce = nonce();
    let proof = auth::client_proof(secret, &server_nonce, &client_nonce);
    send(stream, &Handshake::ClientProof { nonce: client_nonce, proof }).await?;
    match read_frame(stream, decoder).await.and_then(|f| Handshake::decode(&f)) {
        Ok(Handshake::ServerProof { proof }) if auth::verify_server(secret, &client_nonce, &server_nonce, &proof) => {
            Ok(())
        }
        Ok(Handshake::ServerProof { .. }) => {
            Err(err::not_connected("authentication failed: the server does not know the cluster secret"))
        }
        Ok(other) => Err(err::invalid(format!("handshake: expected a server proof, got {other:?}"))),
        Err(_) => Err(err::not_connected("authentication failed: the server refused this client's cluster secret")),
    }
}

/// Turns an authenticated stream into a [`Connection`]: one task decodes incoming
/// frames, one encodes outgoing messages (several per write when they queue up).
fn start_pumps(stream: TcpStream, decoder: Decoder, peer: String) -> Connection {
    let _ = stream.set_nodelay(true);
    let (read_half, write_half) = stream.into_split();
    let (in_tx, in_rx) = mpsc::channel(CONNECTION_QUEUE);
    let (out_tx, out_rx) = mpsc::channel(CONNECTION_QUEUE);
    tokio::spawn(read_pump(read_half, decoder, in_tx, peer.clone()));
    tokio::spawn(write_pump(write_half, out_rx, peer));
    Connection { sender: out_tx, receiver: in_rx }
}

async fn read_pump(mut read: OwnedReadHalf, mut decoder: Decoder, to_app: mpsc::Sender<Message>, peer: String) {
    loop {
        loop {
            match decoder.next_frame().and_then(|f| f.map(|p| Message::decode_shared(&p)).transpose()) {
                Ok(Some(message)) => {
                    if to_app.send(message).await.is_err() {
                        return;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!(%peer, error = %e, "dropping connection: bad frame");
                    return;
                }
            }
        }
        match read.read_buf(decoder.read_buffer()).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

async fn write_pump(mut write: OwnedWriteHalf, mut from_app: mpsc::Receiver<Message>, peer: String) {
    while let Some(first) = from_app.recv().await {
        let mut out = frame::append(Vec::new(), |buf| first.encode_after(buf));
        while out.len() < 1 << 20 {
            match from_app.try_recv() {
                Ok(next) => out = frame::append(out, |buf| next.encode_after(buf)),
                Err(_) => break,
            }
        }
        if let Err(e) = write.write_all(&out).await {
            tracing::debug!(%peer, error = %e, "connection closed while writing");
            return;
        }
    }
    let _ = write.shutdown().await;
}

impl Network for TcpNetwork {
    fn bind(&self, addr: &str) -> Result<Listener> {
        let std_listener =
            std::net::TcpListener::bind(addr).map_err(|e| err::invalid(format!("cannot listen on {addr}: {e}")))?;
        std_listener.set_nonblocking(true).map_err(|e| err::io(format!("listener on {addr}: {e}")))?;
        let local = std_listener.local_addr().map_err(|e| err::io(format!("listener on {addr}: {e}")))?.to_string();
        let listener =
            tokio::net::TcpListener::from_std(std_listener).map_err(|e| err::io(format!("listener on {addr}: {e}")))?;
        let (tx, rx) = mpsc::channel(ACCEPT_QUEUE);
        let (secret, max) = (self.secret.clone(), self.max_message_bytes);
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    accepted = listener.accept() => accepted,
                    () = tx.closed() => return,
                };
                let Ok((mut stream, peer)) = accepted else { continue };
                let (tx, secret) = (tx.clone(), secret.clone());
                tokio::spawn(async move {
                    let mut decoder = Decoder::new(max);
                    let handshake = server_handshake(&mut stream, &secret, &mut decoder);
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake).await {
                        Ok(Ok(())) => {
                            let _ = tx.send(start_pumps(stream, decoder, peer.to_string())).await;
                        }
                        Ok(Err(e)) => tracing::warn!(%peer, error = %e, "refused a peer"),
                        Err(_) => tracing::warn!(%peer, "refused a peer: handshake timed out"),
                    }
                });
            }
        });
        Ok(Listener { incoming: rx, local_addr: local })
    }

    fn connect<'a>(&'a self, addr: &'a str) -> ConnectFuture<'a> {
        Box::pin(async move {
            let attempt = async {
                let mut stream =
                    TcpStream::connect(addr).await.map_err(|e| io_err(&format!("connect to {addr}"), e))?;
                let mut decoder = Decoder::new(self.max_message_bytes);
                client_handshake(&mut stream, &self.secret, &mut decoder).await?;
                Ok(start_pumps(stream, decoder, addr.to_owned()))
            };
            tokio::time::timeout(HANDSHAKE_TIMEOUT, attempt)
                .await
                .unwrap_or_else(|_| Err(err::timed_out(format!("connecting to {addr} timed out"))))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_types::Errno;
    use shoal_types::msg::{Reply, Request};

    async fn echo_server(net: &TcpNetwork) -> String {
        let mut listener = net.bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().to_owned();
        tokio::spawn(async move {
            while let Some(mut conn) = listener.accept().await {
                tokio::spawn(async move {
                    while let Some(Message::Request { tid, .. }) = conn.receiver.recv().await {
                        let _ = conn.sender.send(Message::Reply { tid, reply: Ok(Reply::Done) }).await;
                    }
                });
            }
        });
        addr
    }

    #[tokio::test]
    async fn authenticated_peers_exchange_messages() {
        let net = TcpNetwork::new(b"cluster secret", 1 << 20);
        let addr = echo_server(&net).await;
        let mut conn = net.connect(&addr).await.unwrap();
        for tid in 0..100 {
            let request = Request::Map(shoal_types::msg::MapCommand::Get);
            conn.sender.send(Message::Request { tid, request }).await.unwrap();
        }
        for tid in 0..100 {
            assert_eq!(conn.receiver.recv().await, Some(Message::Reply { tid, reply: Ok(Reply::Done) }));
        }
    }

    #[tokio::test]
    async fn a_peer_with_the_wrong_secret_is_refused() {
        let server = TcpNetwork::new(b"cluster secret", 1 << 20);
        let addr = echo_server(&server).await;
        let intruder = TcpNetwork::new(b"guessed", 1 << 20);
        let e = intruder.connect(&addr).await.err().unwrap();
        assert_eq!(e.errno, Errno::NotConnected);
        assert!(e.message.contains("authentication failed"), "{e}");
    }

    #[tokio::test]
    async fn garbage_instead_of_a_handshake_is_dropped() {
        let server = TcpNetwork::new(b"s", 1 << 20);
        let addr = echo_server(&server).await;
        let mut raw = TcpStream::connect(&addr).await.unwrap();
        raw.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
        let mut buf = Vec::new();
        // The server sends its challenge, then closes on the bad frame.
        let n = tokio::time::timeout(Duration::from_secs(5), raw.read_to_end(&mut buf)).await.unwrap().unwrap();
        assert!(n >= frame::HEADER_LEN, "got the challenge");
    }
}
