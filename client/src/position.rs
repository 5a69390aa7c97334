//! [`Position`]: a place in the service's global event log, as an opaque token.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A place in the global event log: the `X-Event-Position` of a command's answer, the
/// `position` of a logged event, the cursor of an event page.
///
/// The token is opaque (digits and punctuation, at most 64 characters): compare positions
/// only for equality and hand them back to the service — as `min_position` for
/// read-your-writes ([`Client::at`](crate::Client::at)) or to resume the log
/// ([`EventQuery::after`](crate::EventQuery::after)). The client never parses one; in
/// particular positions are not ordered.
///
/// ```
/// use pm_client::Position;
///
/// let p: Position = "4711.12".parse().expect("a position token");
/// assert_eq!(p.as_str(), "4711.12");
/// assert_eq!(Position::start().as_str(), "0");
/// assert!("12; DROP".parse::<Position>().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Position(String);

/// The longest token the contract allows.
const MAX_LEN: usize = 64;

impl Position {
    /// The position before the first event (`"0"`): following from it reads the whole log.
    pub fn start() -> Self {
        Self("0".into())
    }

    /// Accepts a token as the service hands it out.
    ///
    /// # Errors
    /// [`InvalidPosition`] when `raw` is empty, longer than 64 characters, or holds
    /// anything but ASCII digits and punctuation — nothing the service could have issued,
    /// and nothing safe to put in a header.
    pub fn new(raw: impl Into<String>) -> Result<Self, InvalidPosition> {
        let raw = raw.into();
        let ok = !raw.is_empty()
            && raw.len() <= MAX_LEN
            && raw
                .bytes()
                .all(|b| b.is_ascii_digit() || b.is_ascii_punctuation());
        if ok {
            Ok(Self(raw))
        } else {
            Err(InvalidPosition(raw))
        }
    }

    /// The token, to store or to print.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A string that is not a position token (see [`Position::new`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a position token: {0:?}")]
pub struct InvalidPosition(pub String);

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for Position {
    type Err = InvalidPosition;
    fn from_str(raw: &str) -> Result<Self, Self::Err> {
        Self::new(raw)
    }
}

impl TryFrom<String> for Position {
    type Error = InvalidPosition;
    fn try_from(raw: String) -> Result<Self, Self::Error> {
        Self::new(raw)
    }
}

impl From<Position> for String {
    fn from(p: Position) -> Self {
        p.0
    }
}

impl AsRef<str> for Position {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_of_both_stores_are_accepted_verbatim() {
        for raw in ["0", "17", "912734.5531", "1-2:3"] {
            assert_eq!(Position::new(raw).expect("valid").as_str(), raw);
        }
    }

    #[test]
    fn anything_else_is_refused() {
        for raw in ["", "12a", " 1", "1\n", "ü", &"9".repeat(65)] {
            assert!(Position::new(raw).is_err(), "{raw:?}");
        }
        assert!(Position::new("9".repeat(64)).is_ok());
    }

    #[test]
    fn serde_is_the_bare_string() {
        let p = Position::new("3.4").expect("valid");
        assert_eq!(serde_json::to_string(&p).expect("ser"), "\"3.4\"");
        let back: Position = serde_json::from_str("\"3.4\"").expect("de");
        assert_eq!(back, p);
        assert!(serde_json::from_str::<Position>("\"x\"").is_err());
    }
}
