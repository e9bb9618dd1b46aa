//! Sealed list cursors: a page's `next_cursor` names where the page ended, and that is an
//! item the caller may not be allowed to read (another owner's series or reminder of the same
//! subscriber, left out of the page). The API hands it out sealed: encrypted, so that it reveals
//! nothing, and authenticated, so that one altered or made up is refused.
//!
//! The construction is deterministic authenticated encryption from HMAC-SHA256 alone (the
//! `hmac` and `sha2` crates the suppression hashes already use): the tag is
//! HMAC(mac key, context ‖ plaintext) cut to 16 bytes and serves as the nonce (SIV); the
//! ciphertext is the plaintext XOR an HMAC(encryption key, tag ‖ block number) keystream. The
//! context names the list and the caller (which list, whose, listed by whom): a cursor opens
//! only where it was handed out, so it cannot be replayed on another list to learn where it
//! points. Two keys are derived
//! from the stack's suppression key, so every API instance opens every other's cursor; a
//! rotated key ends the cursors handed out before (the caller lists again from the start).

use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use super::SuppressionKey;

const TAG_LEN: usize = 16;
/// The most a sealed cursor may hold (a cursor names a time and an id of at most 128 bytes).
const MAX_PLAIN: usize = 512;

/// The keys cursors are sealed with.
#[derive(Clone)]
pub struct CursorSeal {
    encryption: [u8; 32],
    authentication: [u8; 32],
}

impl std::fmt::Debug for CursorSeal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CursorSeal(..)")
    }
}

impl CursorSeal {
    /// The seal of a stack: derived from its suppression key.
    pub fn from_key(key: &SuppressionKey) -> Self {
        Self::from_secret(key.as_bytes())
    }

    /// The seal of this process alone, for an API run without a suppression key (locally):
    /// random at first use, so its cursors open only in this process.
    pub fn process_local() -> Self {
        static LOCAL: std::sync::OnceLock<CursorSeal> = std::sync::OnceLock::new();
        LOCAL
            .get_or_init(|| {
                use rand::Rng;
                let mut secret = [0u8; 32];
                rand::rng().fill_bytes(&mut secret);
                Self::from_secret(&secret)
            })
            .clone()
    }

    fn from_secret(secret: &[u8]) -> Self {
        Self {
            encryption: prf(secret, &[b"list cursor: encryption"]),
            authentication: prf(secret, &[b"list cursor: authentication"]),
        }
    }

    /// `plain` sealed for `context`, as base64url.
    pub fn seal(&self, context: &str, plain: &str) -> String {
        let tag = self.tag(context, plain.as_bytes());
        let mut out = Vec::with_capacity(TAG_LEN + plain.len());
        out.extend_from_slice(&tag);
        out.extend_from_slice(plain.as_bytes());
        self.xor_keystream(&tag, &mut out[TAG_LEN..]);
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(out)
    }

    /// What [`CursorSeal::seal`] sealed for `context`, or `None` for a token it did not make
    /// with these keys for that context (altered, cut, made up, handed out for another list or
    /// caller, or sealed before a key rotation).
    pub fn open(&self, context: &str, token: &str) -> Option<String> {
        let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(token)
            .ok()?;
        if raw.len() < TAG_LEN || raw.len() > TAG_LEN + MAX_PLAIN {
            return None;
        }
        let (tag, sealed) = raw.split_at(TAG_LEN);
        let tag: [u8; TAG_LEN] = tag.try_into().ok()?;
        let mut plain = sealed.to_vec();
        self.xor_keystream(&tag, &mut plain);
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&self.authentication).ok()?;
        mac.update(&context_prefix(context));
        mac.update(context.as_bytes());
        mac.update(&plain);
        // Constant time, on the tag's 16 bytes.
        mac.verify_truncated_left(&tag).ok()?;
        String::from_utf8(plain).ok()
    }

    fn tag(&self, context: &str, plain: &[u8]) -> [u8; TAG_LEN] {
        let full = prf(
            &self.authentication,
            &[&context_prefix(context), context.as_bytes(), plain],
        );
        let mut tag = [0u8; TAG_LEN];
        tag.copy_from_slice(&full[..TAG_LEN]);
        tag
    }

    fn xor_keystream(&self, tag: &[u8; TAG_LEN], data: &mut [u8]) {
        for (block, chunk) in data.chunks_mut(32).enumerate() {
            let counter = (block as u32).to_be_bytes();
            let stream = prf(&self.encryption, &[tag, &counter]);
            for (d, s) in chunk.iter_mut().zip(stream) {
                *d ^= s;
            }
        }
    }
}

/// The context's length, first: no context and plaintext pair reads as another.
fn context_prefix(context: &str) -> [u8; 8] {
    (context.len() as u64).to_be_bytes()
}

fn prf(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("HMAC takes any key");
    for p in parts {
        mac.update(p);
    }
    mac.finalize().into_bytes().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    const CTX: &str = "series\0u1\0app-b";

    fn seal() -> CursorSeal {
        CursorSeal::from_key(&SuppressionKey::new(vec![7u8; 32]).unwrap())
    }

    #[test]
    fn a_sealed_cursor_opens_to_what_was_sealed_and_reveals_none_of_it() {
        let plain = r#"[1798761600000,"insulin-u1"]"#;
        let token = seal().seal(CTX, plain);
        assert_eq!(seal().open(CTX, &token).as_deref(), Some(plain));
        let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(&token)
            .unwrap();
        let shown = String::from_utf8_lossy(&raw);
        assert!(!shown.contains("insulin"), "{shown}");
        assert!(!token.contains(&base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(plain)));
    }

    #[test]
    fn an_altered_cut_foreign_or_plain_cursor_is_refused() {
        let plain = r#"[1798761600000,"insulin-u1"]"#;
        let token = seal().seal(CTX, plain);
        assert_eq!(
            seal().open("series\0u2\0app-b", &token),
            None,
            "another list"
        );
        assert_eq!(seal().open("", &token), None, "no context");
        let mut raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(&token)
            .unwrap();
        for i in [0, TAG_LEN, raw.len() - 1] {
            raw[i] ^= 1;
            let altered = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&raw);
            assert_eq!(seal().open(CTX, &altered), None, "byte {i} flipped");
            raw[i] ^= 1;
        }
        let cut = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&raw[..raw.len() - 1]);
        assert_eq!(seal().open(CTX, &cut), None);
        let other = CursorSeal::from_key(&SuppressionKey::new(vec![8u8; 32]).unwrap());
        assert_eq!(other.open(CTX, &token), None, "another stack's key");
        let unsealed = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(plain);
        assert_eq!(seal().open(CTX, &unsealed), None, "an unsealed cursor");
        assert_eq!(seal().open(CTX, "not base64!"), None);
    }
}
