//! Parse-don't-validate text: [`NonEmptyText`] for free text (titles, summaries,
//! instructions, contents, names) and [`Label`] for short identifying text (external ids
//! and sources, statuses, organizations). Both refuse what no store can keep: text that
//! is empty or blank, and the NUL character (PostgreSQL's text cannot hold it). A label is
//! also bounded in length, so it always fits an index entry.

use serde::{Deserialize, Serialize};

/// Why text was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TextError {
    /// Empty, or whitespace only.
    #[error("must not be empty")]
    Empty,
    /// Contains the NUL character (`\u0000`).
    #[error("must not contain the NUL character (\\u0000)")]
    Nul,
    /// Longer than a label may be.
    #[error("must be at most {max_bytes} bytes long")]
    TooLong {
        /// The limit, in UTF-8 bytes.
        max_bytes: usize,
    },
}

fn check(raw: &str) -> Result<(), TextError> {
    if raw.trim().is_empty() {
        Err(TextError::Empty)
    } else if raw.contains('\0') {
        Err(TextError::Nul)
    } else {
        Ok(())
    }
}

/// Free text that is not empty, not only whitespace, and has no NUL character. Construct
/// it with [`NonEmptyText::parse`]; the text is kept as given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct NonEmptyText(String);

impl NonEmptyText {
    /// Accepts `raw` unless it is empty, blank, or contains NUL.
    ///
    /// # Errors
    /// The [`TextError`] it breaks.
    pub fn parse(raw: impl Into<String>) -> Result<Self, TextError> {
        let raw = raw.into();
        check(&raw)?;
        Ok(Self(raw))
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for NonEmptyText {
    type Error = TextError;
    fn try_from(raw: String) -> Result<Self, Self::Error> {
        Self::parse(raw)
    }
}

impl From<NonEmptyText> for String {
    fn from(text: NonEmptyText) -> Self {
        text.0
    }
}

/// Identifying text (an external id or source, a status, an organization): like
/// [`NonEmptyText`], and at most [`Label::MAX_BYTES`] long.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Label(String);

impl Label {
    /// The longest label, in UTF-8 bytes (well inside a PostgreSQL index entry).
    pub const MAX_BYTES: usize = 1024;

    /// Accepts `raw` unless it is empty, blank, contains NUL or is too long.
    ///
    /// # Errors
    /// The [`TextError`] it breaks.
    pub fn parse(raw: impl Into<String>) -> Result<Self, TextError> {
        let raw = raw.into();
        check(&raw)?;
        if raw.len() > Self::MAX_BYTES {
            return Err(TextError::TooLong {
                max_bytes: Self::MAX_BYTES,
            });
        }
        Ok(Self(raw))
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for Label {
    type Error = TextError;
    fn try_from(raw: String) -> Result<Self, Self::Error> {
        Self::parse(raw)
    }
}

impl From<Label> for String {
    fn from(label: Label) -> Self {
        label.0
    }
}

/// The OpenAPI schema of a text type.
#[cfg(feature = "openapi")]
fn text_schema(
    description: &str,
    max_bytes: Option<usize>,
) -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    utoipa::openapi::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::Type::String)
        .min_length(Some(1))
        .max_length(max_bytes)
        .pattern(Some("^[^\\u0000]*\\S[^\\u0000]*$"))
        .description(Some(description))
        .into()
}

#[cfg(feature = "openapi")]
impl utoipa::PartialSchema for NonEmptyText {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        text_schema(
            "Text that is not empty, not only whitespace, without NUL",
            None,
        )
    }
}

#[cfg(feature = "openapi")]
impl utoipa::ToSchema for NonEmptyText {}

#[cfg(feature = "openapi")]
impl utoipa::PartialSchema for Label {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        text_schema(
            "Identifying text: not empty, not only whitespace, without NUL, at most 1024 UTF-8 bytes",
            Some(Label::MAX_BYTES),
        )
    }
}

#[cfg(feature = "openapi")]
impl utoipa::ToSchema for Label {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_blank_text_when_parsed_then_rejected() {
        assert_eq!(NonEmptyText::parse(""), Err(TextError::Empty));
        assert_eq!(NonEmptyText::parse(" \n\t"), Err(TextError::Empty));
        assert_eq!(Label::parse(" "), Err(TextError::Empty));
    }

    #[test]
    fn given_text_when_parsed_then_kept_verbatim() {
        let text = NonEmptyText::parse("  hi ").expect("valid");
        assert_eq!(text.as_str(), "  hi ");
    }

    #[test]
    fn given_a_nul_character_when_parsed_then_rejected() {
        assert_eq!(NonEmptyText::parse("a\0b"), Err(TextError::Nul));
        assert_eq!(Label::parse("\0"), Err(TextError::Nul));
        let err = serde_json::from_str::<NonEmptyText>("\"p\\u0000\"").expect_err("refused");
        assert!(err.to_string().contains("NUL"), "{err}");
    }

    #[test]
    fn given_a_label_longer_than_the_limit_then_rejected() {
        let at_limit = "é".repeat(Label::MAX_BYTES / 2);
        assert!(Label::parse(at_limit.clone()).is_ok());
        assert_eq!(
            Label::parse(format!("{at_limit}x")),
            Err(TextError::TooLong {
                max_bytes: Label::MAX_BYTES
            })
        );
        assert!(NonEmptyText::parse("x".repeat(100_000)).is_ok());
    }
}
