//! Keyset pagination as the wire shows it: a page of items and the opaque cursor of the
//! next one. What a cursor holds, and how it is encoded, is the service's business.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A page of items.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Page<T> {
    /// The items.
    pub items: Vec<T>,
    /// The cursor of the next page, or null on the last one.
    pub next_cursor: Option<String>,
}

impl<T> Page<T> {
    /// The page with each item mapped by `f` (the cursor stays).
    pub fn map<U>(self, f: impl FnMut(T) -> U) -> Page<U> {
        Page {
            items: self.items.into_iter().map(f).collect(),
            next_cursor: self.next_cursor,
        }
    }

    /// Splits `limit + 1` fetched items, each with its cursor, into a page: when there
    /// were more than `limit`, the next cursor is the token (`Display`) of the last one
    /// kept.
    pub fn from_fetched<C: fmt::Display>(mut items: Vec<(T, C)>, limit: u32) -> Self {
        let more = items.len() > limit as usize;
        items.truncate(limit as usize);
        let next_cursor = if more {
            items.last().map(|(_, c)| c.to_string())
        } else {
            None
        };
        Self {
            items: items.into_iter().map(|(v, _)| v).collect(),
            next_cursor,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_one_more_than_the_limit_when_split_then_the_last_kept_cursor_is_next() {
        let fetched = vec![(1, "a"), (2, "b"), (3, "c")];
        let page = Page::from_fetched(fetched.clone(), 2);
        assert_eq!(page.items, [1, 2]);
        assert_eq!(page.next_cursor.as_deref(), Some("b"));
        let last = Page::from_fetched(fetched, 3);
        assert_eq!(last.items, [1, 2, 3]);
        assert_eq!(last.next_cursor, None);
        assert_eq!(last.map(|i| i * 10).items, [10, 20, 30]);
    }
}
