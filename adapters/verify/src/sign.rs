//! Event signing: [`Keys`] computes an event's NIP-01 id and signs it with BIP-340 Schnorr
//! (libsecp256k1, constant time), the inverse of [`Verifier`](crate::Verifier).

use std::fmt;

use secp256k1::{Keypair, Message, Secp256k1, SignOnly};
use serde::Serialize;

use crate::{event_hash, hex_lower};

/// The kind of a NIP-42 answer to an `AUTH` challenge.
pub const AUTH_KIND: u16 = 22242;

/// The bytes are not a secp256k1 secret key: not 32 of them, zero, or not below the curve
/// order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InvalidSecretKey;

impl fmt::Display for InvalidSecretKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("not a secret key: expected 32 bytes, not zero, below the curve order")
    }
}

impl std::error::Error for InvalidSecretKey {}

/// A secret key that signs events: its libsecp256k1 key pair and a signing-only context.
///
/// The key pair (which holds the secret) is overwritten when the value is dropped, with
/// secp256k1's `Keypair::non_secure_erase`: volatile writes the optimiser keeps. As that
/// function's documentation says, this is best effort: copies the compiler makes when a
/// value moves cannot be reached, so keep a `Keys` in one place and borrow it. The secret
/// is never copied out of the key pair (there is no accessor), and `Debug` shows only the
/// public key.
///
/// ```
/// use tether_verify::{Keys, Verifier};
///
/// let mut secret = [0u8; 32];
/// secret[31] = 3;
/// let keys = Keys::from_secret_bytes(&secret).unwrap();
/// let event = keys.sign_auth("wss://relay.example.com", "challenge", 1_700_000_000, None);
/// assert_eq!(Verifier::new().verify(&event), Ok(()));
/// ```
pub struct Keys {
    secp: Secp256k1<SignOnly>,
    keypair: Keypair,
    /// The x-only public key, in lowercase hex: the `pubkey` of every event these keys sign.
    public_hex: String,
}

impl Keys {
    /// Keys for the 32 bytes of a secret key (read in place: nothing else keeps them).
    ///
    /// # Errors
    /// [`InvalidSecretKey`] for anything but 32 bytes naming a scalar in `1..n`.
    pub fn from_secret_bytes(secret: &[u8]) -> Result<Keys, InvalidSecretKey> {
        let secp = Secp256k1::signing_only();
        let keypair = Keypair::from_seckey_slice(&secp, secret).map_err(|_| InvalidSecretKey)?;
        let public_hex = hex_lower(&keypair.x_only_public_key().0.serialize());
        Ok(Keys {
            secp,
            keypair,
            public_hex,
        })
    }

    /// The x-only public key (BIP-340): the 32 bytes a Nostr `pubkey` is the hex of.
    #[must_use]
    pub fn public_key(&self) -> [u8; 32] {
        self.keypair.x_only_public_key().0.serialize()
    }

    /// The public key in lowercase hex, as events carry it.
    #[must_use]
    pub fn public_key_hex(&self) -> &str {
        &self.public_hex
    }

    /// The BIP-340 Schnorr signature of a 32-byte message (for an event: its id).
    ///
    /// `aux_rand` is BIP-340's auxiliary randomness: 32 fresh random bytes are what BIP-340
    /// recommends (they mask the nonce derivation against side channels); `None` is the
    /// same as 32 zero bytes and makes the signature a function of the key and the message
    /// alone. Either way the nonce is derived from the secret key and the message, so no
    /// choice of `aux_rand` can reuse a nonce.
    #[must_use]
    pub fn sign_digest(&self, digest: &[u8; 32], aux_rand: Option<&[u8; 32]>) -> [u8; 64] {
        let message = Message::from_digest(*digest);
        let signature = match aux_rand {
            Some(aux) => self
                .secp
                .sign_schnorr_with_aux_rand(&message, &self.keypair, aux),
            None => self.secp.sign_schnorr_no_aux_rand(&message, &self.keypair),
        };
        signature.serialize()
    }

    /// A signed event, as JSON (`{"id","pubkey","created_at","kind","tags","content","sig"}`,
    /// serialized as NIP-01 says): its id is the sha256 of
    /// `[0,pubkey,created_at,kind,tags,content]`, its `sig` [`Keys::sign_digest`] of the id.
    #[must_use]
    pub fn sign_event(
        &self,
        created_at: u64,
        kind: u16,
        tags: &[Vec<String>],
        content: &str,
        aux_rand: Option<&[u8; 32]>,
    ) -> String {
        let id = event_hash(
            self.public_hex.as_str(),
            created_at,
            u64::from(kind),
            tags,
            content,
        );
        let sig = self.sign_digest(&id, aux_rand);
        let event = Event {
            id: &hex_lower(&id),
            pubkey: &self.public_hex,
            created_at,
            kind,
            tags,
            content,
            sig: &hex_lower(&sig),
        };
        // Strings, integers and arrays of strings always serialize.
        serde_json::to_string(&event).unwrap_or_default()
    }

