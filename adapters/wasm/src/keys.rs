//! Verification, signing and the relay URL rule: libsecp256k1 (tether-verify) compiled to
//! wasm, so a verdict or a signature is the one every other host gets.

use std::cell::RefCell;

use tether_verify::{Keys, Verifier};
use wasm_bindgen::prelude::wasm_bindgen;

use crate::{whole, TetherError};

thread_local! {
    // One verification context for the free function: building one costs more than a check.
    static VERIFIER: RefCell<Option<Verifier>> = const { RefCell::new(None) };
}

/// Check an event's id (sha256 of its NIP-01 serialization) and BIP-340 signature: returns
/// `undefined` when both hold, else why not.
#[wasm_bindgen(js_name = verifyEvent)]
pub fn verify_event(event: &str) -> Option<String> {
    VERIFIER.with(|cell| {
        let mut verifier = cell.borrow_mut();
        let verifier = verifier.get_or_insert_with(Verifier::new);
        verifier.verify(event).err().map(|why| why.to_string())
    })
}

/// A relay URL in its one spelling (lowercase scheme and host, no default port, no
/// trailing slash); `allowPrivate` admits loopback and private-network hosts.
///
/// # Errors
/// `InvalidArgument` naming what is wrong with the URL.
#[wasm_bindgen(js_name = normalizeRelayUrl)]
pub fn normalize_relay_url(url: &str, allow_private: bool) -> Result<String, TetherError> {
    use tether_core::router::relay_url::{normalize, BadRelayUrl, MAX_URL_LEN};
    normalize(url, allow_private).map_err(|e| {
        let why = match e {
            BadRelayUrl::TooLong => format!("longer than {MAX_URL_LEN} bytes"),
            BadRelayUrl::Private => "a loopback, private or link-local address".to_owned(),
            _ => "not a ws:// or wss:// URL with a host".to_owned(),
        };
        TetherError::invalid(format!("{url}: {why}"))
    })
}

/// Whether an IP address (as text: `127.0.0.1`, `::ffff:10.0.0.1`, ...) is one a relay from
/// a stranger's relay list may not be dialed at: loopback, private, link-local and the like,
/// in their IPv4-mapped, IPv4-compatible and NAT64 forms too (the core's one rule).
///
/// # Errors
/// `InvalidArgument` for text that is not an IP address.
#[wasm_bindgen(js_name = isPrivateIp)]
pub fn is_private_ip(address: &str) -> Result<bool, TetherError> {
    let ip: std::net::IpAddr = address
        .parse()
        .map_err(|_| TetherError::invalid(format!("{address:?} is not an IP address")))?;
    Ok(tether_core::router::relay_url::is_private_ip(ip))
}

/// A secret key held inside the wasm: it signs events and AUTH answers; the key is wiped
/// when the signer is freed.
#[wasm_bindgen]
#[derive(Debug)]
pub struct Signer {
    keys: Keys,
}

#[wasm_bindgen]
impl Signer {
    /// A signer for a 32-byte secret key.
    ///
    /// # Errors
    /// `InvalidArgument` for bytes that are not a valid secp256k1 secret key.
    #[wasm_bindgen(constructor)]
    pub fn new(secret_key: &[u8]) -> Result<Signer, TetherError> {
        let keys = Keys::from_secret_bytes(secret_key)
            .map_err(|_| TetherError::invalid("not a valid secret key (32 bytes, below n)"))?;
        Ok(Signer { keys })
    }

    /// The x-only public key, hex.
    #[wasm_bindgen(js_name = publicKey)]
    pub fn public_key(&self) -> String {
        self.keys.public_key_hex().to_owned()
    }

    /// A signed event as JSON: `tags` is a JSON array of string arrays; `auxRand` (32
    /// bytes) is BIP-340's auxiliary randomness (absent: none, deterministic).
    ///
    /// # Errors
    /// `InvalidArgument` for tags that do not parse, a kind past 65535 or an `auxRand` that
    /// is not 32 bytes.
    #[wasm_bindgen(js_name = signEvent)]
    pub fn sign_event(
        &self,
        created_at: f64,
        kind: u32,
        tags: &str,
        content: &str,
        aux_rand: Option<Vec<u8>>,
    ) -> Result<String, TetherError> {
        let created_at = whole(created_at, "createdAt")?;
        let kind = u16::try_from(kind)
            .map_err(|_| TetherError::invalid(format!("kind {kind} is past 65535")))?;
        let tags: Vec<Vec<String>> = serde_json::from_str(tags)
            .map_err(|e| TetherError::invalid(format!("tags are not arrays of strings: {e}")))?;
        let aux = aux(aux_rand)?;
        Ok(self
            .keys
            .sign_event(created_at, kind, &tags, content, aux.as_ref()))
    }

    /// The signed kind 22242 answering a relay's AUTH `challenge`.
    ///
    /// # Errors
    /// `InvalidArgument` for an `auxRand` that is not 32 bytes.
    #[wasm_bindgen(js_name = signAuth)]
    pub fn sign_auth(
        &self,
        relay_url: &str,
        challenge: &str,
        created_at: f64,
        aux_rand: Option<Vec<u8>>,
    ) -> Result<String, TetherError> {
        let created_at = whole(created_at, "createdAt")?;
        let aux = aux(aux_rand)?;
        Ok(self
            .keys
            .sign_auth(relay_url, challenge, created_at, aux.as_ref()))
    }
}

fn aux(bytes: Option<Vec<u8>>) -> Result<Option<[u8; 32]>, TetherError> {
    bytes
        .map(|b| {
            <[u8; 32]>::try_from(b.as_slice())
                .map_err(|_| TetherError::invalid("auxRand must be 32 bytes"))
        })
        .transpose()
}

/// Lowercase hex of bytes.
pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signed_event_verifies_and_a_changed_one_does_not() {
        let signer = Signer::new(&[7u8; 32]).unwrap();
        let event = signer
            .sign_event(1_700_000_000.0, 1, r#"[["t","x"]]"#, "hi", None)
            .unwrap();
        assert_eq!(verify_event(&event), None);
        let changed = event.replace("\"hi\"", "\"ho\"");
        assert_eq!(
            verify_event(&changed).as_deref(),
            Some("id is not the hash of the event")
        );
        assert!(Signer::new(&[0u8; 32]).is_err());
        assert_eq!(is_private_ip("127.0.0.1"), Ok(true));
        assert_eq!(is_private_ip("::ffff:10.1.2.3"), Ok(true));
        assert_eq!(is_private_ip("93.184.216.34"), Ok(false));
        assert!(is_private_ip("localhost").is_err());
        assert_eq!(hex(&[0x0f, 0xa0]), "0fa0");
    }
}
