//! W3C Trace Context (<https://www.w3.org/TR/trace-context/>) of what the service writes
//! (issue 34): every fact and rune records the trace of what caused it, so a GitHub
//! comment can be followed from the ingress that posted it to the turn it caused, the tool
//! calls that turn ran and the worker's model calls.
//!
//! - A request continues the caller's trace (its valid `traceparent`), or starts one; the
//!   request is a span of its own ([`TraceContext::child`]).
//! - What the sagas decide on a fact carries that fact's context; what a deadline fires
//!   starts a trace of its own ([`TraceContext::root`]): no request caused it.
//! - A turn is a span of the trace of what caused it, whose id is derived from the turn's
//!   id ([`TraceContext::of_turn`]): every replica, and every restart, names the same span
//!   without storing it, and the worker that claims the turn is handed it as its parent.
//!
//! - A tool call is a span of its turn's, named the same way from the turn and call ids.
//!
//! The header is parsed at the HTTP boundary (by the OpenTelemetry propagator); here it is
//! only made and carried, as the text the log stores. [`genai`] says which spans the
//! exporter derives from the durable state, and what they carry.

pub mod genai;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use uuid::Uuid;

/// The only `traceparent` version this service writes.
const VERSION: &str = "00";
/// Trace flags of a trace this service starts: sampled.
const SAMPLED: u8 = 0x01;

/// A trace context as stored in an event's metadata (`traceparent`, `tracestate`) and sent
/// as the headers of the same names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TraceContext {
    /// `00-<trace-id>-<parent-id>-<trace-flags>`, lowercase hex.
    pub traceparent: String,
    /// The vendors' `tracestate`, as the caller sent it; absent when it sent none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracestate: Option<String>,
}

impl TraceContext {
    /// The context of span `span_id` in trace `trace_id`.
    pub fn new(
        trace_id: [u8; 16],
        span_id: [u8; 8],
        flags: u8,
        tracestate: Option<String>,
    ) -> Self {
        Self {
            traceparent: format!("{VERSION}-{}-{}-{flags:02x}", hex(&trace_id), hex(&span_id)),
            tracestate: tracestate.filter(|s| !s.is_empty()),
        }
    }

    /// A new trace, sampled, whose first span is the returned context's.
    pub fn root() -> Self {
        Self::new(random_trace_id(), random_span_id(), SAMPLED, None)
    }

    /// A new span of the same trace (same flags and state).
    pub fn child(&self) -> Self {
        self.with_span(random_span_id())
    }

    /// The span of turn `turn` in this (its cause's) trace.
    pub fn of_turn(&self, turn: Uuid) -> Self {
        self.with_span(turn_span_id(turn))
    }

    /// The span of turn `turn`'s tool call `call_id` in this (the turn's cause's) trace.
    pub fn of_tool_call(&self, turn: Uuid, call_id: &str) -> Self {
        self.with_span(derived_span_id(&[
            b"project-manager execute_tool ",
            turn.as_bytes(),
            call_id.as_bytes(),
        ]))
    }

    fn with_span(&self, span_id: [u8; 8]) -> Self {
        Self {
            traceparent: format!(
                "{VERSION}-{}-{}-{}",
                self.trace_id(),
                hex(&span_id),
                self.flags()
            ),
            tracestate: self.tracestate.clone(),
        }
    }

    /// The trace's id: 32 lowercase hex digits.
    pub fn trace_id(&self) -> &str {
        self.part(1)
    }

    /// The span's id: 16 lowercase hex digits.
    pub fn span_id(&self) -> &str {
        self.part(2)
    }

    /// The trace flags: 2 hex digits.
    pub fn flags(&self) -> &str {
        self.part(3)
    }

    fn part(&self, index: usize) -> &str {
        self.traceparent.split('-').nth(index).unwrap_or_default()
    }
}

/// The id of turn `turn`'s span: the first 8 bytes of SHA-256 over a label and the turn's
/// id, never all zero (an invalid span id).
pub fn turn_span_id(turn: Uuid) -> [u8; 8] {
    derived_span_id(&[b"project-manager invoke_agent ", turn.as_bytes()])
}

