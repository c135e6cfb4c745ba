//! Where sub-call records go: the session that owns a `run_code` call ([`SessionFor`]) and the
//! `tools/code-dispatch-log` waterfall that shapes the logged content of each settled sub-call
//! ([`DispatchLog`]).
//!
//! The host provides the session through [`crate::CodeModeConfig::sessions`]: a resolver from
//! the outer `run_code` execution (its agent, call id) to the session its turn is being written
//! to; `None` logs nothing (CODE-52). No turn or step number is needed: the dispatch records
//! carry the call ids, and the session's invariant checker verifies they land inside an open
//! turn.

use std::collections::HashMap;
use std::sync::Arc;

use dsh_core::{AgentId, Content, ToolExecution, ToolResult};
use dsh_guard::Waterfall;
use dsh_session::Session;
use parking_lot::RwLock;

/// What a `tools/code-dispatch-log` listener sees: the settled sub-call and its frozen result.
pub struct DispatchRecord {
    /// The sub-call (id `<parent>:code:<n>`, parent token, root call id).
    pub exec: Arc<ToolExecution>,
    /// Its authoritative result.
    pub result: Arc<ToolResult>,
}

/// The `tools/code-dispatch-log` waterfall: the first listener that answers decides the content
/// logged in `tool/code-dispatch`; the default is the sub-call's own content, verbatim. A
/// panicking listener is skipped.
pub type DispatchLog = Waterfall<DispatchRecord, Content>;

/// The hook point's name.
pub const DISPATCH_LOG_POINT: &str = "tools/code-dispatch-log";

/// Resolves the session a `run_code` call's sub-call records are appended to.
pub trait SessionFor: Send + Sync + 'static {
    /// The session of the outer `run_code` execution, or `None` to log nothing.
    fn session_for(&self, exec: &ToolExecution) -> Option<Session>;
}

impl<F> SessionFor for F
where
    F: Fn(&ToolExecution) -> Option<Session> + Send + Sync + 'static,
{
    fn session_for(&self, exec: &ToolExecution) -> Option<Session> {
        self(exec)
    }
}

/// Sessions keyed by the calling agent (`None` is the key of calls without an agent): the
/// simplest resolver for a host that drives one session per agent.
#[derive(Clone, Default)]
pub struct AgentSessions {
    map: Arc<RwLock<HashMap<Option<AgentId>, Session>>>,
}

impl AgentSessions {
    /// An empty map.
    pub fn new() -> AgentSessions {
        AgentSessions::default()
    }

    /// Routes the records of `agent`'s runs to `session` (replacing any previous one).
    pub fn insert(&self, agent: Option<AgentId>, session: Session) {
        self.map.write().insert(agent, session);
    }

    /// Stops logging `agent`'s runs.
    pub fn remove(&self, agent: Option<&AgentId>) {
        self.map.write().remove(&agent.cloned());
    }
}

impl SessionFor for AgentSessions {
    fn session_for(&self, exec: &ToolExecution) -> Option<Session> {
        self.map.read().get(&exec.agent().cloned()).cloned()
    }
}
