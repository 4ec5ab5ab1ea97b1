//! The messenger over TCP: every connection starts with mutual authentication by the
//! cluster secret and an X25519 key agreement (see [`crate::auth`]); then each
//! [`Message`] travels as one frame sealed with the session's keys (see [`crate::frame`]).
//! Above this module a TCP connection is the same pair of bounded channels as a local one.
//!
//! Why an AEAD on frames rather than TLS: peers already share the cluster secret and
//! authenticate with it, so keys derived from that handshake need no certificates to
//! issue, distribute, renew or pin between daemons, and rustls offers no TLS 1.3
//! external pre-shared keys to reuse the secret. The ephemeral X25519 agreement gives
//! forward secrecy as TLS 1.3 would; AES-256-GCM and HKDF come from aws-lc-rs.

use crate::auth::{self, Handshake, NONCE_LEN, SessionKeys};
use crate::frame::{self, Cipher, Decoder};
use crate::{ACCEPT_QUEUE, CONNECTION_QUEUE, ConnectFuture, Connection, Listener, Network};
use aws_lc_rs::agreement::{self, EphemeralPrivateKey, UnparsedPublicKey, X25519};
use aws_lc_rs::rand::SystemRandom;
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
    match e.kind() {
        std::io::ErrorKind::ConnectionRefused => err::connection_refused(format!("{context}: {e}")),
        _ => err::not_connected(format!("{context}: {e}")),
    }
}

/// A fresh ephemeral X25519 key and its public half, which is the side's handshake nonce.
fn ephemeral() -> Result<(EphemeralPrivateKey, [u8; NONCE_LEN])> {
    let failed = |_| err::io("generating an X25519 key failed");
    let private = EphemeralPrivateKey::generate(&X25519, &SystemRandom::new()).map_err(failed)?;
    let public = private.compute_public_key().map_err(failed)?;
    let public: [u8; NONCE_LEN] = public.as_ref().try_into().map_err(|_| err::io("an X25519 key is not 32 bytes"))?;
    Ok((private, public))
}

