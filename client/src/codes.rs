//! The stable machine codes of the service's problem answers (docs/API.md, "Error
//! codes"), to compare with [`Error::code`](crate::Error::code):
//!
//! ```
//! # fn handle(err: pm_client::Error) {
//! if err.code() == Some(pm_client::codes::ACTOR_NOT_FOUND) {
//!     // register the actor first
//! }
//! # }
//! ```

/// `400`: the body is not JSON.
pub const MALFORMED_JSON: &str = "malformed_json";
/// `400`: a query parameter or header does not parse (the detail names it).
pub const INVALID_PARAMETER: &str = "invalid_parameter";
/// `400` (WORKERS.md): only one of `PM-Turn-Id` and `PM-Turn-Epoch`, an epoch that is
/// not a positive integer, or a report whose `PM-Turn-Id` is not the path's turn.
pub const INVALID_TURN_FENCE: &str = "invalid_turn_fence";
/// `400` (API.md): a position that is not in the log.
pub const INVALID_POSITION: &str = "invalid_position";
/// `401`: no token, or an unknown one.
pub const UNAUTHORIZED: &str = "unauthorized";
/// `403`: the token's role may not do this.
pub const FORBIDDEN: &str = "forbidden";
/// `404`: no conversation with this id.
pub const CONVERSATION_NOT_FOUND: &str = "conversation_not_found";
/// `404` (path) or `422` (a message's `task_id`): no such task.
pub const TASK_NOT_FOUND: &str = "task_not_found";
/// `404` (path) or `422` (body): no such actor.
pub const ACTOR_NOT_FOUND: &str = "actor_not_found";
/// `404` (path) or `422` (a task's `checkpoint_id`): no such checkpoint.
pub const CHECKPOINT_NOT_FOUND: &str = "checkpoint_not_found";
/// `404`: no such message.
pub const MESSAGE_NOT_FOUND: &str = "message_not_found";
/// `404`: no such task checkpoint.
pub const TASK_CHECKPOINT_NOT_FOUND: &str = "task_checkpoint_not_found";
/// `404`: rebuild of an unknown projection.
pub const PROJECTION_NOT_FOUND: &str = "projection_not_found";
/// `404`: no such turn (a path's, or a fence's `PM-Turn-Id`).
pub const TURN_NOT_FOUND: &str = "turn_not_found";
/// `404` (WORKERS.md): the turn has no tool call with this `call_id`.
pub const TOOL_CALL_NOT_FOUND: &str = "tool_call_not_found";
/// `404`: no such endpoint.
pub const NOT_FOUND: &str = "not_found";
/// `405`: the endpoint does not take this method.
pub const METHOD_NOT_ALLOWED: &str = "method_not_allowed";
/// `409`: a conversation with this derived id exists with other content.
pub const CONVERSATION_EXISTS: &str = "conversation_exists";
/// `409`: an entity with this derived id exists with other content.
pub const ALREADY_EXISTS: &str = "already_exists";
/// `409`: the command lost optimistic-concurrency races until the service gave up.
pub const CONCURRENCY_CONFLICT: &str = "concurrency_conflict";
/// `409`: the first request with this `Idempotency-Key` is still running.
pub const IDEMPOTENCY_KEY_IN_USE: &str = "idempotency_key_in_use";
/// `409` (WORKERS.md): the claim no longer holds the turn — a newer claim, its lease
/// expired, the turn is suspended, or it ended — so the fenced write or report did
/// nothing. The worker should drop the turn.
pub const TURN_FENCED: &str = "turn_fenced";
/// `409`: the turn's state has no such edge (an interrupt of a queued or ended turn, or
/// one that lost the race to a completion).
pub const TURN_TRANSITION_NOT_ALLOWED: &str = "turn_transition_not_allowed";
/// `409` (WORKERS.md): a reported batch reuses a `call_id` of the turn for another call
/// (the same batch again answers `200` instead).
pub const TOOL_CALL_EXISTS: &str = "tool_call_exists";
/// `409` (WORKERS.md): progress or a result for a call that is not executing — it still
/// waits for approval (INV-TOOL-APPROVAL-BEFORE-EXEC).
pub const TOOL_CALL_NOT_EXECUTING: &str = "tool_call_not_executing";
/// `409` (WORKERS.md): an approval or denial of a call that no longer awaits one (another
/// approver decided, or the approval timed out).
pub const TOOL_CALL_NOT_AWAITING_APPROVAL: &str = "tool_call_not_awaiting_approval";
/// `409` (WORKERS.md): the call already has its one result (INV-TOOL-TERMINAL): it was
/// cancelled, timed out or another executor reported first. The same result again
/// answers `200` instead.
pub const TOOL_CALL_TERMINAL: &str = "tool_call_terminal";
/// `409`: a rebuild of this projection is already running.
pub const REBUILD_IN_PROGRESS: &str = "rebuild_in_progress";
/// `413`: the body is too large.
pub const PAYLOAD_TOO_LARGE: &str = "payload_too_large";
/// `415`: the body is not JSON.
pub const UNSUPPORTED_MEDIA_TYPE: &str = "unsupported_media_type";
/// `422`: a field is missing, ill-typed or empty (the detail names it).
pub const VALIDATION_FAILED: &str = "validation_failed";
/// `422`: the task's checkpoint belongs to another conversation.
pub const CHECKPOINT_CONVERSATION_MISMATCH: &str = "checkpoint_conversation_mismatch";
/// `422`: the task's checkpoint is not `BEGIN_WORK`.
pub const CHECKPOINT_NOT_BEGIN_WORK: &str = "checkpoint_not_begin_work";
/// `422`: the `Idempotency-Key` was used for a different request.
pub const IDEMPOTENCY_KEY_REUSED: &str = "idempotency_key_reused";
/// `500`: a bug in the service.
pub const INTERNAL_ERROR: &str = "internal_error";
/// `503`: the store is unreachable.
pub const SERVICE_UNAVAILABLE: &str = "service_unavailable";
/// `503`: `min_position` was not reached in time.
pub const PROJECTION_LAGGING: &str = "projection_lagging";
/// `404` (DELIVERY.md): no webhook subscription with this id.
pub const WEBHOOK_NOT_FOUND: &str = "webhook_not_found";
/// `422` (DELIVERY.md): the webhook URL points where the service's host policy forbids.
pub const WEBHOOK_URL_NOT_ALLOWED: &str = "webhook_url_not_allowed";
/// `403` (the console): a write with the console's session cookie but without its
/// `X-CSRF-Token`.
pub const CSRF_TOKEN_INVALID: &str = "csrf_token_invalid";
/// `403` (TRUST.md "Approvals"): the call's tool policy does not list the signed-in
/// principal as an approver.
pub const APPROVER_FORBIDDEN: &str = "approver_forbidden";
/// `403` (TRUST.md "Approvals"): the signed-in principal reported the call it decides.
pub const SELF_APPROVAL_FORBIDDEN: &str = "self_approval_forbidden";
/// `404` (TRUST.md "Tool policies"): no tool policy of this name.
pub const TOOL_POLICY_NOT_FOUND: &str = "tool_policy_not_found";
