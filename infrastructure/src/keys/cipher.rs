//! AES-256-GCM from `ring`: a 256-bit key seals bytes with a fresh random nonce, bound to
//! associated data that names what they belong to — sealed bytes moved anywhere else (another
//! event, another key's row) do not open.
//!
//! Sealed form: a version byte, the 96-bit nonce, then the ciphertext with its 128-bit tag.
//! Random nonces are safe far beyond what one actor or conversation ever writes under its
//! key (NIST SP 800-38D: 2^32 messages per key).

use ring::aead::{
    Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, MAX_TAG_LEN as TAG_LEN, NONCE_LEN,
};
use ring::rand::{SecureRandom, SystemRandom};

/// Bytes of a key.
pub const KEY_BYTES: usize = 32;

/// The first byte of every sealed value: the form above.
const FORM: u8 = 1;

/// A 256-bit AES-GCM key. Its bytes never print. Cheap to clone: the key schedule is
/// worked out once, when the key is made or read, not for every text it seals or opens.
#[derive(Clone)]
pub struct Key(std::sync::Arc<Prepared>);

struct Prepared {
    bytes: [u8; KEY_BYTES],
    aead: LessSafeKey,
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key(…)")
    }
}

/// Why nothing was sealed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CipherError {
    /// The system's random source failed (it does not, on any platform the service runs
    /// on).
    #[error("the system's random source failed")]
    NoRandom,
    /// More than AES-GCM seals under one nonce (about 64 GiB).
    #[error("too long to seal")]
    TooLong,
}

impl Key {
    /// A new random key.
    ///
    /// # Errors
    /// [`CipherError::NoRandom`].
    pub fn generate() -> Result<Self, CipherError> {
        let mut bytes = [0u8; KEY_BYTES];
        SystemRandom::new()
            .fill(&mut bytes)
            .map_err(|_| CipherError::NoRandom)?;
        Ok(Self::prepared(bytes))
    }

    fn prepared(bytes: [u8; KEY_BYTES]) -> Self {
        // A key of the right length always makes an AES-256-GCM key.
        let aead = LessSafeKey::new(
            UnboundKey::new(&AES_256_GCM, &bytes).unwrap_or_else(|_| unreachable!("32 bytes")),
        );
        Self(std::sync::Arc::new(Prepared { bytes, aead }))
    }

    /// The key of exactly [`KEY_BYTES`] bytes; `None` for any other length.
    pub fn from_bytes(bytes: &[u8]) -> Option<Self> {
        <[u8; KEY_BYTES]>::try_from(bytes).ok().map(Self::prepared)
    }

    /// Its bytes, to be stored (wrapped by the master key when there is one).
    pub fn bytes(&self) -> &[u8; KEY_BYTES] {
        &self.0.bytes
    }

    fn aead(&self) -> &LessSafeKey {
        &self.0.aead
    }

    /// `plaintext` sealed under this key and bound to `aad`, in one allocation: the form
    /// byte and nonce, the plaintext encrypted where it lies, then the tag.
    ///
    /// # Errors
    /// [`CipherError`].
    pub fn seal(&self, aad: &[u8], plaintext: &[u8]) -> Result<Vec<u8>, CipherError> {
        let nonce = nonces::next()?;
        let head = 1 + NONCE_LEN;
        let mut sealed = Vec::with_capacity(head + plaintext.len() + TAG_LEN);
        sealed.push(FORM);
        sealed.extend_from_slice(&nonce);
        sealed.extend_from_slice(plaintext);
        let tag = self
            .aead()
            .seal_in_place_separate_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(aad),
                &mut sealed[head..],
            )
            .map_err(|_| CipherError::TooLong)?;
        sealed.extend_from_slice(tag.as_ref());
        Ok(sealed)
    }

    /// What `sealed` holds, if it was sealed under this key with this `aad` and not changed
    /// since; `None` otherwise (another key, other associated data, altered bytes, another
    /// form).
    pub fn open(&self, aad: &[u8], sealed: &[u8]) -> Option<Vec<u8>> {
        self.open_owned(aad, sealed.to_vec())
    }

    /// [`Key::open`] on bytes of the caller's: opened where they lie, the plaintext moved to
    /// their front — no allocation (a field sealed in layers is opened layer by layer).
    pub fn open_owned(&self, aad: &[u8], mut sealed: Vec<u8>) -> Option<Vec<u8>> {
        let head = 1 + NONCE_LEN;
        if sealed.first() != Some(&FORM) || sealed.len() < head {
            return None;
        }
        let nonce = Nonce::try_assume_unique_for_key(&sealed[1..head]).ok()?;
        let plain = self
            .aead()
            .open_in_place(nonce, Aad::from(aad), &mut sealed[head..])
            .ok()?
            .len();
        sealed.truncate(head + plain);
        sealed.drain(..head);
        Some(sealed)
    }
}

