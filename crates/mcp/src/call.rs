//! One call of one server's tool: sent with a progress token, under the server's budget
//! (restarted by each progress notification), abandoned with `notifications/cancelled` when the
//! pipeline cancels it, and its result checked against the tool's `outputSchema`.

use std::sync::Arc;

use dsh_core::{Failure, Json, ToolContext};
use rmcp::model::{
    CallToolRequestParams, CancelledNotificationParam, ClientNotification, ClientRequest,
    JsonObject, Notification, Request, RequestId, ServerResult,
};
use rmcp::service::{PeerRequestOptions, RoleClient};
use rmcp::{Peer, ServiceError};
use serde_json::Value;

use crate::content;
use crate::hub::Running;
use crate::link::Link;

/// One tool of one server, as its body calls it.
#[derive(Clone)]
pub(crate) struct Call {
    /// The dsh name, `mcp__<server>__<tool>`.
    pub(crate) name: Arc<str>,
    /// The server's own name for it.
    pub(crate) tool: Arc<str>,
    pub(crate) output_schema: Option<Arc<JsonObject>>,
    pub(crate) link: Arc<Link>,
}

impl Call {
    pub(crate) async fn run(&self, ctx: ToolContext) -> Result<Json, Failure> {
        let arguments = match ctx.arguments().value() {
            Value::Object(map) => map,
            Value::Null => serde_json::Map::new(),
            other => {
                return Err(Failure::new(format!(
                    "MCP tools take an object of arguments, not {other}"
                )));
            }
        };
        let service = self.link.service().await?;
        let peer = service.peer().clone();
        let params = CallToolRequestParams::new(self.tool.to_string()).with_arguments(arguments);
        let budget = self.link.config.call_timeout();
        let options = PeerRequestOptions::with_timeout(budget).reset_timeout_on_progress();
        let sent = peer
            .send_request_with_option(
                ClientRequest::CallToolRequest(Request::new(params)),
                options,
            )
            .await;
        let handle = match sent {
            Ok(handle) => handle,
            Err(e) => return Err(Failure::new(self.link.why(&e).await)),
        };
        let _running = self.link.hub.running(
            handle.progress_token.clone(),
            Running {
                tool: self.name.to_string(),
                call_id: ctx.exec().call_id().to_owned(),
            },
        );
        let mut abandon = Abandon {
            peer,
            id: Some(handle.id.clone()),
        };
        let answer = tokio::select! {
            r = handle.await_response() => r,
            // The server is told (`notifications/cancelled`) before the call's result is
            // recorded, so it hears it before dsh goes on or exits; a call dropped instead
            // (a second signal's fast exit) is told when `abandon` drops.
            _ = ctx.signal().aborted() => {
                abandon.tell().await;
                return Err(Failure::aborted());
            }
        };
        // Answered, or timed out (rmcp has sent `notifications/cancelled` itself).
        abandon.id = None;
        let result = match answer {
            Ok(ServerResult::CallToolResult(result)) => result,
            Ok(_) => {
                return Err(Failure::new(format!(
                    "MCP server `{}` answered tools/call for `{}` with something other than a \
                     tool result",
                    self.link.name(),
                    self.tool
                )));
            }
            Err(ServiceError::Timeout { timeout }) => {
                return Err(Failure::tool_timeout(
                    u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
                ));
            }
            Err(e) => return Err(Failure::new(self.link.why(&e).await)),
        };
        if result.is_error == Some(true) {
            let text = content::text(&result.content);
            return Err(Failure::new(if text.is_empty() {
                format!("MCP server `{}` reported an error", self.link.name())
            } else {
                text
            }));
        }
        self.check_structured(result.structured_content.as_ref())?;
        let blocks = content::into_blocks(result.content, result.structured_content.as_ref());
        let dir = self.link.spool_dir();
        Ok(Json::from_shallow(crate::long::limit(
            blocks,
            dir.as_deref(),
            self.link.name(),
            ctx.exec().call_id(),
        )))
    }

    /// A tool that declares an `outputSchema` must return `structuredContent` that matches it
    /// (the MCP specification's "MUST"); anything else fails the call, saying what is wrong.
    fn check_structured(&self, structured: Option<&Value>) -> Result<(), Failure> {
        let Some(schema) = &self.output_schema else {
            return Ok(());
        };
        let refuse = |what: String| {
            Err(Failure::new(format!(
                "MCP server `{}`: tool `{}` {what}",
                self.link.name(),
                self.tool
            )))
        };
        let Some(value) = structured else {
            return refuse("declares an outputSchema but returned no structuredContent".into());
        };
        let schema = Value::Object((**schema).clone());
        match dsh_core::validate::validate(&schema, value, "structuredContent") {
            Ok(violations) if violations.is_empty() => Ok(()),
            Ok(violations) => refuse(format!(
                "returned structuredContent that does not match its outputSchema: {}",
                violations.join("; ")
            )),
            Err(e) => refuse(format!(
                "declares an outputSchema that cannot be checked: {}",
                e.0
            )),
        }
    }
}

/// Sends `notifications/cancelled` for a request still unanswered when dropped.
struct Abandon {
    peer: Peer<RoleClient>,
    id: Option<RequestId>,
}

/// How long an abandoned call waits for its `notifications/cancelled` to be sent.
const TELL_WITHIN: std::time::Duration = std::time::Duration::from_secs(1);

impl Abandon {
    /// Sends `notifications/cancelled` now, waiting at most [`TELL_WITHIN`] for it to go out.
    async fn tell(&mut self) {
        let Some(id) = self.id.take() else { return };
        let _ = tokio::time::timeout(TELL_WITHIN, cancelled(self.peer.clone(), id)).await;
    }
}

/// Sends `notifications/cancelled` for request `id`; a server already gone is not an error.
async fn cancelled(peer: Peer<RoleClient>, id: RequestId) {
    let cancelled =
        CancelledNotificationParam::new(Some(id), Some("the call was cancelled".to_owned()));
    let _ = peer
        .send_notification(ClientNotification::CancelledNotification(
            Notification::new(cancelled),
        ))
        .await;
}

impl Drop for Abandon {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else { return };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(cancelled(self.peer.clone(), id));
    }
}
