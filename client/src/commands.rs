//! The six commands of the API, each a [`CommandRequest`] that answers a [`Written`]
//! domain fact. Every call carries an `Idempotency-Key` (generated, or the caller's), the
//! same on each retry of that call, so a retried command runs at most once.

use std::future::{Future, IntoFuture};
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::Serialize;
use uuid::Uuid;

use crate::http::{header_value, name, Call, Retries};
use crate::worker::Lease;
use crate::{Client, Error, Position, TurnFence};
use pm_api_types::commands::{
    AddMessageInput, CreateConversationCheckpointInput, CreateTaskCheckpointInput, CreateTaskInput,
    RegisterActorInput, StartConversationInput,
};
use pm_domain::actor::ActorRegistered;
use pm_domain::checkpoint::ConversationCheckpointCreated;
use pm_domain::conversation::ConversationStarted;
use pm_domain::message::MessageAdded;
use pm_domain::task::{TaskCheckpointCreated, TaskCreated};

/// Whether a command created its entity or found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WriteStatus {
    /// `201 Created`: the command emitted its fact.
    Created,
    /// `200 OK`: an identical command had created the entity (a derived id); no new fact.
    Existing,
}

/// A command's answer: the entity (the domain fact) and where it is.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Written<T> {
    /// The created (or existing) entity.
    pub entity: T,
    /// Created or existing.
    pub status: WriteStatus,
    /// The log position of the fact (`X-Event-Position`); `None` for
    /// [`WriteStatus::Existing`], whose fact was written earlier.
    pub position: Option<Position>,
    /// Where the entity is read (`Location`), relative to the base URL.
    pub location: Option<String>,
    /// `true` when the service replayed the first answer to this `Idempotency-Key`
    /// (`Idempotent-Replayed`): the same answer, no new fact.
    pub replayed: bool,
    /// The `Idempotency-Key` the call carried (`None` from a client built with
    /// [`idempotency_keys(false)`](crate::ClientBuilder::idempotency_keys) when the command
    /// set none).
    pub idempotency_key: Option<String>,
    /// The correlation id the service recorded on the fact.
    pub correlation_id: Option<String>,
}

impl<T> Written<T> {
    /// Whether the command created its entity.
    pub fn is_created(&self) -> bool {
        self.status == WriteStatus::Created
    }
}

/// A command about to be sent: set options, then `.await` it (or call
/// [`send`](CommandRequest::send)).
///
/// ```no_run
/// # async fn run(client: pm_client::Client, conversation: uuid::Uuid,
/// #              input: pm_client::AddMessageInput) -> Result<(), pm_client::Error> {
/// let written = client
///     .add_message(conversation, input)
///     .idempotency_key("ingress-delivery-8812") // same key on redelivery: same answer
///     .await?;
/// println!("{} at {:?}", written.entity.id, written.position);
/// # Ok(()) }
/// ```
#[must_use = "a command does nothing until awaited"]
pub struct CommandRequest<T> {
    client: Client,
    call: Result<Call, Error>,
    key: Option<String>,
    /// The claim of a [`TurnHandle`](crate::TurnHandle)'s command: checked before
    /// sending, told when the service fenced it off.
    lease: Option<Arc<Lease>>,
    entity: PhantomData<fn() -> T>,
}

impl<T> std::fmt::Debug for CommandRequest<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommandRequest")
            .field("call", &self.call.as_ref().map(|c| &c.path))
            .field("key", &self.key)
            .finish()
    }
}

