//! Typed reads of the read model ([`Reader`]), with read-your-writes: a reader made by
//! [`Client::after`] or [`Client::at`] passes `min_position`, so the service answers only
//! once its read model has processed that log position.

mod queries;
mod shown;

use futures::{Stream, StreamExt, TryStreamExt};
use pm_api_types::views::{
    AgentView, AnomalyView, ConversationView, Page, SessionView, StatsGroup, TaskCheckpointView,
    TaskDetail, TaskStatsView, ToolCallView, TurnView,
};
use pm_domain::actor::ActorRegistered;
use pm_domain::checkpoint::ConversationCheckpointCreated;
use pm_domain::message::MessageAdded;
use uuid::Uuid;

pub use queries::{
    AgentQuery, AnomalyQuery, CheckpointQuery, ConversationQuery, ConversationTaskQuery, ListQuery,
    MessageQuery, Paging, SessionQuery, TaskQuery, ToolCallQuery, TurnQuery,
};

use crate::http::{segment, Call};
use crate::{Client, Error, Position, Written};
use queries::Params;
pub use shown::Shown;

/// Reads of the read model, optionally after a log position (read-your-writes).
///
/// Reads trail writes by a few milliseconds. [`Client::read`] reads whatever the read
/// model holds now; [`Client::after`] and [`Client::at`] wait (up to 5 s on the service,
/// then `503 projection_lagging`, which is retried) until it holds a given write.
///
/// ```no_run
/// # async fn run(client: pm_client::Client, task_id: uuid::Uuid) -> Result<(), pm_client::Error> {
/// use pm_client::{CreateTaskCheckpointInput, TaskCheckpointType};
///
/// let written = client
///     .create_task_checkpoint(task_id, CreateTaskCheckpointInput {
///         checkpoint_type: TaskCheckpointType::WorkStarted,
///     })
///     .await?;
/// let task = client.after(&written).task(task_id).await?; // sees WORK_STARTED
/// assert_eq!(task.task.status.as_str(), "WORK_STARTED");
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Reader {
    client: Client,
    min_position: Option<Position>,
}

impl Client {
    /// Reads of what the read model holds now.
    pub fn read(&self) -> Reader {
        Reader {
            client: self.clone(),
            min_position: None,
        }
    }

    /// Reads once the read model has processed `position`.
    pub fn at(&self, position: Position) -> Reader {
        Reader {
            client: self.clone(),
            min_position: Some(position),
        }
    }

    /// Reads that see `written` (and everything this client wrote before it). An
    /// [`Existing`](crate::WriteStatus::Existing) answer has no position: its fact was
    /// written earlier, so the reader does not wait.
    pub fn after<T>(&self, written: &Written<T>) -> Reader {
        Reader {
            client: self.clone(),
            min_position: written.position.clone(),
        }
    }
}

impl Reader {
    /// The position reads wait for, if any.
    pub fn min_position(&self) -> Option<&Position> {
        self.min_position.as_ref()
    }

    async fn get<T: Shown>(&self, path: String, mut params: Params) -> Result<T, Error> {
        if let Some(p) = &self.min_position {
            params.push(("min_position", p.as_str().to_string()));
        }
        let call = Call::get(path, params);
        let wire: T::Wire = self.client.inner.send(&call).await?.json(&call.path)?;
        Ok(T::shown(wire))
    }

    /// `GET /v1/actors/{id}`.
    ///
    /// # Errors
    /// `404 actor_not_found`, and the [`Error`]s of any call.
    pub async fn actor(&self, id: Uuid) -> Result<ActorRegistered, Error> {
        self.get(format!("/v1/actors/{id}"), Vec::new()).await
    }

    /// `GET /v1/conversations/{id}`: with its latest checkpoint and counts.
    ///
    /// # Errors
    /// `404 conversation_not_found`, and the [`Error`]s of any call.
    pub async fn conversation(&self, id: Uuid) -> Result<ConversationView, Error> {
        self.get(format!("/v1/conversations/{id}"), Vec::new())
            .await
    }

    /// `GET /v1/conversations`: one page.
    ///
    /// # Errors
    /// `400 invalid_parameter` (e.g. a cursor of another list), and the [`Error`]s of any
    /// call.
    pub async fn conversations(
        &self,
        query: &ConversationQuery,
    ) -> Result<Page<ConversationView>, Error> {
        self.list(query).await
    }

