//! Typed policy decisions: what a pre-execute or post-execute listener may return (spec P1, F1).

use std::sync::Arc;

use crate::content::Content;
use crate::context::ContextMessage;
use crate::json::Json;

/// A `tools/pre-execute` decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PreToolDecision {
    /// Let the call proceed (to approval-free guards and dispatch).
    Allow,
    /// Refuse the call; the reason becomes the failure message.
    Deny {
        /// Why.
        reason: Arc<str>,
    },
    /// Ask a human through the approval service.
    Ask {
        /// Why, shown to the approver.
        reason: Option<Arc<str>>,
    },
}

impl PreToolDecision {
    /// A denial.
    pub fn deny(reason: impl Into<Arc<str>>) -> PreToolDecision {
        PreToolDecision::Deny {
            reason: reason.into(),
        }
    }
    /// An ask with a reason.
    pub fn ask(reason: impl Into<Arc<str>>) -> PreToolDecision {
        PreToolDecision::Ask {
            reason: Some(reason.into()),
        }
    }
}

/// What an accept may replace: the content, or the value (never both, FIN-04).
#[derive(Clone, Debug, PartialEq)]
pub enum Replacement {
    /// New content; value and meta are kept.
    Content(Content),
    /// A new value; content and meta are recomputed from it (successes only).
    Value(Json),
}

/// A `tools/post-execute` decision.
#[derive(Clone, Debug, PartialEq)]
pub enum PostToolDecision {
    /// Keep the result, optionally replacing content or value, optionally adding contexts.
    Accept {
        /// What to replace, if anything.
        replace: Option<Replacement>,
        /// Contexts to add.
        contexts: Vec<ContextMessage>,
    },
    /// Turn the result into a failure whose content is the feedback.
    Block {
        /// What the model sees instead.
        feedback: Content,
        /// Contexts to add (a block keeps only its own).
        contexts: Vec<ContextMessage>,
    },
}

impl PostToolDecision {
    /// Accept unchanged.
    pub fn accept() -> PostToolDecision {
        PostToolDecision::Accept {
            replace: None,
            contexts: Vec::new(),
        }
    }
    /// Block with feedback.
    pub fn block(feedback: Content) -> PostToolDecision {
        PostToolDecision::Block {
            feedback,
            contexts: Vec::new(),
        }
    }
    /// The contexts the decision carries.
    pub fn contexts(&self) -> &[ContextMessage] {
        match self {
            PostToolDecision::Accept { contexts, .. }
            | PostToolDecision::Block { contexts, .. } => contexts,
        }
    }
    /// The decision with `ctx` put in front of its contexts.
    pub fn prepend_context(mut self, ctx: ContextMessage) -> PostToolDecision {
        match &mut self {
            PostToolDecision::Accept { contexts, .. }
            | PostToolDecision::Block { contexts, .. } => contexts.insert(0, ctx),
        }
        self
    }
    /// The decision with `ctx` added after its contexts.
    pub fn push_context(mut self, ctx: ContextMessage) -> PostToolDecision {
        match &mut self {
            PostToolDecision::Accept { contexts, .. }
            | PostToolDecision::Block { contexts, .. } => contexts.push(ctx),
        }
        self
    }
}
