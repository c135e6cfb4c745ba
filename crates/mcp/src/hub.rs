//! What a server's connection hears besides answers: progress of the calls running on it
//! (passed to the progress observer) and `notifications/tools/list_changed` (its tool list read
//! again and re-registered).
//!
//! Guarantees: a progress notification reaches the observer with the call it belongs to (its
//! progress token is the one sent with the call), in the order it was read and before the
//! call's answer (it is taken from the transport as it is read: `in_order.rs`); one for no
//! running call is ignored; a list change is handled off the connection's reading loop, one
//! re-listing at a time.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use rmcp::ClientHandler;
use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::{NotificationContext, RoleClient};

use crate::link::Link;

/// One progress notification of a running call, as the observer sees it.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Progress {
    /// The server's name.
    pub server: String,
    /// The dsh tool name (`mcp__<server>__<tool>`).
    pub tool: String,
    /// The call's id (the model's tool call id).
    pub call_id: String,
    /// The progress so far (grows with each notification).
    pub progress: f64,
    /// The total, when the server knows it.
    pub total: Option<f64>,
    /// What the server says it is doing.
    pub message: Option<String>,
}

/// Receives the progress of calls (see [`McpServer::on_progress`](crate::McpServer::on_progress)).
pub(crate) type ProgressObserver = Arc<dyn Fn(&Progress) + Send + Sync>;

/// Hears that a server's tool list changed (see
/// [`McpServer::on_tools_changed`](crate::McpServer::on_tools_changed)).
pub(crate) type ChangeObserver = Arc<dyn Fn(&str) + Send + Sync>;

/// The call a progress token was sent with.
#[derive(Clone)]
pub(crate) struct Running {
    pub(crate) tool: String,
    pub(crate) call_id: String,
}

/// State shared by a server's connection handler and its link (across restarts).
#[derive(Default)]
pub(crate) struct Hub {
    pub(crate) link: OnceLock<Weak<Link>>,
    running: Mutex<HashMap<ProgressToken, Running>>,
    observer: Mutex<Option<ProgressObserver>>,
    changed: Mutex<Option<ChangeObserver>>,
    /// Held while the list is read again, so two changes do not race to register.
    pub(crate) relisting: tokio::sync::Mutex<()>,
    /// How the server broke the protocol, when that ended its connection.
    broken: Mutex<Option<String>>,
}

impl Hub {
    pub(crate) fn set_observer(&self, observer: ProgressObserver) {
        if let Ok(mut o) = self.observer.lock() {
            *o = Some(observer);
        }
    }

    /// Notes how the server broke the protocol (the connection ends with it).
    pub(crate) fn set_broken(&self, why: String) {
        if let Ok(mut b) = self.broken.lock() {
            *b = Some(why);
        }
    }

    /// How the server broke the protocol on its current connection, if it did.
    pub(crate) fn broken(&self) -> Option<String> {
        self.broken.lock().ok().and_then(|b| b.clone())
    }

    /// Forgets it (a new connection).
    pub(crate) fn mend(&self) {
        if let Ok(mut b) = self.broken.lock() {
            *b = None;
        }
    }

    pub(crate) fn set_change_observer(&self, observer: ChangeObserver) {
        if let Ok(mut o) = self.changed.lock() {
            *o = Some(observer);
        }
    }

    /// Tells the change observer that `server`'s new tool list is installed.
    pub(crate) fn changed(&self, server: &str) {
        let observer = self.changed.lock().ok().and_then(|o| o.clone());
        if let Some(observer) = observer {
            observer(server);
        }
    }

    /// Notes that `token` belongs to a call until the returned guard is dropped.
    pub(crate) fn running(self: &Arc<Self>, token: ProgressToken, call: Running) -> RunningGuard {
        if let Ok(mut r) = self.running.lock() {
            r.insert(token.clone(), call);
        }
        RunningGuard {
            hub: self.clone(),
            token,
        }
    }

    /// Gives a progress notification to the observer, with the call its token belongs to.
    pub(crate) fn progress(&self, server: &str, p: ProgressNotificationParam) {
        let call = self
            .running
            .lock()
            .ok()
            .and_then(|r| r.get(&p.progress_token).cloned());
        let observer = self.observer.lock().ok().and_then(|o| o.clone());
        let (Some(call), Some(observer)) = (call, observer) else {
            return;
        };
        observer(&Progress {
            server: server.to_owned(),
            tool: call.tool,
            call_id: call.call_id,
            progress: p.progress,
            total: p.total,
            message: p.message,
        });
    }

    /// Reads the tool list again, off the caller's task.
    pub(crate) fn list_changed(&self) {
        if let Some(link) = self.link.get().and_then(Weak::upgrade) {
            tokio::spawn(async move { link.relist().await });
        }
    }
}

/// Forgets a call's progress token when dropped.
pub(crate) struct RunningGuard {
    hub: Arc<Hub>,
    token: ProgressToken,
}

impl Drop for RunningGuard {
    fn drop(&mut self) {
        if let Ok(mut r) = self.hub.running.lock() {
            r.remove(&self.token);
        }
    }
}

/// The client side of one connection: hears progress and list changes.
#[derive(Clone)]
pub(crate) struct Client {
    pub(crate) server: Arc<str>,
    pub(crate) hub: Arc<Hub>,
}

/// Progress is not heard here: rmcp calls these handlers in tasks of their own, which may run
/// after the call's answer; the transport gives it to the hub as it is read (`in_order.rs`).
impl ClientHandler for Client {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        tracing::debug!(server = %self.server, "MCP server: tools/list_changed");
        self.hub.list_changed();
    }
}