    /// `GET /v1/conversations/{id}/checkpoints`: one page, oldest first.
    ///
    /// # Errors
    /// `404 conversation_not_found`, and the [`Error`]s of any call.
    pub async fn checkpoints(
        &self,
        query: &CheckpointQuery,
    ) -> Result<Page<ConversationCheckpointCreated>, Error> {
        self.list(query).await
    }

    /// `GET /v1/conversations/{id}/checkpoints/{checkpoint_id}`.
    ///
    /// # Errors
    /// `404 checkpoint_not_found`, and the [`Error`]s of any call.
    pub async fn checkpoint(
        &self,
        conversation_id: Uuid,
        checkpoint_id: Uuid,
    ) -> Result<ConversationCheckpointCreated, Error> {
        let path = format!("/v1/conversations/{conversation_id}/checkpoints/{checkpoint_id}");
        self.get(path, Vec::new()).await
    }

    /// `GET /v1/conversations/{id}/messages`: one page in `time` order.
    ///
    /// # Errors
    /// `404 conversation_not_found`, and the [`Error`]s of any call.
    pub async fn messages(&self, query: &MessageQuery) -> Result<Page<MessageAdded>, Error> {
        self.list(query).await
    }

    /// `GET /v1/conversations/{id}/messages/{message_id}`.
    ///
    /// # Errors
    /// `404 message_not_found`, and the [`Error`]s of any call.
    pub async fn message(
        &self,
        conversation_id: Uuid,
        message_id: Uuid,
    ) -> Result<MessageAdded, Error> {
        let path = format!("/v1/conversations/{conversation_id}/messages/{message_id}");
        self.get(path, Vec::new()).await
    }

    /// `GET /v1/conversations/{id}/tasks`: one page with derived status.
    ///
    /// # Errors
    /// `404 conversation_not_found`, and the [`Error`]s of any call.
    pub async fn conversation_tasks(
        &self,
        query: &ConversationTaskQuery,
    ) -> Result<Page<pm_api_types::views::TaskView>, Error> {
        self.list(query).await
    }

    /// `GET /v1/tasks`: one page with derived status.
    ///
    /// # Errors
    /// The [`Error`]s of any call.
    pub async fn tasks(
        &self,
        query: &TaskQuery,
    ) -> Result<Page<pm_api_types::views::TaskView>, Error> {
        self.list(query).await
    }

    /// `GET /v1/tasks/{id}`: status, `status_changed_at` and checkpoint history.
    ///
    /// # Errors
    /// `404 task_not_found`, and the [`Error`]s of any call.
    pub async fn task(&self, id: Uuid) -> Result<TaskDetail, Error> {
        self.get(format!("/v1/tasks/{id}"), Vec::new()).await
    }

    /// `GET /v1/tasks/{id}/checkpoints/{checkpoint_id}`.
    ///
    /// # Errors
    /// `404 task_checkpoint_not_found`, and the [`Error`]s of any call.
    pub async fn task_checkpoint(
        &self,
        task_id: Uuid,
        checkpoint_id: Uuid,
    ) -> Result<TaskCheckpointView, Error> {
        let path = format!("/v1/tasks/{task_id}/checkpoints/{checkpoint_id}");
        self.get(path, Vec::new()).await
    }

    /// `GET /v1/sessions/{conversation_id}`: the conversation's session (lifecycle, FCMP
    /// state, agents, whether it waits for the user).
    ///
    /// # Errors
    /// `404 session_not_found`, and the [`Error`]s of any call.
    pub async fn session(&self, conversation_id: Uuid) -> Result<SessionView, Error> {
        self.get(format!("/v1/sessions/{conversation_id}"), Vec::new())
            .await
    }

    /// `GET /v1/agents/{id}`: an agent, its active turn and its inbox.
    ///
    /// # Errors
    /// `404 agent_not_found`, and the [`Error`]s of any call.
    pub async fn agent(&self, id: Uuid) -> Result<AgentView, Error> {
        self.get(format!("/v1/agents/{id}"), Vec::new()).await
    }

    /// `GET /v1/sessions`: one page ([`SessionQuery`]).
    ///
    /// # Errors
    /// The [`Error`]s of any call.
    pub async fn sessions(&self, query: &SessionQuery) -> Result<Page<SessionView>, Error> {
        self.list(query).await
    }

    /// `GET /v1/agents`: one page ([`AgentQuery`]).
    ///
    /// # Errors
    /// The [`Error`]s of any call.
    pub async fn agents(&self, query: &AgentQuery) -> Result<Page<AgentView>, Error> {
        self.list(query).await
    }

