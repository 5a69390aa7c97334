//! What can go wrong inside a projection transaction, and how the processor runtime sees
//! it.

use pm_application::processor::BatchError;

use crate::db::is_transient;
use crate::processor::CursorError;

/// An error inside a projection transaction.
#[derive(Debug)]
pub(crate) enum ApplyError {
    /// A statement failed.
    Sql(sqlx::Error),
    /// Event `index` of the batch cannot be applied: park it.
    Poison(usize, String),
    /// The runtime's own error (the cursor moved, an injected failure).
    Batch(BatchError),
}

impl From<sqlx::Error> for ApplyError {
    fn from(e: sqlx::Error) -> Self {
        Self::Sql(e)
    }
}

impl From<CursorError> for ApplyError {
    fn from(e: CursorError) -> Self {
        match e {
            CursorError::Sql(e) => Self::Sql(e),
            CursorError::Moved => Self::Batch(BatchError::CursorMoved),
        }
    }
}

impl ApplyError {
    /// Names event `index` of a batch as the culprit of a failure that is not transient.
    pub(crate) fn at(self, index: usize) -> Self {
        match self {
            Self::Sql(e) if !is_transient(&e) => Self::Poison(index, e.to_string()),
            Self::Poison(_, reason) => Self::Poison(index, reason),
            other => other,
        }
    }

    /// The error as the processor runtime handles it.
    pub(crate) fn into_batch(self) -> BatchError {
        match self {
            Self::Sql(e) => BatchError::Transient(e.to_string()),
            Self::Poison(index, reason) => BatchError::Poison { index, reason },
            Self::Batch(e) => e,
        }
    }
}
