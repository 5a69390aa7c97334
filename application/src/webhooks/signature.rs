//! The Standard Webhooks signature (`pm_api_types::webhooks::signature`, shared with
//! pm-client's verifier), and the service's own part: minting secrets.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
pub use pm_api_types::webhooks::signature::{
    key, sign, verify, SecretError, VerifyError, PREFIX, TOLERANCE_SECS,
};

/// A new secret of 32 random bytes.
///
/// # Errors
/// [`SecretError::Random`] when the operating system has no randomness to give.
pub fn generate() -> Result<String, SecretError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| SecretError::Random(e.to_string()))?;
    Ok(format!("{PREFIX}{}", STANDARD.encode(bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_generated_secrets_when_read_then_they_are_distinct_32_byte_keys() {
        let (a, b) = (
            generate().expect("randomness"),
            generate().expect("randomness"),
        );
        assert_ne!(a, b);
        assert_eq!(key(&a).map(|k| k.len()), Ok(32));
        for bad in ["secret", "whsec_!!!", "whsec_c2hvcnQ="] {
            assert_eq!(key(bad), Err(SecretError::Malformed), "{bad}");
        }
    }
}
