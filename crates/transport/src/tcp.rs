//! The messenger over TCP: every connection starts with mutual authentication by the
//! cluster secret or a client entity's own key and an X25519 key agreement (see
//! [`crate::auth`]); the accepting side learns who connected ([`Peer`]). Then each
//! [`Message`] travels as one frame, sealed with the session's keys or, where both sides'
//! [`FrameModes`] allow it and the client prefers it, checksummed only (see
//! [`crate::frame`]).
//! Above this module a TCP connection is the same pair of bounded channels as a local one.
//!
//! Why an AEAD on frames rather than TLS: peers already share the cluster secret and
//! authenticate with it, so keys derived from that handshake need no certificates to
//! issue, distribute, renew or pin between daemons, and rustls offers no TLS 1.3
//! external pre-shared keys to reuse the secret. The ephemeral X25519 agreement gives
//! forward secrecy as TLS 1.3 would; AES-256-GCM and HKDF come from aws-lc-rs.

use crate::auth::{self, FrameMode, Handshake, NONCE_LEN, SessionKeys};
use crate::frame::{self, Cipher, Decoder};
use crate::{ACCEPT_QUEUE, CONNECTION_QUEUE, ConnectFuture, Connection, Listener, Network, Peer};
use aws_lc_rs::agreement::{self, EphemeralPrivateKey, UnparsedPublicKey, X25519};
use aws_lc_rs::rand::SystemRandom;
use bytes::Bytes;
use shoal_types::auth::{is_cluster_entity, is_daemon_entity};
use shoal_types::msg::Message;
use shoal_types::{RadosError, Result, Versioned, err};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{mpsc, watch};

/// How long a peer has to complete the handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a server waits for the key of a client entity it does not know.
const NEW_ENTITY_WAIT: Duration = Duration::from_secs(3);

/// Who this side is and the keys it proves it with: a daemon of the cluster or its
/// administrator (`osd.3`, `client.admin`) with the cluster secret, or a client entity
/// (`client.rgw.0`) with its own key. While the cluster secret is rotated a daemon holds
/// the new one first and the old one after it: it connects with the first its peer takes
/// and accepts peers proving either.
#[derive(Clone)]
pub struct Credentials {
    /// The entity this side authenticates as.
    pub entity: String,
    /// Its keys, the preferred one first.
    pub keys: Vec<Vec<u8>>,
}

impl Credentials {
    /// Credentials of `entity` with the single key `key`.
    pub fn new(entity: &str, key: &[u8]) -> Self {
        Credentials { entity: entity.to_owned(), keys: vec![key.to_vec()] }
    }
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials").field("entity", &self.entity).field("keys", &self.keys.len()).finish()
    }
}

/// The frame modes a side offers and accepts, each list the preferred first, as Ceph's
/// `ms_cluster_mode`, `ms_service_mode` and `ms_client_mode`. A server picks the first
/// mode of the client's offer that it accepts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameModes {
    /// Between the cluster's daemons (`mon.*`, `osd.*`, `mgr.*`): offered by a daemon and
    /// accepted from one.
    pub cluster: Vec<FrameMode>,
    /// Accepted from clients (every other entity, `client.admin` too).
    pub service: Vec<FrameMode>,
    /// Offered by a client.
    pub client: Vec<FrameMode>,
}

impl Default for FrameModes {
    /// Sealed frames preferred everywhere, checksummed ones accepted when the client asks.
    fn default() -> Self {
        let modes = vec![FrameMode::Secure, FrameMode::Crc];
        FrameModes { cluster: modes.clone(), service: modes.clone(), client: modes }
    }
}

impl FrameModes {
    /// What this side offers when it connects as `entity`.
    fn offered_by(&self, entity: &str) -> &[FrameMode] {
        if is_daemon_entity(entity) { &self.cluster } else { &self.client }
    }

    /// What this side accepts from a peer that proved to be `entity`.
    fn accepted_from(&self, entity: &str) -> &[FrameMode] {
        if is_daemon_entity(entity) { &self.cluster } else { &self.service }
    }
}

/// A TCP network whose peers prove the cluster secret or a client entity's key.
#[derive(Clone)]
pub struct TcpNetwork {
    credentials: Arc<Credentials>,
    /// The keys of client entities this side accepts (the monitors' auth table).
    entity_keys: Arc<watch::Sender<HashMap<String, Vec<u8>>>>,
    max_message_bytes: usize,
    modes: Arc<watch::Sender<FrameModes>>,
}