    /// `GET /v1/turns/{id}`: a turn, what it is for (`input`) and how it ended.
    ///
    /// # Errors
    /// `404 turn_not_found`, and the [`Error`]s of any call.
    pub async fn turn(&self, id: Uuid) -> Result<TurnView, Error> {
        self.get(format!("/v1/turns/{id}"), Vec::new()).await
    }

    /// `GET /v1/turns`: one page ([`TurnQuery`]).
    ///
    /// # Errors
    /// The [`Error`]s of any call.
    pub async fn turns(&self, query: &TurnQuery) -> Result<Page<TurnView>, Error> {
        self.list(query).await
    }

    /// `GET /v1/turns/{turn_id}/tool-calls/{call_id}`: one tool call, its state and
    /// result.
    ///
    /// # Errors
    /// `404 turn_not_found` or `tool_call_not_found`, and the [`Error`]s of any call.
    pub async fn tool_call(&self, turn_id: Uuid, call_id: &str) -> Result<ToolCallView, Error> {
        let path = format!("/v1/turns/{turn_id}/tool-calls/{}", segment(call_id));
        self.get(path, Vec::new()).await
    }

    /// `GET /v1/tool-calls`: one page, oldest first ([`ToolCallQuery`]).
    ///
    /// # Errors
    /// The [`Error`]s of any call.
    pub async fn tool_calls(&self, query: &ToolCallQuery) -> Result<Page<ToolCallView>, Error> {
        self.list(query).await
    }

    /// `GET /v1/anomalies`: one page ([`AnomalyQuery`]).
    ///
    /// # Errors
    /// The [`Error`]s of any call.
    pub async fn anomalies(&self, query: &AnomalyQuery) -> Result<Page<AnomalyView>, Error> {
        self.list(query).await
    }

    /// `GET /v1/stats/tasks`: counts by status and cycle times, over all tasks
    /// ([`StatsGroup::All`]) or per assignee or organization.
    ///
    /// # Errors
    /// The [`Error`]s of any call.
    pub async fn task_stats(&self, group: StatsGroup) -> Result<TaskStatsView, Error> {
        let mut params = Params::new();
        match group {
            StatsGroup::All => {}
            StatsGroup::AssignedTo => params.push(("group_by", "assigned_to".into())),
            StatsGroup::Organization => params.push(("group_by", "organization".into())),
        }
        self.get("/v1/stats/tasks".into(), params).await
    }

    /// One page of any list.
    ///
    /// # Errors
    /// As the list's own method.
    pub async fn list<Q: ListQuery>(&self, query: &Q) -> Result<Page<Q::Item>, Error> {
        let mut params = Params::new();
        query.filters(&mut params);
        query.paging().params(&mut params);
        self.get(query.path(), params).await
    }

    /// Every item of a list from the query's cursor on, page by page (`paging.limit`
    /// items per request), as a stream.
    ///
    /// ```no_run
    /// # async fn run(client: pm_client::Client) -> Result<(), pm_client::Error> {
    /// use futures::TryStreamExt;
    /// use pm_client::{TaskQuery, TaskStatus, TaskCheckpointType};
    ///
    /// let query = TaskQuery::new().status(TaskStatus::Latest(TaskCheckpointType::WorkStarted)).limit(200);
    /// let working: Vec<_> = client.read().walk(query).try_collect().await?;
    /// println!("{} tasks in progress", working.len());
    /// # Ok(()) }
    /// ```
    pub fn walk<Q: ListQuery>(
        &self,
        query: Q,
    ) -> impl Stream<Item = Result<Q::Item, Error>> + Send + Unpin + 'static {
        let reader = self.clone();
        futures::stream::try_unfold(Some(query), move |next| {
            let reader = reader.clone();
            async move {
                let Some(query) = next else {
                    return Ok(None);
                };
                let page = reader.list(&query).await?;
                if page.next_cursor.is_some() && page.next_cursor == query.paging().cursor {
                    return Err(Error::decode(query.path(), "the list repeated its cursor"));
                }
                let next = page.next_cursor.map(|c| query.with_cursor(Some(c)));
                Ok(Some((page.items, next)))
            }
        })
        .map_ok(|items| futures::stream::iter(items.into_iter().map(Ok)))
        .try_flatten()
        .boxed()
    }
}