    /// The NIP-42 answer to `challenge` from the relay at `relay_url`: a kind 22242 event
    /// with the tags `["relay", relay_url]` and `["challenge", challenge]`, no content, and
    /// `created_at` (unix seconds: the caller's clock, so signing reads none).
    #[must_use]
    pub fn sign_auth(
        &self,
        relay_url: &str,
        challenge: &str,
        created_at: u64,
        aux_rand: Option<&[u8; 32]>,
    ) -> String {
        let tags = [
            vec!["relay".to_owned(), relay_url.to_owned()],
            vec!["challenge".to_owned(), challenge.to_owned()],
        ];
        self.sign_event(created_at, AUTH_KIND, &tags, "", aux_rand)
    }
}

impl Drop for Keys {
    fn drop(&mut self) {
        self.keypair.non_secure_erase();
    }
}

impl fmt::Debug for Keys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Keys")
            .field("public_key", &self.public_hex)
            .finish_non_exhaustive()
    }
}

/// A signed event's fields in NIP-01's order.
#[derive(Serialize)]
struct Event<'a> {
    id: &'a str,
    pubkey: &'a str,
    created_at: u64,
    kind: u16,
    tags: &'a [Vec<String>],
    content: &'a str,
    sig: &'a str,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(text: &str) -> Vec<u8> {
        (0..text.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
            .collect()
    }

    fn array32(text: &str) -> [u8; 32] {
        hex(text).try_into().unwrap()
    }

    /// BIP-340's signing vectors 0-3 (secret key, public key, aux_rand, message, signature).
    const BIP340: [[&str; 5]; 4] = [
        [
            "0000000000000000000000000000000000000000000000000000000000000003",
            "f9308a019258c31049344f85f89d5229b531c845836f99b08601f113bce036f9",
            "0000000000000000000000000000000000000000000000000000000000000000",
            "0000000000000000000000000000000000000000000000000000000000000000",
            "e907831f80848d1069a5371b402410364bdf1c5f8307b0084c55f1ce2dca8215\
             25f66a4a85ea8b71e482a74f382d2ce5ebeee8fdb2172f477df4900d310536c0",
        ],
        [
            "b7e151628aed2a6abf7158809cf4f3c762e7160f38b4da56a784d9045190cfef",
            "dff1d77f2a671c5f36183726db2341be58feae1da2deced843240f7b502ba659",
            "0000000000000000000000000000000000000000000000000000000000000001",
            "243f6a8885a308d313198a2e03707344a4093822299f31d0082efa98ec4e6c89",
            "6896bd60eeae296db48a229ff71dfe071bde413e6d43f917dc8dcf8c78de3341\
             8906d11ac976abccb20b091292bff4ea897efcb639ea871cfa95f6de339e4b0a",
        ],
        [
            "c90fdaa22168c234c4c6628b80dc1cd129024e088a67cc74020bbea63b14e5c9",
            "dd308afec5777e13121fa72b9cc1b7cc0139715309b086c960e18fd969774eb8",
            "c87aa53824b4d7ae2eb035a2b5bbbccc080e76cdc6d1692c4b0b62d798e6d906",
            "7e2d58d8b3bcdf1abadec7829054f90dda9805aab56c77333024b9d0a508b75c",
            "5831aaeed7b44bb74e5eab94ba9d4294c49bcf2a60728d8b4c200f50dd313c1b\
             ab745879a5ad954a72c45a91c3a51d3c7adea98d82f8481e0e1e03674a6f3fb7",
        ],
        [
            "0b432b2677937381aef05bb02a66ecd012773062cf3fa2549e44f58ed2401710",
            "25d1dff95105f5253c4022f628a996ad3a0d95fbf21d468a1b33f8c160d8f517",
            "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
            "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
            "7eb0509757e246f19449885651611cb965ecc1a187dd51b64fda1edc9637d5ec\
             97582b9cb13db3933705b32ba982af5af25fd78881ebb32771fc5922efc66ea3",
        ],
    ];

    #[test]
    fn bip340_signing_vectors() {
        for [secret, public, aux, message, sig] in BIP340 {
            let keys = Keys::from_secret_bytes(&hex(secret)).unwrap();
            assert_eq!(keys.public_key_hex(), public);
            assert_eq!(hex_lower(&keys.public_key()), public);
            let signed = keys.sign_digest(&array32(message), Some(&array32(aux)));
            assert_eq!(hex_lower(&signed), sig, "{secret}");
        }
    }

    #[test]
    fn no_aux_rand_is_zero_aux_rand() {
        let [secret, _, aux, message, sig] = BIP340[0];
        let keys = Keys::from_secret_bytes(&hex(secret)).unwrap();
        assert_eq!(array32(aux), [0; 32]);
        assert_eq!(hex_lower(&keys.sign_digest(&array32(message), None)), sig);
    }

    #[test]
    fn what_is_not_a_secret_key_is_refused() {
        let order = hex("fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141");
        for bad in [
            vec![0; 32],
            order,
            vec![0xff; 32],
            vec![1; 31],
            vec![1; 33],
            vec![],
        ] {
            assert_eq!(
                Keys::from_secret_bytes(&bad).map(|_| ()),
                Err(InvalidSecretKey)
            );
        }
    }

    #[test]
    fn debug_shows_the_public_key_only() {
        let keys = Keys::from_secret_bytes(&hex(BIP340[1][0])).unwrap();
        let shown = format!("{keys:?}");
        assert!(shown.contains(BIP340[1][1]), "{shown}");
        assert!(!shown.contains(BIP340[1][0]), "{shown}");
    }
}
