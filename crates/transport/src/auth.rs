//! Mutual authentication with a shared cluster secret, without sending it: each side sends
//! a random nonce and proves knowledge of the secret with an HMAC-SHA256 over both nonces
//! and its role. Pure functions; the TCP transport drives the exchange.

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
        /// Fresh random bytes.
        nonce: [u8; NONCE_LEN],
    },
    /// Client → server: the client's nonce and its proof.
    ClientProof {
        /// Fresh random bytes.
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
    const VERSION: u8 = 1;
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
}
