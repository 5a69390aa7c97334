//! The Standard Webhooks signature: `webhook-signature: v1,<base64 HMAC-SHA256 over
//! "<webhook-id>.<webhook-timestamp>.<body>">`, keyed with the base64-decoded part of a
//! `whsec_<base64>` secret. The service signs with [`sign`]; receivers (pm-client's
//! helper) check with [`verify`], which also refuses stale timestamps against replays.
//! (The service mints secrets itself: `pm_application::webhooks::signature::generate`.)

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// The secrets' prefix.
pub const PREFIX: &str = "whsec_";

/// How far a `webhook-timestamp` may be from the receiver's clock (Standard Webhooks'
/// recommendation).
pub const TOLERANCE_SECS: i64 = 300;

/// A secret that cannot sign.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    /// Not `whsec_` followed by base64 of 24 to 64 bytes.
    #[error("a secret is \"whsec_\" followed by the base64 of 24 to 64 random bytes")]
    Malformed,
    /// The operating system gave no randomness (when minting a secret).
    #[error("no randomness available: {0}")]
    Random(String),
}

/// The key bytes of a `whsec_…` secret.
///
/// # Errors
/// [`SecretError::Malformed`].
pub fn key(secret: &str) -> Result<Vec<u8>, SecretError> {
    let encoded = secret.strip_prefix(PREFIX).ok_or(SecretError::Malformed)?;
    let bytes = STANDARD
        .decode(encoded)
        .map_err(|_| SecretError::Malformed)?;
    if (24..=64).contains(&bytes.len()) {
        Ok(bytes)
    } else {
        Err(SecretError::Malformed)
    }
}

fn mac(key: &[u8], id: &str, timestamp: i64, body: &[u8]) -> HmacSha256 {
    // HMAC takes keys of any length: this cannot fail.
    let mut mac = match HmacSha256::new_from_slice(key) {
        Ok(mac) => mac,
        Err(_) => unreachable!("HMAC accepts keys of every length"),
    };
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    mac
}

/// The `webhook-signature` value of one delivery.
///
/// # Errors
/// [`SecretError::Malformed`] for a secret that is not `whsec_<base64>`.
pub fn sign(secret: &str, id: &str, timestamp: i64, body: &[u8]) -> Result<String, SecretError> {
    let key = key(secret)?;
    let tag = mac(&key, id, timestamp, body).finalize().into_bytes();
    Ok(format!("v1,{}", STANDARD.encode(tag)))
}

