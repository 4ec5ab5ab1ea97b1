//! Mutual authentication with a key both sides know, without sending it, and the keys of
//! the session that follows. The client names the entity it is (`osd.3`, `client.rgw.0`);
//! the key is the cluster secret for the cluster's daemons and its administrator, or the
//! entity's own key (see `shoal_types::auth`). Each side sends an ephemeral X25519 public
//! key as its nonce and proves knowledge of the key with an HMAC-SHA256 over both nonces,
//! the entity, the frame modes the client offers and the one the server picks. In the
//! `secure` mode the frames after the handshake are sealed (AES-256-GCM, see
//! [`crate::frame`]) with keys derived by HKDF-SHA256 from the X25519 shared secret and the
//! key, so only holders of the key can read or forge them, and a key stolen later does not
//! open recorded sessions; in the `crc` mode they carry a crc32c only. Pure functions; the
//! TCP transport drives the exchange.

use hmac::{Hmac, KeyInit, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use shoal_types::{Result, Versioned, err};

/// Bytes of each side's nonce.
pub const NONCE_LEN: usize = 32;

/// How the frames after the handshake are protected (Ceph's messenger modes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum FrameMode {
    /// A crc32c per frame: errors are caught, but whoever can alter the traffic can read
    /// and change it. For networks the operator trusts.
    Crc,
    /// Sealed with AES-256-GCM under the session's keys.
    Secure,
}

impl FrameMode {
    /// The mode's name in configuration options.
    pub fn name(self) -> &'static str {
        match self {
            FrameMode::Crc => "crc",
            FrameMode::Secure => "secure",
        }
    }

    /// Parses a preference list as Ceph's `ms_*_mode` options give it: mode names
    /// separated by spaces or commas, the preferred first.
    pub fn parse_list(text: &str) -> Result<Vec<FrameMode>> {
        let mut modes = Vec::new();
        for name in text.split([' ', ',']).filter(|n| !n.is_empty()) {
            let mode = match name {
                "crc" => FrameMode::Crc,
                "secure" => FrameMode::Secure,
                other => return Err(err::invalid(format!("unknown frame mode '{other}' (crc or secure)"))),
            };
            if !modes.contains(&mode) {
                modes.push(mode);
            }
        }
        if modes.is_empty() {
            return Err(err::invalid(format!("'{text}' names no frame mode (crc, secure or both)")));
        }
        Ok(modes)
    }

    /// The names of `modes`, space-separated.
    pub fn names(modes: &[FrameMode]) -> String {
        modes.iter().map(|m| m.name()).collect::<Vec<_>>().join(" ")
    }

    fn byte(self) -> u8 {
        match self {
            FrameMode::Crc => 0,
            FrameMode::Secure => 1,
        }
    }
}

/// The mode a server picks: the first of the client's `offered` modes it `allows`.
pub fn pick_mode(offered: &[FrameMode], allowed: &[FrameMode]) -> Option<FrameMode> {
    offered.iter().copied().find(|mode| allowed.contains(mode))
}

/// The handshake messages, in the order they are sent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Handshake {
    /// Server → client: the server's nonce.
    Challenge {
        /// The server's ephemeral X25519 public key.
        nonce: [u8; NONCE_LEN],
    },
    /// Client → server: the client's nonce, who it is, the frame modes it takes, and its
    /// proof.
    ClientProof {
        /// The client's ephemeral X25519 public key.
        nonce: [u8; NONCE_LEN],
        /// The entity the client authenticates as.
        entity: String,
        /// The frame modes the client takes, the preferred first.
        modes: Vec<FrameMode>,
        /// HMAC(key, "shoal client" ‖ server nonce ‖ client nonce ‖ entity ‖ modes).
        proof: Vec<u8>,
    },
    /// Server → client: the mode it picked and its proof; after it, messages flow.
    ServerProof {
        /// The frame mode of the rest of the connection.
        mode: FrameMode,
        /// HMAC(key, "shoal server" ‖ client nonce ‖ server nonce ‖ entity ‖ mode).
        proof: Vec<u8>,
    },
    /// Server → client, instead of its proof: the client proved its key, but the server
    /// takes none of the modes it offered.
    Refused {
        /// Why, for the client's error.
        reason: String,
    },
}