fn derived_span_id(parts: &[&[u8]]) -> [u8; 8] {
    let digest = parts
        .iter()
        .fold(Sha256::new(), |hash, part| hash.chain_update(part))
        .finalize();
    let mut id = [0u8; 8];
    id.copy_from_slice(&digest[..8]);
    if id == [0; 8] {
        id[7] = 1;
    }
    id
}

fn random_trace_id() -> [u8; 16] {
    // UUIDv4's bytes come from the `fast-rng` generator; never all zero.
    *Uuid::new_v4().as_bytes()
}

fn random_span_id() -> [u8; 8] {
    let mut id = [0u8; 8];
    id.copy_from_slice(&Uuid::new_v4().as_bytes()[8..]);
    if id == [0; 8] {
        id[7] = 1;
    }
    id
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    fn parent() -> TraceContext {
        TraceContext {
            traceparent: PARENT.into(),
            tracestate: Some("congo=t61rcWkgMzE".into()),
        }
    }

    #[test]
    fn given_ids_when_made_then_the_header_is_the_w3c_form() {
        let made = TraceContext::new([0xab; 16], [0x01; 8], 0x01, Some(String::new()));

        assert_eq!(
            made.traceparent,
            "00-abababababababababababababababab-0101010101010101-01"
        );
        assert_eq!(made.tracestate, None, "an empty tracestate is none");
        assert_eq!(made.trace_id(), "ab".repeat(16));
        assert_eq!(made.span_id(), "01".repeat(8));
        assert_eq!(made.flags(), "01");
    }

    #[test]
    fn given_a_context_when_a_child_is_made_then_only_the_span_changes() {
        let child = parent().child();

        assert_eq!(child.trace_id(), parent().trace_id());
        assert_ne!(child.span_id(), parent().span_id());
        assert_eq!(child.flags(), "01");
        assert_eq!(child.tracestate, parent().tracestate);
        assert_eq!(child.traceparent.len(), PARENT.len());
    }

    #[test]
    fn given_no_cause_when_a_root_is_made_then_it_is_a_new_sampled_trace() {
        let (a, b) = (TraceContext::root(), TraceContext::root());

        assert_ne!(a.trace_id(), b.trace_id());
        assert_eq!(a.trace_id().len(), 32);
        assert_eq!(a.span_id().len(), 16);
        assert_eq!(a.flags(), "01");
        assert!(a.tracestate.is_none());
    }

    #[test]
    fn given_a_turn_when_its_span_is_named_then_every_replica_names_the_same_one() {
        let turn = Uuid::now_v7();

        let once = parent().of_turn(turn);
        let again = parent().of_turn(turn);

        assert_eq!(once, again);
        assert_eq!(once.trace_id(), parent().trace_id());
        assert_ne!(once.span_id(), parent().span_id());
        assert_ne!(
            parent().of_turn(Uuid::now_v7()).span_id(),
            once.span_id(),
            "another turn is another span"
        );
    }

    #[test]
    fn given_a_tool_call_when_its_span_is_named_then_it_is_its_own_in_the_turns_trace() {
        let turn = Uuid::now_v7();

        let call = parent().of_tool_call(turn, "a");

        assert_eq!(call, parent().of_tool_call(turn, "a"));
        assert_eq!(call.trace_id(), parent().trace_id());
        assert_ne!(call.span_id(), parent().of_turn(turn).span_id());
        assert_ne!(call.span_id(), parent().of_tool_call(turn, "b").span_id());
    }

    #[test]
    fn given_stored_metadata_when_read_back_then_the_context_round_trips() {
        let stored = serde_json::to_value(parent()).expect("serializes");

        assert_eq!(stored["traceparent"], PARENT);
        let read: TraceContext = serde_json::from_value(stored).expect("reads");
        assert_eq!(read, parent());
        let bare = serde_json::to_value(TraceContext::root()).expect("serializes");
        assert!(bare.get("tracestate").is_none(), "{bare}");
    }
}
