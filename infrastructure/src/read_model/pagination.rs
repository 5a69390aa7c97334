//! Keyset pagination: an opaque cursor holding the sort key and id of the last item.

use serde::{Deserialize, Serialize};

/// The position after the last item of a page: its sort key and id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageCursor {
    /// The sort key (a time, or a log position).
    pub k: String,
    /// The id (tie-breaker).
    pub id: String,
}

impl PageCursor {
    /// The opaque token (hex of the JSON).
    pub fn encode(&self) -> String {
        let json = serde_json::to_string(self).unwrap_or_default();
        json.bytes().map(|b| format!("{b:02x}")).collect()
    }

    /// Parses a token; `None` when it is not one of ours.
    pub fn decode(token: &str) -> Option<Self> {
        if !token.len().is_multiple_of(2) || token.len() > 1024 {
            return None;
        }
        let bytes = (0..token.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(token.get(i..i + 2)?, 16).ok())
            .collect::<Option<Vec<u8>>>()?;
        serde_json::from_slice(&bytes).ok()
    }
}

/// A page of items.
#[derive(Debug, Clone, Serialize)]
pub struct Page<T> {
    /// The items.
    pub items: Vec<T>,
    /// The cursor of the next page, or `None` on the last one.
    pub next_cursor: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_reject_garbage() {
        let c = PageCursor {
            k: "2026-11-22T05:35:27.000000Z".into(),
            id: "x".into(),
        };
        assert_eq!(PageCursor::decode(&c.encode()), Some(c));
        assert_eq!(PageCursor::decode("zz"), None);
        assert_eq!(PageCursor::decode("abc"), None);
    }
}