impl Versioned for Handshake {
    const NAME: &'static str = "handshake";
    /// Version 4: the client offers frame modes and the server picks one, both bound by
    /// the proofs. Earlier versions are refused (3 had no modes, 2 no entity).
    const VERSION: u8 = 4;
}

/// The keys of one connection's two directions.
pub struct SessionKeys {
    /// Seals what the client sends.
    pub client_to_server: [u8; 32],
    /// Seals what the server sends.
    pub server_to_client: [u8; 32],
}

/// The session keys of a handshake whose X25519 agreement gave `shared`.
pub fn session_keys(secret: &[u8], shared: &[u8], server_nonce: &[u8], client_nonce: &[u8]) -> SessionKeys {
    use aws_lc_rs::hkdf::{HKDF_SHA256, Salt};
    let prk = Salt::new(HKDF_SHA256, &[server_nonce, client_nonce].concat()).extract(&[shared, secret].concat());
    let key = |info: &[u8]| {
        let mut key = [0u8; 32];
        let info = [info];
        let okm = prk.expand(&info, HKDF_SHA256).expect("32 bytes is a valid HKDF-SHA256 output length");
        okm.fill(&mut key).expect("the output length matches");
        key
    };
    SessionKeys {
        client_to_server: key(b"shoal frames client to server"),
        server_to_client: key(b"shoal frames server to client"),
    }
}

fn mac(key: &[u8], role: &[u8], first: &[u8], second: &[u8], entity: &str, modes: &[FrameMode]) -> Hmac<Sha256> {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("HMAC accepts keys of any length");
    mac.update(role);
    mac.update(first);
    mac.update(second);
    mac.update(&(entity.len() as u32).to_be_bytes());
    mac.update(entity.as_bytes());
    mac.update(&modes.iter().map(|m| m.byte()).collect::<Vec<u8>>());
    mac
}

/// The client's proof for a server nonce, its own nonce, the entity it claims and the
/// modes it offers.
pub fn client_proof(
    key: &[u8],
    server_nonce: &[u8],
    client_nonce: &[u8],
    entity: &str,
    modes: &[FrameMode],
) -> Vec<u8> {
    mac(key, b"shoal client", server_nonce, client_nonce, entity, modes).finalize().into_bytes().to_vec()
}

/// The server's proof, bound to both nonces in the opposite order, the entity and the
/// mode it picked.
pub fn server_proof(key: &[u8], client_nonce: &[u8], server_nonce: &[u8], entity: &str, mode: FrameMode) -> Vec<u8> {
    mac(key, b"shoal server", client_nonce, server_nonce, entity, &[mode]).finalize().into_bytes().to_vec()
}

/// Whether `proof` is the client's proof (compared in constant time).
pub fn verify_client(
    key: &[u8],
    server_nonce: &[u8],
    client_nonce: &[u8],
    entity: &str,
    modes: &[FrameMode],
    proof: &[u8],
) -> bool {
    mac(key, b"shoal client", server_nonce, client_nonce, entity, modes).verify_slice(proof).is_ok()
}

