//! A logged event read back as the domain fact it records: [`Fact`], the one parser that
//! projections, sagas and pm-client share (it lives in `pm_api_types::fact`); here, how the
//! log's events feed it.

pub use pm_api_types::fact::{Fact, FactError, Logged};

use crate::log::LoggedEvent;

impl Logged for LoggedEvent {
    fn event_type(&self) -> &str {
        &self.event_type
    }

    fn payload_text(&self) -> &str {
        self.payload.text()
    }
}
