//! Mutual authentication with a key both sides know, without sending it, and the keys of
//! the session that follows. The client names the entity it is (`osd.3`, `client.rgw.0`);
//! the key is the cluster secret for the cluster's daemons and its administrator, or the
//! entity's own key (see `shoal_types::auth`). Each side sends an ephemeral X25519 public
//! key as its nonce and proves knowledge of the key with an HMAC-SHA256 over both nonces,
//! the entity and its role; the frames after the handshake are sealed (AES-256-GCM, see
//! [`crate::frame`]) with keys derived by HKDF-SHA256 from the X25519 shared secret and the
//! key, so only holders of the key can read or forge them, and a key stolen later does not
//! open recorded sessions. Pure functions; the TCP transport drives the exchange.

use hmac::{Hmac, KeyInit, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use shoal_types::Versioned;

/// Bytes of each side's nonce.
pub const NONCE_LEN: usize = 32;

/// The handshake messages, in the order they are sent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Handshake {
    /// Server → client: the server's nonce.
    Challenge {
        /// The server's ephemeral X25519 public key.
        nonce: [u8; NONCE_LEN],
    },
    /// Client → server: the client's nonce, who it is, and its proof.
    ClientProof {
        /// The client's ephemeral X25519 public key.
        nonce: [u8; NONCE_LEN],
        /// The entity the client authenticates as.
        entity: String,
        /// HMAC(key, "shoal client" ‖ server nonce ‖ client nonce ‖ entity).
        proof: Vec<u8>,
    },
    /// Server → client: the server's proof; after it, messages flow.
    ServerProof {
        /// HMAC(key, "shoal server" ‖ client nonce ‖ server nonce ‖ entity).
        proof: Vec<u8>,
    },
}

impl Versioned for Handshake {
    const NAME: &'static str = "handshake";
    /// Version 3: the client names its entity, which the proofs bind; a version 2 peer
    /// (no entity, every peer holding the cluster secret) is refused, as is version 1.
    const VERSION: u8 = 3;
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

fn mac(key: &[u8], role: &[u8], first: &[u8], second: &[u8], entity: &str) -> Hmac<Sha256> {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("HMAC accepts keys of any length");
    mac.update(role);
    mac.update(first);
    mac.update(second);
    mac.update(entity.as_bytes());
    mac
}

/// The client's proof for a server nonce, its own nonce and the entity it claims.
pub fn client_proof(key: &[u8], server_nonce: &[u8], client_nonce: &[u8], entity: &str) -> Vec<u8> {
    mac(key, b"shoal client", server_nonce, client_nonce, entity).finalize().into_bytes().to_vec()
}

/// The server's proof, bound to both nonces in the opposite order and the entity.
pub fn server_proof(key: &[u8], client_nonce: &[u8], server_nonce: &[u8], entity: &str) -> Vec<u8> {
    mac(key, b"shoal server", client_nonce, server_nonce, entity).finalize().into_bytes().to_vec()
}

/// Whether `proof` is the client's proof (compared in constant time).
pub fn verify_client(key: &[u8], server_nonce: &[u8], client_nonce: &[u8], entity: &str, proof: &[u8]) -> bool {
    mac(key, b"shoal client", server_nonce, client_nonce, entity).verify_slice(proof).is_ok()
}

/// Whether `proof` is the server's proof (compared in constant time).
pub fn verify_server(key: &[u8], client_nonce: &[u8], server_nonce: &[u8], entity: &str, proof: &[u8]) -> bool {
    mac(key, b"shoal server", client_nonce, server_nonce, entity).verify_slice(proof).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proofs_bind_key_role_nonces_and_entity() {
        let (s, c) = ([1u8; NONCE_LEN], [2u8; NONCE_LEN]);
        let proof = client_proof(b"secret", &s, &c, "client.a");
        assert!(verify_client(b"secret", &s, &c, "client.a", &proof));
        assert!(!verify_client(b"other", &s, &c, "client.a", &proof), "wrong key");
        assert!(!verify_client(b"secret", &c, &s, "client.a", &proof), "swapped nonces");
        assert!(!verify_client(b"secret", &s, &c, "client.b", &proof), "another entity");
        assert!(!verify_server(b"secret", &c, &s, "client.a", &proof), "a client proof is no server proof");
        assert!(verify_server(b"secret", &c, &s, "client.a", &server_proof(b"secret", &c, &s, "client.a")));
    }

    #[test]
    fn handshake_messages_have_golden_bytes() {
        // Version 3, ClientProof (1): 32 nonce bytes, entity "c.a", a 2-byte proof.
        let proof = Handshake::ClientProof { nonce: [9; NONCE_LEN], entity: "c.a".into(), proof: vec![5, 6] };
        let expected = [&[3, 1][..], &[9; NONCE_LEN], &[3, b'c', b'.', b'a'], &[2, 5, 6]].concat();
        assert_eq!(proof.encode(), expected);
        assert_eq!(Handshake::decode(&expected).unwrap(), proof);
        let v2 = [&[2, 1][..], &[9; NONCE_LEN], &[2, 5, 6]].concat();
        assert!(Handshake::decode(&v2).is_err(), "a version 2 handshake is refused");
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