/// Whether `proof` is the server's proof (compared in constant time).
pub fn verify_server(
    key: &[u8],
    client_nonce: &[u8],
    server_nonce: &[u8],
    entity: &str,
    mode: FrameMode,
    proof: &[u8],
) -> bool {
    mac(key, b"shoal server", client_nonce, server_nonce, entity, &[mode]).verify_slice(proof).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proofs_bind_key_role_nonces_entity_and_modes() {
        let (s, c) = ([1u8; NONCE_LEN], [2u8; NONCE_LEN]);
        let both = [FrameMode::Secure, FrameMode::Crc];
        let proof = client_proof(b"secret", &s, &c, "client.a", &both);
        assert!(verify_client(b"secret", &s, &c, "client.a", &both, &proof));
        assert!(!verify_client(b"other", &s, &c, "client.a", &both, &proof), "wrong key");
        assert!(!verify_client(b"secret", &c, &s, "client.a", &both, &proof), "swapped nonces");
        assert!(!verify_client(b"secret", &s, &c, "client.b", &both, &proof), "another entity");
        assert!(!verify_client(b"secret", &s, &c, "client.a", &[FrameMode::Crc], &proof), "a downgraded offer");
        assert!(!verify_server(b"secret", &c, &s, "client.a", FrameMode::Secure, &proof), "no server proof");
        let server = server_proof(b"secret", &c, &s, "client.a", FrameMode::Secure);
        assert!(verify_server(b"secret", &c, &s, "client.a", FrameMode::Secure, &server));
        assert!(!verify_server(b"secret", &c, &s, "client.a", FrameMode::Crc, &server), "another pick");
    }

    #[test]
    fn handshake_messages_have_golden_bytes() {
        // Version 4, ClientProof (1): 32 nonce bytes, entity "c.a", modes [Secure (1),
        // Crc (0)], a 2-byte proof.
        let modes = vec![FrameMode::Secure, FrameMode::Crc];
        let proof = Handshake::ClientProof { nonce: [9; NONCE_LEN], entity: "c.a".into(), modes, proof: vec![5, 6] };
        let expected = [&[4, 1][..], &[9; NONCE_LEN], &[3, b'c', b'.', b'a'], &[2, 1, 0], &[2, 5, 6]].concat();
        assert_eq!(proof.encode(), expected);
        assert_eq!(Handshake::decode(&expected).unwrap(), proof);
        // ServerProof (2) picking Crc (0); Refused (3) with its reason.
        let server = Handshake::ServerProof { mode: FrameMode::Crc, proof: vec![7] };
        assert_eq!(server.encode(), [4, 2, 0, 1, 7]);
        assert_eq!(Handshake::Refused { reason: "no".into() }.encode(), [4, 3, 2, b'n', b'o']);
        let v3 = [&[3, 1][..], &[9; NONCE_LEN], &[3, b'c', b'.', b'a'], &[2, 5, 6]].concat();
        assert!(Handshake::decode(&v3).is_err(), "a version 3 handshake is refused");
    }

    #[test]
    fn mode_lists_parse_as_ceph_writes_them_and_the_client_preference_wins() {
        assert_eq!(FrameMode::parse_list("crc secure").unwrap(), [FrameMode::Crc, FrameMode::Secure]);
        assert_eq!(FrameMode::parse_list(" secure,crc ,secure").unwrap(), [FrameMode::Secure, FrameMode::Crc]);
        for bad in ["", " , ", "crc plain", "SECURE"] {
            let e = FrameMode::parse_list(bad).unwrap_err();
            assert!(e.message.contains("frame mode"), "{bad:?}: {e}");
        }
        let (crc, secure) = (FrameMode::Crc, FrameMode::Secure);
        assert_eq!(pick_mode(&[crc, secure], &[secure, crc]), Some(crc));
        assert_eq!(pick_mode(&[crc, secure], &[secure]), Some(secure));
        assert_eq!(pick_mode(&[crc], &[secure]), None);
    }

    #[test]
    fn session_keys_differ_by_direction_secret_and_agreement() {
        let (s, c) = ([1u8; NONCE_LEN], [2u8; NONCE_LEN]);
        let keys = session_keys(b"secret", b"shared", &s, &c);
        assert_ne!(keys.client_to_server, keys.server_to_client);
        let again = session_keys(b"secret", b"shared", &s, &c);
        assert_eq!((keys.client_to_server, keys.server_to_client), (again.client_to_server, again.server_to_client));
        for other in [
            session_keys(b"other", b"shared", &s, &c),
            session_keys(b"secret", b"other", &s, &c),
            session_keys(b"secret", b"shared", &c, &s),
        ] {
            assert_ne!(other.client_to_server, keys.client_to_server);
        }
    }
}
