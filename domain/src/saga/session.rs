//! The Session aggregate: the ECHS session lifecycle with the FCMP conversation state as a
//! field, folded from the session's own runes.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::rune::session::{SessionRune, SessionSettings};
use super::types::{ConversationState, SessionState};
use super::{saga_aggregate, Machine, SagaError, SESSION_TYPE};

/// Whether `from → to` is an FCMP edge. FCMP §5 maps `turn.started`, `turn.needs_input`,
/// `turn.succeeded`, `turn.failed` and `run.canceled` to a change `… → to` from any
/// state; `→ queued` comes from `waiting_user` (reply, auto-decide) and, as documented
/// additions, from null (first message), `running` (steer) and `failed` (retry). Nothing
/// leaves `succeeded` or `canceled`; a "change" to the same state is no edge.
pub fn fcmp_edge(from: Option<ConversationState>, to: ConversationState) -> bool {
    use ConversationState::*;
    if from == Some(to) || from.is_some_and(ConversationState::is_final) {
        return false;
    }
    match to {
        Queued => matches!(from, None | Some(WaitingUser | Running | Failed)),
        Running | WaitingUser | Succeeded | Failed | Canceled => true,
    }
}

/// `session.suspended`'s reason when the token budget ran out.
pub const BUDGET_EXHAUSTED: &str = "budget_exhausted";

/// A session (one per conversation; id = the conversation id).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Session {
    conversation_id: Option<Uuid>,
    state: Option<SessionState>,
    conversation_state: Option<ConversationState>,
    root_agent_id: Option<Uuid>,
    config: Option<SessionSettings>,
    wait_epoch: i64,
    waiting_checkpoint_id: Option<Uuid>,
    reason: Option<String>,
    anomalies: u32,
    #[serde(default)]
    token_budget: Option<u64>,
}

impl Session {
    /// Tokens it may spend (its config's, plus what operators added); `None`: unlimited.
    pub fn token_budget(&self) -> Option<u64> {
        self.token_budget
    }
    /// Whether it is suspended because its token budget ran out (only budget lifts that).
    pub fn budget_exhausted(&self) -> bool {
        self.state == Some(SessionState::Suspended)
            && self.reason.as_deref() == Some(BUDGET_EXHAUSTED)
    }
    /// The lifecycle state; `None` before `session.created`.
    pub fn state(&self) -> Option<SessionState> {
        self.state
    }
    /// The FCMP state; `None` before the first change.
    pub fn conversation_state(&self) -> Option<ConversationState> {
        self.conversation_state
    }
    /// The root agent, from `session.activated`.
    pub fn root_agent_id(&self) -> Option<Uuid> {
        self.root_agent_id
    }
    /// The settings of `session.created`.
    pub fn config(&self) -> Option<&SessionSettings> {
        self.config.as_ref()
    }
    /// How many waits the session has entered (`user.input.required` runes): the epoch of
    /// its `session_timeout` deadline.
    pub fn wait_epoch(&self) -> i64 {
        self.wait_epoch
    }
    /// The `NEED_INFORMATION` checkpoint of the current wait.
    pub fn waiting_checkpoint_id(&self) -> Option<Uuid> {
        self.waiting_checkpoint_id
    }
    /// The reason of the last pause, suspension or closing.
    pub fn reason(&self) -> Option<&str> {
        self.reason.as_deref()
    }
    /// `saga.anomaly` runes recorded on the session.
    pub fn anomalies(&self) -> u32 {
        self.anomalies
    }
    /// The state's name, `none` before creation.
    pub fn state_name(&self) -> String {
        self.state.map_or("none", SessionState::as_str).to_string()
    }
    /// Whether facts still move the FCMP state (`active`, `paused`, `suspended`).
    pub fn is_live(&self) -> bool {
        matches!(
            self.state,
            Some(SessionState::Active | SessionState::Paused | SessionState::Suspended)
        )
    }
}

impl Machine for Session {
    type Rune = SessionRune;

    fn check(&self, rune: &SessionRune) -> Result<(), SagaError> {
        use ConversationState as C;
        use SessionRune as R;
        use SessionState as S;
        let st = self.state;
        let cs = self.conversation_state;
        let live = self.is_live();
        let edge = match rune {
            R::Created(_) => st.is_none(),
            R::Activated(_) => st == Some(S::Created),
            R::Paused(_) | R::Suspended(_) => st == Some(S::Active),
            R::Resumed(_) => st == Some(S::Paused),
            R::Unsuspended(_) => st == Some(S::Suspended),
            R::Closing(_) => live,
            R::Closed(_) => st == Some(S::Closing),
            R::Archived(_) => st == Some(S::Closed),
            R::StateChanged(r) => {
                if live && r.from != cs {
                    return Err(SagaError::Guard {
                        rune: rune.name(),
                        reason: format!("from {:?} but the state is {cs:?}", r.from),
                    });
                }
                live && fcmp_edge(r.from, r.to)
            }
            R::UserInputRequired(_)
            | R::ReplyAccepted(_)
            | R::AutoDecideTimeout(_)
            | R::PreserveWaiting(_) => live && cs == Some(C::WaitingUser),
            R::ConversationCompleted(_) => live && cs == Some(C::Succeeded),
            R::ConversationFailed(_) => live && matches!(cs, Some(C::Failed | C::Canceled)),
            R::ReconcileFailed(_) => live && matches!(cs, Some(C::Queued | C::Running)),
            R::BudgetAdded(_) => live,
            R::Anomaly(_) => true,
        };
        if edge {
            Ok(())
        } else {
            Err(SagaError::NoEdge {
                machine: SESSION_TYPE,
                state: match cs {
                    Some(cs) => format!("{}/{cs}", self.state_name()),
                    None => self.state_name(),
                },
                rune: rune.name(),
            })
        }
    }

    fn fold(&mut self, rune: SessionRune) {
        use SessionRune as R;
        use SessionState as S;
        match rune {
            R::Created(r) => {
                self.conversation_id = Some(r.conversation_id);
                self.token_budget = r.config.token_budget;
                self.config = Some(r.config);
                self.state = Some(S::Created);
            }
            R::Activated(r) => {
                self.root_agent_id = Some(r.root_agent_id);
                self.state = Some(S::Active);
            }
            R::Paused(r) => {
                self.reason = Some(r.reason);
                self.state = Some(S::Paused);
            }
            R::Suspended(r) => {
                self.reason = Some(r.reason);
                self.state = Some(S::Suspended);
            }
            R::Closing(r) => {
                self.reason = Some(r.reason);
                self.state = Some(S::Closing);
            }
            R::Resumed(_) | R::Unsuspended(_) => self.state = Some(S::Active),
            R::Closed(_) => self.state = Some(S::Closed),
            R::Archived(_) => self.state = Some(S::Archived),
            R::StateChanged(r) => {
                if r.to != ConversationState::WaitingUser {
                    self.waiting_checkpoint_id = None;
                }
                self.conversation_state = Some(r.to);
            }
            R::UserInputRequired(r) => {
                self.wait_epoch += 1;
                self.waiting_checkpoint_id = Some(r.checkpoint_id);
            }
            R::Anomaly(_) => self.anomalies += 1,
            R::BudgetAdded(r) => self.token_budget = Some(r.token_budget),
            R::ReplyAccepted(_)
            | R::AutoDecideTimeout(_)
            | R::ConversationCompleted(_)
            | R::ConversationFailed(_)
            | R::PreserveWaiting(_)
            | R::ReconcileFailed(_) => {}
        }
    }
}

saga_aggregate!(Session, SessionRune, SESSION_TYPE);
