//! Which session a call belongs to. The tools resolve an [`FsContext`] (session id and working
//! directory) from the call's agent through [`FsSessions`]: a map from agent id, with a default
//! context for calls without an agent or with an agent that has not been bound.
//!
//! Why a map by agent: a `ToolExecution` carries its agent but no session, and the pipeline must
//! not learn about sessions; the host binds each agent to its session when it creates the agent.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use dsh_core::AgentId;
use parking_lot::RwLock;

/// The session a call runs for: its id (the owner of observations; `None` for no owner) and its
/// working directory (relative paths resolve against it; it should lie inside a root).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FsContext {
    /// The session id, or `None` when the call has no owning session.
    pub session_id: Option<Arc<str>>,
    /// The session's working directory.
    pub cwd: PathBuf,
}

impl FsContext {
    /// A context for session `id` working in `cwd`.
    pub fn new(id: impl Into<Arc<str>>, cwd: impl Into<PathBuf>) -> FsContext {
        FsContext {
            session_id: Some(id.into()),
            cwd: cwd.into(),
        }
    }

    /// A context with no owning session.
    pub fn anonymous(cwd: impl Into<PathBuf>) -> FsContext {
        FsContext {
            session_id: None,
            cwd: cwd.into(),
        }
    }
}

/// Agent-to-session bindings of one tool set. Cloning gives another handle to the same map.
#[derive(Clone)]
pub struct FsSessions {
    inner: Arc<Inner>,
}

struct Inner {
    default: RwLock<FsContext>,
    agents: RwLock<HashMap<AgentId, FsContext>>,
}

impl FsSessions {
    /// Bindings whose default (for calls without a bound agent) is `default`.
    pub fn new(default: FsContext) -> FsSessions {
        FsSessions {
            inner: Arc::new(Inner {
                default: RwLock::new(default),
                agents: RwLock::new(HashMap::new()),
            }),
        }
    }

    /// Replaces the default context.
    pub fn set_default(&self, ctx: FsContext) {
        *self.inner.default.write() = ctx;
    }

    /// Binds `agent`'s calls to `ctx` (replacing an earlier binding).
    pub fn bind(&self, agent: AgentId, ctx: FsContext) {
        self.inner.agents.write().insert(agent, ctx);
    }

    /// Removes `agent`'s binding; its calls fall back to the default.
    pub fn unbind(&self, agent: &AgentId) {
        self.inner.agents.write().remove(agent);
    }

    /// The context of a call by `agent`.
    pub fn context_for(&self, agent: Option<&AgentId>) -> FsContext {
        if let Some(a) = agent
            && let Some(ctx) = self.inner.agents.read().get(a)
        {
            return ctx.clone();
        }
        self.inner.default.read().clone()
    }
}
