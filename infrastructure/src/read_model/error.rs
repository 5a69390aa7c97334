//! What can go wrong inside a projection transaction, and how the processor runtime and
//! the poison isolation see it.

use pm_application::processor::isolate::Failure;
use pm_application::processor::BatchError;

use crate::db::is_transient;
use crate::processor::CursorError;

/// An error inside a projection transaction.
#[derive(Debug)]
pub(crate) enum ApplyError {
    /// A statement failed for a reason worth retrying (or outside the facts' statements).
    Sql(sqlx::Error),
    /// The batch cannot be applied and retrying will not help (an unreadable fact, a
    /// checkpoint of an unknown task, a violated constraint); which of its events is at
    /// fault is unknown: isolate it.
    Rejected(String),
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
    /// A failed statement of the facts: [`ApplyError::Rejected`] unless it is transient.
    pub(crate) fn of_statement(e: sqlx::Error) -> Self {
        if is_transient(&e) {
            Self::Sql(e)
        } else {
            Self::Rejected(e.to_string())
        }
    }

    /// The error as the processor runtime handles it.
    pub(crate) fn into_batch(self) -> BatchError {
        match self {
            Self::Sql(e) => BatchError::Transient(e.to_string()),
            Self::Rejected(reason) => BatchError::Rejected(reason),
            Self::Batch(e) => e,
        }
    }

    /// The error as the poison isolation handles it.
    pub(crate) fn into_failure(self) -> Failure<Self> {
        match self {
            Self::Rejected(reason) => Failure::Rejected(reason),
            other => Failure::Stop(other),
        }
    }
}