impl<T: DeserializeOwned + Send + 'static> CommandRequest<T> {
    fn new(client: &Client, path: String, input: &impl Serialize) -> Self {
        let call = serde_json::to_vec(input)
            .map(|body| Call::post(path, Some(body)))
            .map_err(|e| Error::InvalidInput(format!("the input does not serialize: {e}")));
        Self {
            client: client.clone(),
            call,
            key: None,
            lease: None,
            entity: PhantomData,
        }
    }

    /// The `Idempotency-Key` (1–255 visible ASCII characters) instead of a generated one:
    /// derive it from what identifies the delivery (e.g. an ingress delivery id), so a
    /// redelivery within 24 h gets the first answer again. Keys are scoped to the role.
    pub fn idempotency_key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// `X-Correlation-Id`: recorded as the fact's `correlation_id` (≤ 128 characters).
    pub fn correlation_id(self, id: impl AsRef<str>) -> Self {
        self.with_header("x-correlation-id", id.as_ref())
    }

    /// `X-Causation-Id`: recorded as the fact's `causation_id` (e.g. the CloudEvent id of
    /// the event this command answers).
    pub fn causation_id(self, id: impl AsRef<str>) -> Self {
        self.with_header("x-causation-id", id.as_ref())
    }

    /// `traceparent` (and `tracestate`): the command joins that W3C trace as a child of its
    /// span, and its facts record it. A [`TurnHandle`](crate::TurnHandle)'s commands carry
    /// their turn's span already, so what a worker writes is in the trace of what caused
    /// the turn.
    pub fn traced(self, trace: &crate::TraceContext) -> Self {
        let traced = self.with_header("traceparent", &trace.traceparent);
        match &trace.tracestate {
            Some(state) => traced.with_header("tracestate", state),
            None => traced,
        }
    }

    /// Fences the command by a claim (`PM-Turn-Id`, `PM-Turn-Epoch`): the service applies
    /// it on behalf of that turn only while the claim holds it, and otherwise answers `409
    /// turn_fenced` and writes nothing. A [`TurnHandle`](crate::TurnHandle)'s commands
    /// carry their claim's fence already.
    ///
    /// Keep the `Idempotency-Key` of a fenced command to one claim (the default, a key per
    /// call, does): the service keeps a `turn_fenced` answer under its key like any other,
    /// so a key reused by a later claim of the turn would get that refusal again.
    pub fn fenced(mut self, fence: TurnFence) -> Self {
        self.call = self.call.map(|mut call| {
            fence.apply(&mut call.headers);
            call
        });
        self
    }

    /// Guards the command by a worker's claim.
    pub(crate) fn guarded(mut self, lease: Arc<Lease>) -> Self {
        self.lease = Some(lease);
        self
    }

    fn with_header(mut self, header: &'static str, raw: &str) -> Self {
        self.call = self.call.and_then(|mut call| {
            call.headers
                .insert(name(header), header_value(header, raw)?);
            Ok(call)
        });
        self
    }

    /// Sends the command (retrying under the client's policy with one key).
    ///
    /// # Errors
    /// [`Error::Problem`] with the rule's code when the service refuses (`404`, `409`,
    /// `422`, …), and the other [`Error`]s when it cannot be reached. A fenced command
    /// whose claim is gone answers `409 turn_fenced` — at once, without a request, when
    /// its [`TurnHandle`](crate::TurnHandle) already knows.
    pub async fn send(self) -> Result<Written<T>, Error> {
        if let Some(lease) = &self.lease {
            lease.check()?;
        }
        let lease = self.lease.clone();
        let written = self.send_unguarded().await;
        if let (Some(lease), Err(e)) = (lease, &written) {
            lease.observe(e);
        }
        written
    }

    async fn send_unguarded(self) -> Result<Written<T>, Error> {
        let mut call = self.call?;
        let key = self.key.or_else(|| {
            self.client
                .inner
                .idempotency_keys
                .then(|| Uuid::new_v4().to_string())
        });
        match &key {
            Some(key) => {
                let valid = !key.is_empty()
                    && key.len() <= 255
                    && key.bytes().all(|b| b.is_ascii_graphic());
                if !valid {
                    return Err(Error::InvalidInput(format!(
                        "idempotency key {key:?}: expected 1 to 255 visible ASCII characters"
                    )));
                }
                call.headers.insert(
                    name("idempotency-key"),
                    header_value("idempotency key", key)?,
                );
            }
            // Without a key a retry could run the command twice.
            None => call.retries = Retries::Never,
        }
        let answer = self.client.inner.send(&call).await?;
        let status = match answer.status {
            201 => WriteStatus::Created,
            _ => WriteStatus::Existing,
        };
        let position = answer.position()?;
        Ok(Written {
            entity: answer.json(&call.path)?,
            status,
            position,
            location: answer.header("location").map(str::to_string),
            replayed: answer.header("idempotent-replayed") == Some("true"),
            idempotency_key: key,
            correlation_id: answer.header("x-correlation-id").map(str::to_string),
        })
    }
}

impl<T: DeserializeOwned + Send + 'static> IntoFuture for CommandRequest<T> {
    type Output = Result<Written<T>, Error>;
    type IntoFuture = Pin<Box<dyn Future<Output = Self::Output> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.send())
    }
}

/// The commands (API.md, "Commands"); roles in brackets.
impl Client {
    /// `POST /v1/actors` (ingress, admin): `project_manager.actor.registered`. With an
    /// `external_identity` the id is derived ([`ids::actor_id`](crate::ids::actor_id)) and
    /// an identical repeat answers [`WriteStatus::Existing`].
    pub fn register_actor(&self, input: RegisterActorInput) -> CommandRequest<ActorRegistered> {
        CommandRequest::new(self, "/v1/actors".into(), &input)
    }

    /// `POST /v1/conversations` (ingress, admin): `project_manager.conversation.started`.
    /// With `external_source` and `external_id` the id is derived
    /// ([`ids::conversation_id`](crate::ids::conversation_id)).
    pub fn start_conversation(
        &self,
        input: StartConversationInput,
    ) -> CommandRequest<ConversationStarted> {
        CommandRequest::new(self, "/v1/conversations".into(), &input)
    }

    /// `POST /v1/conversations/{id}/checkpoints` (llm, admin):
    /// `project_manager.conversation.checkpoint.created`.
    pub fn create_conversation_checkpoint(
        &self,
        conversation_id: Uuid,
        input: CreateConversationCheckpointInput,
    ) -> CommandRequest<ConversationCheckpointCreated> {
        let path = format!("/v1/conversations/{conversation_id}/checkpoints");
        CommandRequest::new(self, path, &input)
    }

    /// `POST /v1/conversations/{id}/tasks` (llm, admin): `project_manager.task.created`
    /// (the checkpoint must be a `BEGIN_WORK` checkpoint of this conversation).
    pub fn create_task(
        &self,
        conversation_id: Uuid,
        input: CreateTaskInput,
    ) -> CommandRequest<TaskCreated> {
        let path = format!("/v1/conversations/{conversation_id}/tasks");
        CommandRequest::new(self, path, &input)
    }

    /// `POST /v1/tasks/{id}/checkpoints` (llm, admin):
    /// `project_manager.task.checkpoint.created`.
    pub fn create_task_checkpoint(
        &self,
        task_id: Uuid,
        input: CreateTaskCheckpointInput,
    ) -> CommandRequest<TaskCheckpointCreated> {
        CommandRequest::new(self, format!("/v1/tasks/{task_id}/checkpoints"), &input)
    }

    /// `POST /v1/conversations/{id}/messages` (ingress, llm, admin):
    /// `project_manager.message.added`. With an `external_identity` the id is derived
    /// ([`ids::message_id`](crate::ids::message_id)).
    pub fn add_message(
        &self,
        conversation_id: Uuid,
        input: AddMessageInput,
    ) -> CommandRequest<MessageAdded> {
        let path = format!("/v1/conversations/{conversation_id}/messages");
        CommandRequest::new(self, path, &input)
    }
}
