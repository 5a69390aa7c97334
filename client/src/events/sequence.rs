//! The CloudEvents `sequence` extension: a string of digits on the wire (the extension
//! defines it as a string), read as the aggregate stream's 1-based sequence number. A
//! bare JSON number, as earlier services sent it, is accepted too.

use serde::{Deserialize, Deserializer};

/// The wire forms of `sequence`.
#[derive(Deserialize)]
#[serde(untagged)]
enum Wire {
    Text(String),
    Number(i64),
}

/// Reads `sequence` as a string of decimal digits (or a number) into a positive `i64`.
pub(crate) fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<i64, D::Error> {
    let n = match Wire::deserialize(deserializer)? {
        Wire::Number(n) => n,
        Wire::Text(s) if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => s
            .parse()
            .map_err(|_| serde::de::Error::custom(format!("sequence {s:?} is out of range")))?,
        Wire::Text(s) => {
            return Err(serde::de::Error::custom(format!(
                "sequence {s:?} is not a string of digits"
            )))
        }
    };
    if n < 1 {
        return Err(serde::de::Error::custom(format!(
            "sequence {n} is not positive"
        )));
    }
    Ok(n)
}
