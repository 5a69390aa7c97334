//! `/mcp`: the Model Context Protocol server (Streamable HTTP, the official Rust SDK
//! `rmcp`), so a model works its turn through tools (docs/MCP.md).
//!
//! It sits behind the same bearer tokens as the HTTP API (any role may connect; each sees
//! only the tools its role may call), and each tool is one HTTP endpoint called on the
//! service's own router with the caller's `Authorization` and its `PM-Turn-Id` /
//! `PM-Turn-Epoch` headers ([`tools`]): a turn-scoped connection's writes are fenced to
//! that turn exactly as HTTP commands are, and a refusal is a tool result with `isError`
//! carrying the problem — never a protocol error.

pub mod prompts;
pub mod quote;
pub mod resources;
pub mod sessions;
pub mod tools;

use std::sync::Arc;

use axum::http::request::Parts;
use axum::http::HeaderMap;
use axum::Router;
use pm_application::log::tail::LogTail;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, GetPromptRequestParams,
    GetPromptResponse, Implementation, ListPromptsResult, ListResourceTemplatesResult,
    ListToolsResult, PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse,
    ServerCapabilities, ServerConfig, SubscribeRequestParams, UnsubscribeRequestParams,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::json;

use crate::auth::Caller;

/// What the server tells a model runtime at `initialize`.
const INSTRUCTIONS: &str = "project-manager: conversations, checkpoints, tasks and messages, and \
the turns an LLM service works. A worker claims a turn (claim_turn), then works it on a \
connection that sends the headers PM-Turn-Id and PM-Turn-Epoch: its messages, checkpoints, \
tasks and reports are fenced to that claim. A refusal is a tool result with isError and the \
problem's code and detail (e.g. turn_fenced: the claim no longer holds the turn; stop working it).";

/// The MCP handler of one connection: the service's router (without `/mcp`) its tools,
/// resources and prompts call; the log's tail and the subscriptions it feeds.
#[derive(Clone)]
pub struct PmMcp {
    router: Router,
    tail: LogTail,
    subscriptions: resources::Subscriptions,
}

/// Where the MCP server answers, which `Host` and `Origin` it accepts, and how many
/// sessions a principal may hold for how long.
#[derive(Debug, Clone)]
pub struct McpSettings {
    /// `Host` names (or `host:port`) accepted; empty: loopback only (the SDK's default).
    pub allowed_hosts: Vec<String>,
    /// Browser origins accepted; empty: a request carrying `Origin` is not checked.
    pub allowed_origins: Vec<String>,
    /// `PM_MCP_SESSIONS_PER_PRINCIPAL`.
    pub sessions_per_principal: usize,
    /// `PM_MCP_SESSION_IDLE_SECS`: a session without a request this long ends.
    pub session_idle: std::time::Duration,
}

impl Default for McpSettings {
    fn default() -> Self {
        Self {
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            sessions_per_principal: 16,
            session_idle: std::time::Duration::from_secs(300),
        }
    }
}

/// The `/mcp` service over `router` (the HTTP API it calls), notifying subscribers from
/// `tail`, taking request bodies up to `max_body_bytes` (`PM_MAX_BODY_BYTES`, as HTTP).
pub fn service(
    router: Router,
    settings: &McpSettings,
    tail: LogTail,
    max_body_bytes: usize,
    sessions: Arc<LocalSessionManager>,
) -> StreamableHttpService<PmMcp, LocalSessionManager> {
    let mut config =
        StreamableHttpServerConfig::default().with_max_request_body_bytes(max_body_bytes);
    if !settings.allowed_hosts.is_empty() {
        config = config.with_allowed_hosts(settings.allowed_hosts.clone());
    }
    if !settings.allowed_origins.is_empty() {
        config = config.with_allowed_origins(settings.allowed_origins.clone());
    }
    let handler = PmMcp {
        router,
        tail,
        subscriptions: resources::Subscriptions::default(),
    };
    StreamableHttpService::new(move || Ok(handler.clone()), sessions, config)
}

/// The HTTP request's parts the SDK hands each MCP request (headers, and the caller the
/// guard authenticated).
fn parts(context: &RequestContext<RoleServer>) -> Option<&Parts> {
    context.extensions.get::<Parts>()
}

fn headers(context: &RequestContext<RoleServer>) -> &HeaderMap {
    static NONE: std::sync::LazyLock<HeaderMap> = std::sync::LazyLock::new(HeaderMap::new);
    parts(context).map_or(&NONE, |p| &p.headers)
}

/// The caller the guard authenticated; without one (never, behind the guard) nothing is
/// allowed: an error, not open mode.
fn caller(context: &RequestContext<RoleServer>) -> Result<Caller, ErrorData> {
    parts(context)
        .and_then(|p| p.extensions.get::<Caller>().cloned())
        .ok_or_else(|| ErrorData::internal_error("the request has no authenticated caller", None))
}

impl ServerHandler for PmMcp {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_prompts()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_tools()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new(
                "project-manager",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let caller = caller(&context)?;
        let tools = tools::TOOLS
            .iter()
            .filter(|t| t.allows(&caller))
            .map(tools::McpTool::describe)
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(tool) = tools::TOOLS.iter().find(|t| t.name == request.name) else {
            return Ok(CallToolResult::structured_error(json!({
                "type": "about:blank", "title": "Not Found", "status": 404, "code": "not_found",
                "detail": format!("no tool {}", request.name),
            }))
            .into());
        };
        let caller = caller(&context)?;
        if !tool.allows(&caller) {
            return Ok(CallToolResult::structured_error(json!({
                "type": "about:blank", "title": "Forbidden", "status": 403, "code": "forbidden",
                "detail": format!("the role {} may not call {}", caller.principal().role_label(), tool.name),
            }))
            .into());
        }
        let arguments = request.arguments.unwrap_or_default();
        // rmcp runs the call in a task of its own and, when the client cancels it
        // (`notifications/cancelled`) or its session ends, only cancels `context.ct`: the
        // call is dropped here then, as a request a client abandons over HTTP is — so a
        // `claim_turn` still waiting does not claim a turn for a caller that is gone.
        tokio::select! {
            result = tool.call(&self.router, headers(&context), arguments) => Ok(result.into()),
            () = context.ct.cancelled() => Err(ErrorData::internal_error(
                format!("{} was cancelled", tool.name),
                None,
            )),
        }
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(ListResourceTemplatesResult::with_all_items(
            resources::templates(),
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let read = resources::read(&self.router, headers(&context), &request.uri).await?;
        Ok(read.into())
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let headers = headers(&context);
        let session = session_of(headers);
        self.subscriptions
            .subscribe(
                &self.router,
                headers,
                &self.tail,
                &request.uri,
                session,
                context.peer.clone(),
            )
            .await
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let session = session_of(headers(&context));
        self.subscriptions.unsubscribe(&request.uri, &session);
        Ok(())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        Ok(ListPromptsResult::with_all_items(prompts::list()))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        if request.name != prompts::WORK_TURN {
            return Err(ErrorData::invalid_params(
                format!("no prompt {}", request.name),
                None,
            ));
        }
        let rendered =
            prompts::work_turn(&self.router, headers(&context), request.arguments.as_ref()).await?;
        Ok(rendered.into())
    }
}

/// The MCP session a request belongs to (its `Mcp-Session-Id`); a stateless request is a
/// session of its own.
fn session_of(headers: &HeaderMap) -> String {
    headers
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map_or_else(|| uuid::Uuid::new_v4().to_string(), str::to_string)
}
