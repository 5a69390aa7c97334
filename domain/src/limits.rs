//! The limits of the workers' protocol (WORKERS.md, TRUST.md) that the service enforces
//! and the Rust client checks before sending, stated once so that the two cannot drift: a
//! request the client lets through is one the service takes, and a client never refuses
//! what the service would take.

/// The most calls one tool-call batch holds (WORKERS.md "Tools": 1 to 64). A batch is one
/// saga transaction that records a `tool.call` (and maybe a `tool.approval_requested`) per
/// call: the bound keeps that transaction, and the turn's context, small.
pub const MAX_TOOL_CALLS: usize = 64;

/// The longest `call_id`, in characters (WORKERS.md: 1–200). It is the worker's own id
/// (often the model's tool-use id), part of the call's identity and of every path under
/// `/v1/turns/{id}/tool-calls/{call_id}`: long enough for any model's ids, short enough
/// for a key and a URL.
pub const MAX_CALL_ID: usize = 200;

/// The largest tool payload, in bytes: a call's `arguments` (as JSON), a progress `chunk`
/// and a result's `error` (WORKERS.md: ≤ 64 KiB). Each lands in one event of the log,
/// which every reader (SSE, NATS, webhooks) carries whole; larger output goes in several
/// chunks.
pub const MAX_TOOL_PAYLOAD: usize = 64 * 1024;

/// The longest a worker may give a tool call to execute (`timeout_ms`) or a batch to wait
/// (`resume_deadline_ms`), in milliseconds: a day. Each arms a durable deadline row; the
/// bound keeps a worker from arming one for ever (the turn's watchdog still bounds the
/// turn's whole life).
pub const MAX_TOOL_WAIT_MS: u64 = 86_400_000;

/// The longest approval or denial `comment`, in characters (TRUST.md "Approvals": ≤
/// 1,000). It is recorded in `tool.approved` / `tool.denied`: a note for the audit trail,
/// not a document.
pub const MAX_APPROVAL_COMMENT: usize = 1_000;

/// The longest a claim may long-poll, in milliseconds (WORKERS.md: `wait_ms` 0–30000). A
/// waiting claim holds a connection and one of its principal's waiting claims while it
/// waits; a worker that found nothing simply claims again.
pub const MAX_CLAIM_WAIT_MS: u64 = 30_000;

/// The shortest and longest lease a claim or heartbeat may ask for, in milliseconds
/// (WORKERS.md: `lease_ms` 1000–600000). Under a second a worker would spend its time on
/// heartbeats; over ten minutes a crashed worker's turn would wait that long for another.
pub const LEASE_MS: std::ops::RangeInclusive<u64> = 1_000..=600_000;

/// The longest worker name, in characters (WORKERS.md: `worker` 1–200). A name for
/// operators, recorded in `turn.claimed` and shown on the turn's lease.
pub const MAX_WORKER_NAME: usize = 200;

/// Whether `text` is a short text the protocol takes: 1 to `max_chars` characters, not
/// blank, without NUL (PostgreSQL's `text` cannot hold it, so it would fail as a `500`
/// instead of a `422`). What a `call_id` and an approval comment must be.
pub fn is_short_text(text: &str, max_chars: usize) -> bool {
    !text.trim().is_empty() && text.chars().count() <= max_chars && !text.contains('\0')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_text_up_to_the_limit_when_checked_then_taken() {
        assert!(is_short_text("a", 3));
        assert!(is_short_text("äöü", 3), "characters, not bytes");
    }

    #[test]
    fn given_blank_too_long_or_nul_text_when_checked_then_refused() {
        for text in ["", "   ", "abcd", "a\0b"] {
            assert!(!is_short_text(text, 3), "{text:?}");
        }
    }

    #[test]
    fn given_the_limits_then_they_are_the_documented_values() {
        assert_eq!(MAX_TOOL_CALLS, 64);
        assert_eq!(MAX_CALL_ID, 200);
        assert_eq!(MAX_TOOL_PAYLOAD, 65_536);
        assert_eq!(MAX_TOOL_WAIT_MS, 24 * 60 * 60 * 1000);
        assert_eq!(MAX_APPROVAL_COMMENT, 1_000);
        assert_eq!(MAX_CLAIM_WAIT_MS, 30_000);
        assert_eq!((*LEASE_MS.start(), *LEASE_MS.end()), (1_000, 600_000));
        assert_eq!(MAX_WORKER_NAME, 200);
    }
}