impl TcpNetwork {
    /// A network authenticating with `credentials` and refusing messages over
    /// `max_message_bytes`, with the default [`FrameModes`]. It accepts the cluster's
    /// daemons if `credentials` hold the cluster secret, and client entities once
    /// [`TcpNetwork::set_entity_keys`] names them.
    pub fn new(credentials: Credentials, max_message_bytes: usize) -> Self {
        TcpNetwork {
            credentials: Arc::new(credentials),
            entity_keys: Arc::default(),
            max_message_bytes,
            modes: Arc::default(),
        }
    }

    /// Offers and accepts `modes` on connections made from now on.
    pub fn set_frame_modes(&self, modes: FrameModes) {
        self.modes.send_replace(modes);
    }

    /// The client entities accepted from now on and their keys; connections of an entity
    /// no longer named stay open (its requests are refused by the caps check above).
    pub fn set_entity_keys(&self, keys: HashMap<String, Vec<u8>>) {
        self.entity_keys.send_replace(keys);
    }

    /// The keys a peer claiming to be `entity` may prove, and whether it is the cluster's.
    /// An entity not known yet gets [`NEW_ENTITY_WAIT`] to appear: its key may have been
    /// made a moment ago, and the map that carries it not reached this daemon yet.
    async fn accepted_keys(&self, entity: &str) -> (Vec<Vec<u8>>, bool) {
        if is_cluster_entity(entity) {
            let ours = is_cluster_entity(&self.credentials.entity);
            return (if ours { self.credentials.keys.clone() } else { Vec::new() }, true);
        }
        let mut keys = self.entity_keys.subscribe();
        let _ = tokio::time::timeout(NEW_ENTITY_WAIT, keys.wait_for(|k| k.contains_key(entity))).await;
        let key = keys.borrow().get(entity).cloned();
        (key.into_iter().collect(), false)
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
    key: &[u8],
    private: EphemeralPrivateKey,
    server_nonce: &[u8; NONCE_LEN],
    client_nonce: &[u8; NONCE_LEN],
    peer: &[u8; NONCE_LEN],
) -> Result<SessionKeys> {
    let peer = UnparsedPublicKey::new(&X25519, peer);
    agreement::agree_ephemeral(private, peer, err::not_connected("the peer's X25519 key is invalid"), |shared| {
        Ok(auth::session_keys(key, shared, server_nonce, client_nonce))
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

/// Which end of the handshake this side is.
#[derive(Clone, Copy)]
enum Side {
    Server,
    Client,
}

/// Starts the frames of `mode`: in `secure`, derives the session `keys`, sets `decoder` to
/// open what the peer sends and returns the cipher sealing what this side sends; in `crc`,
/// nothing (both directions stay checksummed frames).
fn start_mode(
    mode: FrameMode,
    decoder: &mut Decoder,
    keys: impl FnOnce() -> Result<SessionKeys>,
    side: Side,
) -> Result<Option<Cipher>> {
    if mode == FrameMode::Crc {
        return Ok(None);
    }
    let SessionKeys { client_to_server, server_to_client } = keys()?;
    let (incoming, outgoing) = match side {
        Side::Server => (client_to_server, server_to_client),
        Side::Client => (server_to_client, client_to_server),
    };
    decoder.open_with(Cipher::new(&incoming));
    Ok(Some(Cipher::new(&outgoing)))
}

/// The server's side of the handshake; returns the cipher sealing what it sends, if the
/// mode is `secure` (the decoder now opens what it receives), and who the client proved
/// to be.
async fn server_handshake(
    stream: &mut TcpStream,
    network: &TcpNetwork,
    decoder: &mut Decoder,
) -> Result<(Option<Cipher>, Peer)> {
    let (private, server_nonce) = ephemeral()?;
    send(stream, &Handshake::Challenge { nonce: server_nonce }).await?;
    match Handshake::decode(&read_frame(stream, decoder).await?)? {
        Handshake::ClientProof { nonce: client_nonce, entity, modes, proof } => {
            let (keys, cluster) = network.accepted_keys(&entity).await;
            let Some(key) =
                keys.iter().find(|k| auth::verify_client(k, &server_nonce, &client_nonce, &entity, &modes, &proof))
            else {
                return Err(err::access(format!("authentication failed: {entity} did not prove a key it holds")));
            };
            let allowed = network.modes.borrow().accepted_from(&entity).to_vec();
            let Some(mode) = auth::pick_mode(&modes, &allowed) else {
                let reason = format!(
                    "{entity} offers frame modes '{}', this side takes '{}'",
                    FrameMode::names(&modes),
                    FrameMode::names(&allowed)
                );
                send(stream, &Handshake::Refused { reason: reason.clone() }).await?;
                return Err(err::invalid(reason));
            };
            let proof = auth::server_proof(key, &client_nonce, &server_nonce, &entity, mode);
            send(stream, &Handshake::ServerProof { mode, proof }).await?;
            tracing::debug!(%entity, mode = mode.name(), "authenticated a peer");
            let keys = || agree(key, private, &server_nonce, &client_nonce, &client_nonce);
            let sealing = start_mode(mode, decoder, keys, Side::Server)?;
            Ok((sealing, Peer { entity: entity.into(), cluster }))
        }
        other => Err(err::invalid(format!("handshake: expected a client proof, got {other:?}"))),
    }
}

/// The client's side of the handshake as `entity` with `key`, offering `modes`, returning
/// as [`server_handshake`] does (the peer: the server, a daemon of the cluster).
async fn client_handshake(
    stream: &mut TcpStream,
    entity: &str,
    key: &[u8],
    modes: &[FrameMode],
    decoder: &mut Decoder,
) -> Result<Option<Cipher>> {
    let Handshake::Challenge { nonce: server_nonce } = Handshake::decode(&read_frame(stream, decoder).await?)? else {
        return Err(err::invalid("handshake: expected a challenge"));
    };
    let (private, client_nonce) = ephemeral()?;
    let proof = auth::client_proof(key, &server_nonce, &client_nonce, entity, modes);
    let offer = Handshake::ClientProof { nonce: client_nonce, entity: entity.to_owned(), modes: modes.to_vec(), proof };
    send(stream, &offer).await?;
    match read_frame(stream, decoder).await.and_then(|f| Handshake::decode(&f)) {
        Ok(Handshake::ServerProof { mode, proof })
            if modes.contains(&mode)
                && auth::verify_server(key, &client_nonce, &server_nonce, entity, mode, &proof) =>
        {
            let keys = || agree(key, private, &server_nonce, &client_nonce, &server_nonce);
            start_mode(mode, decoder, keys, Side::Client)
        }
        Ok(Handshake::ServerProof { .. }) => {
            Err(err::access(format!("authentication failed: the server does not know {entity}'s key")))
        }
        Ok(Handshake::Refused { reason }) => Err(err::invalid(format!("the server refused the connection: {reason}"))),
        Ok(other) => Err(err::invalid(format!("handshake: expected a server proof, got {other:?}"))),
        Err(_) => Err(err::access(format!("authentication failed: the server refused {entity}'s key"))),
    }
}

/// Turns an authenticated stream into a [`Connection`]: one task opens and decodes
/// incoming frames, one encodes outgoing messages, sealed with `sealing` if given (several
/// per write when they queue up).
fn start_pumps(stream: TcpStream, decoder: Decoder, sealing: Option<Cipher>, addr: String, peer: Peer) -> Connection {
    let _ = stream.set_nodelay(true);
    let (read_half, write_half) = stream.into_split();
    let (in_tx, in_rx) = mpsc::channel(CONNECTION_QUEUE);
    let (out_tx, out_rx) = mpsc::channel(CONNECTION_QUEUE);
    tokio::spawn(read_pump(read_half, decoder, in_tx, addr.clone()));
    tokio::spawn(write_pump(write_half, out_rx, sealing, addr));
    Connection { sender: out_tx, receiver: in_rx, peer }
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
    mut sealing: Option<Cipher>,
    peer: String,
) {
    let mut append = |out: Vec<u8>, message: Message| match sealing.as_mut() {
        Some(cipher) => frame::append_sealed(out, cipher, |buf| message.encode_after(buf)),
        None => frame::append(out, |buf| message.encode_after(buf)),
    };
    while let Some(first) = from_app.recv().await {
        let mut out = append(Vec::new(), first);
        while out.len() < 1 << 20 {
            match from_app.try_recv() {
                Ok(next) => out = append(out, next),
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
        let (network, max) = (self.clone(), self.max_message_bytes);
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    accepted = listener.accept() => accepted,
                    () = tx.closed() => return,
                };
                let Ok((mut stream, peer)) = accepted else { continue };
                let (tx, network) = (tx.clone(), network.clone());
                tokio::spawn(async move {
                    let mut decoder = Decoder::new(max);
                    let handshake = server_handshake(&mut stream, &network, &mut decoder);
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake).await {
                        Ok(Ok((sealing, who))) => {
                            let _ = tx.send(start_pumps(stream, decoder, sealing, peer.to_string(), who)).await;
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
            let Credentials { entity, keys } = self.credentials.as_ref();
            let mut refused = err::access(format!("{entity} has no key"));
            // One connection per key until the server takes one (a rotation in progress).
            for key in keys {
                let attempt = async {
                    let mut stream =
                        TcpStream::connect(addr).await.map_err(|e| io_err(&format!("connect to {addr}"), e))?;
                    let mut decoder = Decoder::new(self.max_message_bytes);
                    let modes = self.modes.borrow().offered_by(entity).to_vec();
                    let sealing = client_handshake(&mut stream, entity, key, &modes, &mut decoder).await?;
                    Ok::<_, RadosError>(start_pumps(stream, decoder, sealing, addr.to_owned(), Peer::daemon()))
                };
                match tokio::time::timeout(HANDSHAKE_TIMEOUT, attempt).await {
                    Ok(Err(e)) if e.errno == shoal_types::Errno::AccessDenied => refused = e,
                    Ok(result) => return result,
                    Err(_) => return Err(err::timed_out(format!("connecting to {addr} timed out"))),
                }
            }
            Err(refused)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_types::Errno;
    use shoal_types::msg::{Reply, Request};

    fn admin(secret: &[u8]) -> Credentials {
        Credentials::new("client.admin", secret)
    }

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
        let net = TcpNetwork::new(admin(b"cluster secret"), 1 << 20);
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
        let server = TcpNetwork::new(admin(b"cluster secret"), 1 << 20);
        let addr = echo_server(&server).await;
        let intruder = TcpNetwork::new(admin(b"guessed"), 1 << 20);
        let e = intruder.connect(&addr).await.err().unwrap();
        assert_eq!(e.errno, Errno::AccessDenied);
        assert!(e.message.contains("authentication failed"), "{e}");
    }

    #[tokio::test]
    async fn client_entities_prove_their_own_key_and_the_server_learns_who_they_are() {
        let server = TcpNetwork::new(Credentials::new("osd.0", b"cluster secret"), 1 << 20);
        let mut listener = server.bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().to_owned();
        let gateway = TcpNetwork::new(Credentials::new("client.rgw", b"rgw key"), 1 << 20);
        let e = gateway.connect(&addr).await.err().unwrap();
        assert_eq!(e.errno, Errno::AccessDenied, "an entity the server does not know yet: {e}");
        server.set_entity_keys(HashMap::from([("client.rgw".to_owned(), b"rgw key".to_vec())]));
        let _conn = gateway.connect(&addr).await.unwrap();
        let accepted = listener.accept().await.unwrap();
        assert_eq!(accepted.peer, Peer { entity: Arc::from("client.rgw"), cluster: false });
        let _admin = TcpNetwork::new(admin(b"cluster secret"), 1 << 20).connect(&addr).await.unwrap();
        assert_eq!(listener.accept().await.unwrap().peer, Peer { entity: Arc::from("client.admin"), cluster: true });
        // An entity key does not make its holder a daemon, and a client entity cannot
        // accept daemons.
        let impostor = TcpNetwork::new(Credentials::new("osd.1", b"rgw key"), 1 << 20);
        assert_eq!(impostor.connect(&addr).await.err().unwrap().errno, Errno::AccessDenied);
        let rgw_addr = echo_server(&gateway).await;
        let daemon = TcpNetwork::new(Credentials::new("osd.1", b"rgw key"), 1 << 20);
        assert_eq!(daemon.connect(&rgw_addr).await.err().unwrap().errno, Errno::AccessDenied);
        server.set_entity_keys(HashMap::new());
        assert_eq!(gateway.connect(&addr).await.err().unwrap().errno, Errno::AccessDenied, "revoked");
    }

    #[tokio::test]
    async fn during_a_rotation_old_and_new_secrets_meet() {
        let both = Credentials { entity: "osd.0".into(), keys: vec![b"new".to_vec(), b"old".to_vec()] };
        let (rotated, old, new) = (
            TcpNetwork::new(both, 1 << 20),
            TcpNetwork::new(Credentials::new("osd.1", b"old"), 1 << 20),
            TcpNetwork::new(Credentials::new("osd.2", b"new"), 1 << 20),
        );
        let (rotated_addr, old_addr, new_addr) =
            (echo_server(&rotated).await, echo_server(&old).await, echo_server(&new).await);
        old.connect(&rotated_addr).await.expect("a daemon not yet rotated reaches a rotated one");
        rotated.connect(&old_addr).await.expect("a rotated daemon falls back to the old secret");
        rotated.connect(&new_addr).await.expect("and uses the new one first");
        new.connect(&rotated_addr).await.unwrap();
        assert_eq!(
            new.connect(&old_addr).await.err().unwrap().errno,
            Errno::AccessDenied,
            "the old secret alone is gone"
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]
        /// Whatever a client sends after the challenge without the key, the server never
        /// answers with a proof or hands a connection to the application.
        #[test]
        fn a_handshake_without_the_key_is_refused(
            entity in proptest::sample::select(vec!["osd.1", "client.admin", "client.rgw", "client.x"]),
            proof in proptest::collection::vec(proptest::num::u8::ANY, 0..40),
            garbage in proptest::collection::vec(proptest::num::u8::ANY, 0..80),
            raw in proptest::bool::ANY,
        ) {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            runtime.block_on(async {
                let server = TcpNetwork::new(Credentials::new("osd.0", b"cluster secret"), 1 << 20);
                server.set_entity_keys(HashMap::from([("client.rgw".to_owned(), b"rgw key".to_vec())]));
                let mut listener = server.bind("127.0.0.1:0").unwrap();
                let mut stream = TcpStream::connect(listener.local_addr()).await.unwrap();
                let mut decoder = Decoder::new(1 << 20);
                let challenge = read_frame(&mut stream, &mut decoder).await.unwrap();
                assert!(matches!(Handshake::decode(&challenge), Ok(Handshake::Challenge { .. })));
                let sent = match raw {
                    true => garbage.clone(),
                    false => {
                        let modes = vec![FrameMode::Secure];
                        let proof = Handshake::ClientProof { nonce: [7; NONCE_LEN], entity: entity.into(), modes, proof: proof.clone() };
                        frame::encode(&proof.encode()).to_vec()
                    }
                };
                stream.write_all(&sent).await.unwrap();
                let _ = stream.shutdown().await;
                let mut answer = Vec::new();
                let read = tokio::time::timeout(Duration::from_secs(15), stream.read_to_end(&mut answer)).await;
                assert!(read.is_ok(), "the server closes the connection");
                assert!(answer.is_empty(), "no proof comes back: {answer:?}");
                let accepted = tokio::time::timeout(Duration::from_millis(50), listener.accept()).await;
                assert!(accepted.is_err(), "no connection reaches the application");
            });
        }
    }

    #[tokio::test]
    async fn an_address_nothing_listens_at_refuses_and_says_so() {
        // A port just freed: nothing listens there.
        let addr = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().to_string();
        let e = TcpNetwork::new(admin(b"s"), 1 << 20).connect(&addr).await.err().unwrap();
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

    const MARKER: &str = "an S3 secret key that must not cross the network in clear";

    /// What `client` sent through a relay to the echo server at `server` to have `MARKER`
    /// answered.
    async fn wire_of_a_request(client: &TcpNetwork, server: &str) -> Vec<u8> {
        let (addr, seen) = relay(server.to_owned(), None).await;
        let mut conn = client.connect(&addr).await.unwrap();
        conn.sender.send(Message::Request { tid: 1, request: Request::Tell(MARKER.into()) }).await.unwrap();
        assert_eq!(conn.receiver.recv().await, Some(Message::Reply { tid: 1, reply: Ok(Reply::Done) }));
        let wire = seen.lock().unwrap().clone();
        assert!(wire.len() > 64 + MARKER.len(), "the handshake and the message went through the relay");
        wire
    }

    fn marker_at(wire: &[u8]) -> Option<usize> {
        wire.windows(MARKER.len()).position(|w| w == MARKER.as_bytes())
    }

    /// Whether a request of `client`, relayed to `server` with a bit flipped at `at`,
    /// still gets an answer.
    async fn answered_when_flipped(client: &TcpNetwork, server: &str, at: usize) -> bool {
        let (addr, _) = relay(server.to_owned(), Some(at)).await;
        let mut conn = client.connect(&addr).await.unwrap();
        conn.sender.send(Message::Request { tid: 2, request: Request::Tell(MARKER.into()) }).await.unwrap();
        tokio::time::timeout(Duration::from_secs(10), conn.receiver.recv()).await.unwrap().is_some()
    }

    #[tokio::test]
    async fn what_crosses_the_wire_is_sealed_and_tampering_ends_the_connection() {
        let net = TcpNetwork::new(admin(b"cluster secret"), 1 << 20);
        let server = echo_server(&net).await;
        let wire = wire_of_a_request(&net, &server).await;
        assert_eq!(marker_at(&wire), None, "the payload crossed in clear");
        // A bit flipped in the first sealed frame: the server drops the connection unanswered.
        let handshake_len = wire.len() - (frame::SEALED_HEADER_LEN + frame::TAG_LEN + MARKER.len() + 8);
        assert!(!answered_when_flipped(&net, &server, handshake_len + 40).await, "a tampered frame is never delivered");
    }

    fn with_modes(entity: &str, cluster: &[FrameMode], service: &[FrameMode], client: &[FrameMode]) -> TcpNetwork {
        let modes = FrameModes { cluster: cluster.to_vec(), service: service.to_vec(), client: client.to_vec() };
        let network = TcpNetwork::new(Credentials::new(entity, b"cluster secret"), 1 << 20);
        network.set_frame_modes(modes);
        network
    }

    #[tokio::test]
    async fn crc_frames_cross_in_clear_and_their_checksum_catches_a_flipped_bit() {
        let (crc, secure) = (FrameMode::Crc, FrameMode::Secure);
        let server = echo_server(&with_modes("osd.0", &[crc], &[secure], &[secure])).await;
        let daemon = with_modes("osd.1", &[crc, secure], &[secure], &[secure]);
        let wire = wire_of_a_request(&daemon, &server).await;
        let at = marker_at(&wire).expect("a daemon's frames to a daemon taking crc cross in clear");
        assert!(!answered_when_flipped(&daemon, &server, at).await, "a corrupted crc frame is dropped");
    }

    #[tokio::test]
    async fn the_client_preference_picks_among_the_modes_the_server_takes() {
        let (crc, secure) = (FrameMode::Crc, FrameMode::Secure);
        let server = echo_server(&TcpNetwork::new(Credentials::new("osd.0", b"cluster secret"), 1 << 20)).await;
        let crc_daemon = with_modes("osd.1", &[crc, secure], &[secure], &[secure]);
        assert!(marker_at(&wire_of_a_request(&crc_daemon, &server).await).is_some(), "defaults take crc if asked");
        let admin_net = with_modes("client.admin", &[crc], &[crc], &[secure, crc]);
        assert_eq!(marker_at(&wire_of_a_request(&admin_net, &server).await), None, "a client's list, not cluster's");
        // A server taking only sealed frames from clients refuses one offering crc alone,
        // and says why.
        let strict = echo_server(&with_modes("osd.0", &[secure, crc], &[secure], &[secure])).await;
        let e = with_modes("client.admin", &[secure], &[secure], &[crc]).connect(&strict).await.err().unwrap();
        assert_eq!(e.errno, Errno::InvalidArgument, "{e}");
        assert!(e.message.contains("offers frame modes 'crc', this side takes 'secure'"), "{e}");
        let daemon = with_modes("osd.1", &[crc], &[secure], &[secure]).connect(&server).await.map(|_| ());
        assert!(daemon.is_ok(), "the default server takes crc from a daemon: {daemon:?}");
    }

    #[tokio::test]
    async fn garbage_instead_of_a_handshake_is_dropped() {
        let server = TcpNetwork::new(admin(b"s"), 1 << 20);
        let addr = echo_server(&server).await;
        let mut raw = TcpStream::connect(&addr).await.unwrap();
        raw.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
        let mut buf = Vec::new();
        // The server sends its challenge, then closes on the bad frame.
        let n = tokio::time::timeout(Duration::from_secs(5), raw.read_to_end(&mut buf)).await.unwrap().unwrap();
        assert!(n >= frame::HEADER_LEN, "got the challenge");
    }
}