/// Why a delivery is not authentic.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// The secret is not `whsec_<base64>`.
    #[error(transparent)]
    Secret(#[from] SecretError),
    /// A Standard Webhooks header is missing (or is not text).
    #[error("the {0} header is missing")]
    MissingHeader(&'static str),
    /// `webhook-timestamp` is not Unix seconds.
    #[error("webhook-timestamp is not a number of seconds")]
    BadTimestamp,
    /// `webhook-timestamp` is more than [`TOLERANCE_SECS`] from now (a replay, or a clock
    /// far off).
    #[error("webhook-timestamp is {0} s from now, more than the tolerance")]
    Stale(i64),
    /// No `v1,` signature in the header matches.
    #[error("no signature matches")]
    Mismatch,
}

/// Checks one delivery: `signatures` is the `webhook-signature` header (space-separated
/// `v1,<base64>` entries, any of which may match — as during a secret's rotation),
/// `now` the receiver's Unix time in seconds.
///
/// # Errors
/// [`VerifyError`].
pub fn verify(
    secret: &str,
    id: &str,
    timestamp: &str,
    signatures: &str,
    body: &[u8],
    now: i64,
) -> Result<(), VerifyError> {
    let key = key(secret)?;
    let at: i64 = timestamp
        .trim()
        .parse()
        .map_err(|_| VerifyError::BadTimestamp)?;
    let skew = now.saturating_sub(at);
    if skew.unsigned_abs() > TOLERANCE_SECS.unsigned_abs() {
        return Err(VerifyError::Stale(skew));
    }
    let expected = mac(&key, id, at, body);
    let matched = signatures
        .split_whitespace()
        .filter_map(|entry| entry.strip_prefix("v1,"))
        .filter_map(|b64| STANDARD.decode(b64).ok())
        // `verify_slice` compares in constant time.
        .any(|tag| expected.clone().verify_slice(&tag).is_ok());
    if matched {
        Ok(())
    } else {
        Err(VerifyError::Mismatch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of the Standard Webhooks specification (and its reference libraries).
    const SPEC_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const SPEC_ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
    const SPEC_TIMESTAMP: i64 = 1_614_265_330;
    const SPEC_BODY: &[u8] = br#"{"test": 2432232314}"#;
    const SPEC_SIGNATURE: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

    #[test]
    fn given_the_specifications_example_when_signed_then_its_signature_comes_out() {
        assert_eq!(
            sign(SPEC_SECRET, SPEC_ID, SPEC_TIMESTAMP, SPEC_BODY),
            Ok(SPEC_SIGNATURE.to_string())
        );
    }

    #[test]
    fn given_a_signed_delivery_when_verified_then_it_passes_and_any_change_fails() {
        let now = SPEC_TIMESTAMP + 10;
        let ts = SPEC_TIMESTAMP.to_string();
        assert_eq!(
            verify(SPEC_SECRET, SPEC_ID, &ts, SPEC_SIGNATURE, SPEC_BODY, now),
            Ok(())
        );
        // One of several signatures (a rotation) is enough.
        let two = format!("v1,AAAA {SPEC_SIGNATURE}");
        assert_eq!(
            verify(SPEC_SECRET, SPEC_ID, &ts, &two, SPEC_BODY, now),
            Ok(())
        );
        assert_eq!(
            verify(SPEC_SECRET, SPEC_ID, &ts, SPEC_SIGNATURE, b"{}", now),
            Err(VerifyError::Mismatch)
        );
        assert_eq!(
            verify(
                SPEC_SECRET,
                "msg_other",
                &ts,
                SPEC_SIGNATURE,
                SPEC_BODY,
                now
            ),
            Err(VerifyError::Mismatch)
        );
        let other = "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
        assert_eq!(
            verify(other, SPEC_ID, &ts, SPEC_SIGNATURE, SPEC_BODY, now),
            Err(VerifyError::Mismatch)
        );
    }

    #[test]
    fn given_an_old_or_bad_timestamp_when_verified_then_it_is_refused() {
        let ts = SPEC_TIMESTAMP.to_string();
        assert_eq!(
            verify(
                SPEC_SECRET,
                SPEC_ID,
                &ts,
                SPEC_SIGNATURE,
                SPEC_BODY,
                SPEC_TIMESTAMP + 301
            ),
            Err(VerifyError::Stale(301))
        );
        assert_eq!(
            verify(
                SPEC_SECRET,
                SPEC_ID,
                "soon",
                SPEC_SIGNATURE,
                SPEC_BODY,
                SPEC_TIMESTAMP
            ),
            Err(VerifyError::BadTimestamp)
        );
        // The farthest timestamps from a clock before the epoch: stale, never an overflow.
        let far = i64::MAX.to_string();
        assert!(matches!(
            verify(SPEC_SECRET, SPEC_ID, &far, SPEC_SIGNATURE, SPEC_BODY, -5),
            Err(VerifyError::Stale(_))
        ));
    }

    #[test]
    fn given_malformed_secrets_when_read_then_they_are_refused() {
        assert_eq!(
            key("whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=").map(|k| k.len()),
            Ok(32)
        );
        for bad in ["secret", "whsec_!!!", "whsec_c2hvcnQ="] {
            assert_eq!(key(bad), Err(SecretError::Malformed), "{bad}");
        }
    }
}
