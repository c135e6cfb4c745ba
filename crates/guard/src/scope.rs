//! Where a hook applies: to every call, or to the calls of one agent scope and the scopes nested
//! under it.

use dsh_core::AgentId;

/// The reach of a listener, wrapper, observer or guard.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Every call.
    Global,
    /// Calls whose agent is this one or nested under it.
    Agent(AgentId),
}

impl Scope {
    /// Whether a call whose scope chain is `chain` (nearest first) is reached.
    pub(crate) fn reaches(&self, chain: &[AgentId]) -> bool {
        match self {
            Scope::Global => true,
            Scope::Agent(a) => chain.contains(a),
        }
    }
}

impl From<Option<AgentId>> for Scope {
    fn from(a: Option<AgentId>) -> Scope {
        a.map_or(Scope::Global, Scope::Agent)
    }
}
