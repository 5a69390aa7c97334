//! Parse-don't-validate text: [`NonEmptyText`].

use serde::{Deserialize, Serialize};

/// Text that is not empty and not only whitespace (titles, summaries, instructions,
/// contents). Construct it with [`NonEmptyText::parse`]; the text is kept as given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct NonEmptyText(String);

impl NonEmptyText {
    /// Accepts `raw` unless it is empty or whitespace only.
    ///
    /// # Errors
    /// Returns `Err(())`-like [`EmptyText`] for empty or blank input.
    pub fn parse(raw: impl Into<String>) -> Result<Self, EmptyText> {
        let raw = raw.into();
        if raw.trim().is_empty() {
            Err(EmptyText)
        } else {
            Ok(Self(raw))
        }
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The error of [`NonEmptyText::parse`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("must not be empty")]
pub struct EmptyText;

impl TryFrom<String> for NonEmptyText {
    type Error = EmptyText;
    fn try_from(raw: String) -> Result<Self, Self::Error> {
        Self::parse(raw)
    }
}

impl From<NonEmptyText> for String {
    fn from(text: NonEmptyText) -> Self {
        text.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_blank_text_when_parsed_then_rejected() {
        assert_eq!(NonEmptyText::parse(""), Err(EmptyText));
        assert_eq!(NonEmptyText::parse(" \n\t"), Err(EmptyText));
    }

    #[test]
    fn given_text_when_parsed_then_kept_verbatim() {
        let text = NonEmptyText::parse("  hi ").expect("valid");
        assert_eq!(text.as_str(), "  hi ");
    }
}
