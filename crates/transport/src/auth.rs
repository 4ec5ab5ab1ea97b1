//! Mutual authentication with a shared cluster secret, without sending it, and the keys
//! of the session that follows. Each side sends an ephemeral X25519 public key as its
//! nonce and proves knowledge of the secret with an HMAC-SHA256 over both nonces and its
//! role; the frames after the handshake are sealed (AES-256-GCM, see [`crate::frame`])
//! with keys derived by HKDF-SHA256 from the X25519 shared secret and the cluster secret,
//! so only holders of the secret can read or forge them, and a secret stolen later does
//! not open recorded sessions. Pure functions; the TCP transport drives the exchange.

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
    /// Client → server: the client's nonce and its proof.
    ClientProof {
        /// The client's ephemeral X25519 public key.
        nonce: [u8; NONCE_LEN],
        /// HMAC(secret, "shoal client" ‖ server nonce ‖ client nonce).
        proof: Vec<u8>,
    },
    /// Server → client: the server's proof; after it, messages flow.
    ServerProof {
        /// HMAC(secret, "shoal server" ‖ client nonce ‖ server nonce).
        proof: Vec<u8>,
    },
}

impl Versioned for Handshake {
    const NAME: &'static str = "handshake";
    /// Version 2: the nonces are X25519 public keys and sealed frames follow; a version 1
    /// peer (random nonces, frames in the clear) is refused.
    const VERSION: u8 = 2;
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

fn mac(secret: &[u8], role: &[u8], first: &[u8], second: &[u8]) -> Hmac<Sha256> {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(secret).expect("HMAC accepts keys of any length");
    mac.update(role);
    mac.update(first);
    mac.update(second);
    mac
}

/// The client's proof for a server nonce and its own nonce.
pub fn client_proof(secret: &[u8], server_nonce: &[u8], client_nonce: &[u8]) -> Vec<u8> {
    mac(secret, b"shoal client", server_nonce, client_nonce).finalize().into_bytes().to_vec()
}

/// The server's proof, bound to both nonces in the opposite order.
pub fn server_proof(secret: &[u8], client_nonce: &[u8], server_nonce: &[u8]) -> Vec<u8> {
    mac(secret, b"shoal server", client_nonce, server_nonce).finalize().into_bytes().to_vec()
}

/// Whether `proof` is the client's proof (compared in constant time).
pub fn verify_client(secret: &[u8], server_nonce: &[u8], client_nonce: &[u8], proof: &[u8]) -> bool {
    mac(secret, b"shoal client", server_nonce, client_nonce).verify_slice(proof).is_ok()
}

/// Whether `proof` is the server's proof (compared in constant time).
pub fn verify_server(secret: &[u8], client_nonce: &[u8], server_nonce: &[u8], proof: &[u8]) -> bool {
    mac(secret, b"shoal server", client_nonce, server_nonce).verify_slice(proof).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proofs_bind_secret_role_and_nonces() {
        let (s, c) = ([1u8; NONCE_LEN], [2u8; NONCE_LEN]);
        let proof = client_proof(b"secret", &s, &c);
        assert!(verify_client(b"secret", &s, &c, &proof));
        assert!(!verify_client(b"other", &s, &c, &proof), "wrong secret");
        assert!(!verify_client(b"secret", &c, &s, &proof), "swapped nonces");
        assert!(!verify_server(b"secret", &c, &s, &proof), "a client proof is no server proof");
        assert!(verify_server(b"secret", &c, &s, &server_proof(b"secret", &c, &s)));
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
