//! Keyset pagination: an opaque cursor holding the sort key and id of the last item.

use serde::{Deserialize, Serialize};

/// The paginated lists; a cursor is valid only for the list that issued it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum List {
    /// Conversations, by `created_at`.
    Conversations,
    /// Tasks, by `created_at`.
    Tasks,
    /// Messages, by `time`.
    Messages,
    /// Conversation checkpoints, by log position.
    Checkpoints,
}

/// The position after the last item of a page: its list, sort key and id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageCursor {
    /// The list that issued it.
    pub l: List,
    /// The sort key (a time, or a log position `txid.seq`).
    pub k: String,
    /// The id (tie-breaker).
    pub id: String,
}

impl PageCursor {
    /// Decodes a token issued by `list`; `None` for anything else (a tampered token, one
    /// of another list, a malformed key).
    pub fn decode_for(token: &str, list: List) -> Option<Self> {
        let c = Self::decode(token)?;
        let key_ok = match list {
            List::Checkpoints => {
                c.k.split_once('.')
                    .is_some_and(|(a, b)| a.parse::<i64>().is_ok() && b.parse::<i64>().is_ok())
            }
            _ => chrono::DateTime::parse_from_rfc3339(&c.k).is_ok(),
        };
        (c.l == list && key_ok && c.id.parse::<uuid::Uuid>().is_ok()).then_some(c)
    }

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
            l: List::Tasks,
            k: "2026-11-22T05:35:27.000000Z".into(),
            id: uuid::Uuid::nil().to_string(),
        };
        assert_eq!(
            PageCursor::decode_for(&c.encode(), List::Tasks),
            Some(c.clone())
        );
        assert_eq!(
            PageCursor::decode_for(&c.encode(), List::Conversations),
            None
        );
        assert_eq!(PageCursor::decode_for(&c.encode(), List::Checkpoints), None);
        let bad_key = PageCursor {
            k: "garbage".into(),
            ..c
        };
        assert_eq!(PageCursor::decode_for(&bad_key.encode(), List::Tasks), None);
        assert_eq!(PageCursor::decode("zz"), None);
        assert_eq!(PageCursor::decode("abc"), None);
    }
}
