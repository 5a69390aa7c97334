//! Keyset pagination: the opaque cursor of a page's next one (the page itself is
//! [`Page`](pm_api_types::views::Page), a wire type).

use std::fmt;

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
    /// Agents, by `created_at`.
    Agents,
    /// Sessions, by `created_at`.
    Sessions,
    /// Turns, by `created_at`.
    Turns,
    /// Anomalies, by `created_at`.
    Anomalies,
    /// Tool calls, by `created_at`.
    ToolCalls,
}

/// The position after the last item of a page: its list, sort key and id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageCursor {
    /// The list that issued it.
    pub l: List,
    /// The sort key (a time, or a log position).
    pub k: String,
    /// The id (tie-breaker).
    pub id: String,
}

impl PageCursor {
    /// Decodes a token issued by `list`; `None` for anything else (a tampered token, one
    /// of another list, a malformed key). The key and id come back in the forms the
    /// stores compare (a time the stores can keep, in the stored format; a plain UUID), so
    /// a hand-made token that parses is still one the query can bind (PostgreSQL refuses
    /// year 0 and `urn:uuid:` ids; SQLite compares times as text).
    pub fn decode_for(token: &str, list: List) -> Option<Self> {
        let mut c = Self::decode(token)?;
        if c.l != list {
            return None;
        }
        c.k = match list {
            List::Checkpoints => c.k.parse::<crate::log::LogPosition>().ok()?.to_string(),
            _ => {
                let t = chrono::DateTime::parse_from_rfc3339(&c.k).ok()?;
                let t = pm_domain::time::in_range(t.with_timezone(&chrono::Utc)).ok()?;
                pm_domain::time::format(&t)
            }
        };
        c.id = c.id.parse::<uuid::Uuid>().ok()?.to_string();
        Some(c)
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

/// The token, as a page's `next_cursor` (see [`PageCursor::encode`]).
impl fmt::Display for PageCursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.encode())
    }
}

/// A page request: at most `limit` items after `cursor`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageRequest {
    /// 1..=500.
    pub limit: u32,
    /// The previous page's `next_cursor`, decoded.
    pub cursor: Option<PageCursor>,
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
            c.to_string(),
            c.encode(),
            "a page's next_cursor is the token"
        );
        assert_eq!(
            PageCursor::decode_for(&c.encode(), List::Conversations),
            None
        );
        assert_eq!(PageCursor::decode_for(&c.encode(), List::Checkpoints), None);
        let bad_key = PageCursor {
            k: "garbage".into(),
            ..c.clone()
        };
        assert_eq!(PageCursor::decode_for(&bad_key.encode(), List::Tasks), None);
        // Parses, but no store can keep it: refused.
        let year_zero = PageCursor {
            k: "0000-01-01T00:00:00Z".into(),
            ..c.clone()
        };
        assert_eq!(
            PageCursor::decode_for(&year_zero.encode(), List::Tasks),
            None
        );
        // Parses in another form: given back in the stored one.
        let other_forms = PageCursor {
            k: "2026-11-22T06:35:27+01:00".into(),
            id: format!("urn:uuid:{}", uuid::Uuid::nil()),
            ..c.clone()
        };
        assert_eq!(
            PageCursor::decode_for(&other_forms.encode(), List::Tasks),
            Some(c.clone())
        );
        assert_eq!(PageCursor::decode("zz"), None);
        assert_eq!(PageCursor::decode("abc"), None);
    }
}