/// The session keys from our ephemeral key and the peer's nonce.
fn agree(
    secret: &[u8],
    private: EphemeralPrivateKey,
    server_nonce: &[u8; NONCE_LEN],
    client_nonce: &[u8; NONCE_LEN],
    peer: &[u8; NONCE_LEN],
) -> Result<SessionKeys> {
    let peer = UnparsedPublicKey::new(&X25519, peer);
    agreement::agree_ephemeral(private, peer, err::not_connected("the peer's X25519 key is invalid"), |shared| {
        Ok(auth::session_keys(secret, shared, server_nonce, client_nonce))
    })
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

/// The server's side of the handshake; returns the cipher sealing what it sends, the
/// decoder now opening what it receives.
async fn server_handshake(stream: &mut TcpStream, secret: &[u8], decoder: &mut Decoder) -> Result<Cipher> {
    let (private, server_nonce) = ephemeral()?;
    send(stream, &Handshake::Challenge { nonce: server_nonce }).await?;
    match Handshake::decode(&read_frame(stream, decoder).await?)? {
        Handshake::ClientProof { nonce: client_nonce, proof } => {
            if !auth::verify_client(secret, &server_nonce, &client_nonce, &proof) {
                return Err(err::not_connected("authentication failed: the peer does not know the cluster secret"));
            }
            let keys = agree(secret, private, &server_nonce, &client_nonce, &client_nonce)?;
            let proof = auth::server_proof(secret, &client_nonce, &server_nonce);
            send(stream, &Handshake::ServerProof { proof }).await?;
            decoder.open_with(Cipher::new(&keys.client_to_server));
            Ok(Cipher::new(&keys.server_to_client))
        }
        other => Err(err::invalid(format!("handshake: expected a client proof, got {other:?}"))),
    }
}

/// The client's side of the handshake, returning as [`server_handshake`] does.
async fn client_handshake(stream: &mut TcpStream, secret: &[u8], decoder: &mut Decoder) -> Result<Cipher> {
    let Handshake::Challenge { nonce: server_nonce } = Handshake::decode(&read_frame(stream, decoder).await?)? else {
        return Err(err::invalid("handshake: expected a challenge"));
    };
    let (private, client_nonce) = ephemeral()?;
    let proof = auth::client_proof(secret, &server_nonce, &client_nonce);
    send(stream, &Handshake::ClientProof { nonce: client_nonce, proof }).await?;
    match read_frame(stream, decoder).await.and_then(|f| Handshake::decode(&f)) {
        Ok(Handshake::ServerProof { proof }) if auth::verify_server(secret, &client_nonce, &server_nonce, &proof) => {
            let keys = agree(secret, private, &server_nonce, &client_nonce, &server_nonce)?;
            decoder.open_with(Cipher::new(&keys.server_to_client));
            Ok(Cipher::new(&keys.client_to_server))
        }
        Ok(Handshake::ServerProof { .. }) => {
            Err(err::not_connected("authentication failed: the server does not know the cluster secret"))
        }
        Ok(other) => Err(err::invalid(format!("handshake: expected a server proof, got {other:?}"))),
        Err(_) => Err(err::not_connected("authentication failed: the server refused this client's cluster secret")),
    }
}

/// Turns an authenticated stream into a [`Connection`]: one task opens and decodes
/// incoming frames, one encodes and seals outgoing messages with `sealing` (several per
/// write when they queue up).
fn start_pumps(stream: TcpStream, decoder: Decoder, sealing: Cipher, peer: String) -> Connection {
    let _ = stream.set_nodelay(true);
    let (read_half, write_half) = stream.into_split();
    let (in_tx, in_rx) = mpsc::channel(CONNECTION_QUEUE);
    let (out_tx, out_rx) = mpsc::channel(CONNECTION_QUEUE);
    tokio::spawn(read_pump(read_half, decoder, in_tx, peer.clone()));
    tokio::spawn(write_pump(write_half, out_rx, sealing, peer));
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

async fn write_pump(
    mut write: OwnedWriteHalf,
    mut from_app: mpsc::Receiver<Message>,
    mut sealing: Cipher,
    peer: String,
) {
    while let Some(first) = from_app.recv().await {
        let mut out = frame::append_sealed(Vec::new(), &mut sealing, |buf| first.encode_after(buf));
        while out.len() < 1 << 20 {
            match from_app.try_recv() {
                Ok(next) => out = frame::append_sealed(out, &mut sealing, |buf| next.encode_after(buf)),
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
                        Ok(Ok(sealing)) => {
                            let _ = tx.send(start_pumps(stream, decoder, sealing, peer.to_string())).await;
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
                let sealing = client_handshake(&mut stream, &self.secret, &mut decoder).await?;
                Ok(start_pumps(stream, decoder, sealing, addr.to_owned()))
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
    async fn an_address_nothing_listens_at_refuses_and_says_so() {
        // A port just freed: nothing listens there.
        let addr = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().to_string();
        let e = TcpNetwork::new(b"s", 1 << 20).connect(&addr).await.err().unwrap();
        assert_eq!(e.errno, Errno::ConnectionRefused, "{e}");
        assert!(e.errno.is_disconnect() && e.message.contains(&addr), "{e}");
    }

    /// A relay between a client and `server` that records what the client sends, and
    /// flips a bit of it from byte `tamper_at` on if given.
    async fn relay(server: String, tamper_at: Option<usize>) -> (String, Arc<std::sync::Mutex<Vec<u8>>>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let record = seen.clone();
        tokio::spawn(async move {
            let (client, _) = listener.accept().await.unwrap();
            let upstream = TcpStream::connect(&server).await.unwrap();
            let ((mut client_read, mut client_write), (mut up_read, mut up_write)) =
                (client.into_split(), upstream.into_split());
            tokio::spawn(async move { tokio::io::copy(&mut up_read, &mut client_write).await });
            let mut buf = vec![0u8; 4096];
            while let Ok(n) = client_read.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                let at = {
                    let mut seen = record.lock().unwrap();
                    seen.extend_from_slice(&buf[..n]);
                    seen.len() - n
                };
                if let Some(i) = tamper_at.and_then(|t| t.checked_sub(at)).filter(|&i| i < n) {
                    buf[i] ^= 0x01;
                }
                if up_write.write_all(&buf[..n]).await.is_err() {
                    break;
                }
            }
        });
        (addr, seen)
    }

    #[tokio::test]
    async fn what_crosses_the_wire_is_sealed_and_tampering_ends_the_connection() {
        let net = TcpNetwork::new(b"cluster secret", 1 << 20);
        let server = echo_server(&net).await;
        let (addr, seen) = relay(server.clone(), None).await;
        let mut conn = net.connect(&addr).await.unwrap();
        let marker = "an S3 secret key that must not cross the network in clear";
        conn.sender.send(Message::Request { tid: 1, request: Request::Tell(marker.into()) }).await.unwrap();
        assert_eq!(conn.receiver.recv().await, Some(Message::Reply { tid: 1, reply: Ok(Reply::Done) }));
        let wire = seen.lock().unwrap().clone();
        assert!(
            wire.len() > 64 + marker.len() + frame::TAG_LEN,
            "the handshake and the message went through the relay"
        );
        assert!(!wire.windows(16).any(|w| w == &marker.as_bytes()[..16]), "the payload crossed in clear");
        // A bit flipped in the first sealed frame: the server drops the connection unanswered.
        let handshake_len = wire.len() - (frame::SEALED_HEADER_LEN + frame::TAG_LEN + marker.len() + 8);
        let (addr, _) = relay(server, Some(handshake_len + 40)).await;
        let mut conn = net.connect(&addr).await.unwrap();
        conn.sender.send(Message::Request { tid: 2, request: Request::Tell(marker.into()) }).await.unwrap();
        let answer = tokio::time::timeout(Duration::from_secs(10), conn.receiver.recv()).await.unwrap();
        assert_eq!(answer, None, "a tampered frame is never delivered");
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