/// Nonces from the system's random source, fetched a page at a time: one `getrandom` call
/// per [`nonces::PAGE`] bytes instead of one per layer sealed. A nonce is public (stored
/// beside its ciphertext); all GCM asks of it is not to repeat under a key, which random
/// bytes from the OS give whether fetched one by one or by the page. Each thread keeps its
/// own page, and a byte is handed out once.
mod nonces {
    use std::cell::RefCell;

    use ring::aead::NONCE_LEN;
    use ring::rand::{SecureRandom, SystemRandom};

    use super::CipherError;

    /// Bytes fetched at a time: 341 nonces.
    pub const PAGE: usize = 4096;

    struct Page {
        bytes: [u8; PAGE],
        taken: usize,
    }

    thread_local! {
        static PAGE_OF_THREAD: RefCell<Page> = const {
            RefCell::new(Page { bytes: [0; PAGE], taken: PAGE })
        };
    }

    /// A fresh nonce.
    pub fn next() -> Result<[u8; NONCE_LEN], CipherError> {
        PAGE_OF_THREAD.with_borrow_mut(|page| {
            if page.taken + NONCE_LEN > PAGE {
                SystemRandom::new()
                    .fill(&mut page.bytes)
                    .map_err(|_| CipherError::NoRandom)?;
                page.taken = 0;
            }
            let mut nonce = [0u8; NONCE_LEN];
            nonce.copy_from_slice(&page.bytes[page.taken..page.taken + NONCE_LEN]);
            // Handed out once: wiped from the page.
            page.bytes[page.taken..page.taken + NONCE_LEN].fill(0);
            page.taken += NONCE_LEN;
            Ok(nonce)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> Key {
        Key::generate().expect("random")
    }

    #[test]
    fn given_a_sealed_text_when_opened_with_its_key_and_aad_then_it_reads_back() {
        let k = key();
        let sealed = k.seal(b"event 1 content", b"hello Alice").expect("sealed");
        assert_eq!(
            k.open(b"event 1 content", &sealed).as_deref(),
            Some(&b"hello Alice"[..])
        );
    }

    #[test]
    fn given_a_sealed_text_then_it_does_not_hold_the_text() {
        let sealed = key().seal(b"aad", b"hello Alice").expect("sealed");
        assert!(!sealed.windows(5).any(|w| w == b"Alice"));
    }

    #[test]
    fn given_a_sealed_text_when_opened_with_another_aad_then_nothing() {
        let k = key();
        let sealed = k.seal(b"event 1 content", b"hello").expect("sealed");
        assert_eq!(k.open(b"event 2 content", &sealed), None);
    }

    #[test]
    fn given_a_sealed_text_when_opened_with_another_key_then_nothing() {
        let sealed = key().seal(b"aad", b"hello").expect("sealed");
        assert_eq!(key().open(b"aad", &sealed), None);
    }

    #[test]
    fn given_a_sealed_text_when_a_byte_changes_then_nothing() {
        let k = key();
        let mut sealed = k.seal(b"aad", b"hello").expect("sealed");
        let last = sealed.len() - 1;
        sealed[last] ^= 1;
        assert_eq!(k.open(b"aad", &sealed), None);
    }

    #[test]
    fn given_bytes_too_short_or_of_another_form_when_opened_then_nothing() {
        let k = key();
        assert_eq!(k.open(b"aad", &[]), None);
        assert_eq!(k.open(b"aad", &[FORM, 1, 2]), None);
        let mut sealed = k.seal(b"aad", b"hello").expect("sealed");
        sealed[0] = 2;
        assert_eq!(k.open(b"aad", &sealed), None);
    }

    #[test]
    fn given_the_same_text_sealed_twice_then_the_two_differ() {
        let k = key();
        assert_ne!(k.seal(b"a", b"x").ok(), k.seal(b"a", b"x").ok());
    }

    #[test]
    fn given_more_nonces_than_a_page_holds_then_none_repeats() {
        let count = 3 * nonces::PAGE / NONCE_LEN;
        let all: std::collections::HashSet<_> = (0..count)
            .map(|_| nonces::next().expect("random"))
            .collect();
        assert_eq!(all.len(), count);
    }

    #[test]
    fn given_bytes_of_another_length_then_no_key() {
        assert!(Key::from_bytes(&[0; 31]).is_none());
        assert!(Key::from_bytes(&[0; 33]).is_none());
        assert!(Key::from_bytes(&[0; 32]).is_some());
    }
}
