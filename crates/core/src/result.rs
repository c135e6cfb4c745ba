//! The result of one call: `{isError, content, value?, error?, meta?, additionalContexts?,
//! concludesTurn?}` in the reference shape.
//!
//! Guarantees: a failure never has a value or `concludesTurn`; a failure's content is one text
//! block `Error: <message>` unless the author (a post-execute block, a wrapper) supplied its own;
//! fields are shared (`Arc`), so passing a result between stages copies nothing.

use std::sync::Arc;

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

use crate::content::{Content, ContentBlock};
use crate::context::ContextMessage;
use crate::execution::ExecutionToken;
use crate::failure::Failure;
use crate::json::Json;

/// A call's result.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolResult {
    content: Content,
    value: Option<Json>,
    /// Boxed: a failure is rare and large, and a result moves between the stages by value (a
    /// smaller one is copied inline instead of through `memcpy`).
    error: Option<Box<Failure>>,
    meta: Option<Json>,
    contexts: Arc<[ContextMessage]>,
    concludes_turn: bool,
    /// Set when the registry rendered this success for that execution; a result without the
    /// matching stamp (authored by a wrapper, or minted for another call) is re-validated.
    rendered_for: Option<ExecutionToken>,
}

fn no_contexts() -> Arc<[ContextMessage]> {
    // Shared: most results carry no contexts, and cloning is cheaper than allocating.
    static NONE: std::sync::LazyLock<Arc<[ContextMessage]>> =
        std::sync::LazyLock::new(|| Arc::from(Vec::new()));
    NONE.clone()
}

impl ToolResult {
    /// A success carrying a canonical value; its content is rendered by the registry.
    pub fn success(value: Json) -> ToolResult {
        ToolResult {
            content: Arc::from(Vec::new()),
            value: Some(value),
            error: None,
            meta: None,
            contexts: no_contexts(),
            concludes_turn: false,
            rendered_for: None,
        }
    }

    /// A failure whose content is `Error: <message>`.
    pub fn failure(failure: Failure) -> ToolResult {
        let content: Content = Arc::from(vec![ContentBlock::text(format!(
            "Error: {}",
            failure.message()
        ))]);
        ToolResult::failure_with_content(failure, content)
    }

    /// A failure with content of the author's choosing, kept verbatim.
    pub fn failure_with_content(failure: Failure, content: Content) -> ToolResult {
        ToolResult {
            content,
            value: None,
            error: Some(Box::new(failure)),
            meta: None,
            contexts: no_contexts(),
            concludes_turn: false,
            rendered_for: None,
        }
    }

    /// A rendered success (the registry's output stage).
    pub fn rendered(
        token: ExecutionToken,
        value: Json,
        content: Content,
        meta: Option<Json>,
    ) -> ToolResult {
        ToolResult {
            content,
            value: Some(value),
            error: None,
            meta,
            contexts: no_contexts(),
            concludes_turn: false,
            rendered_for: Some(token),
        }
    }

    /// Replaces the content (keeps value, meta, contexts; keeps the render stamp only for failures).
    pub fn with_content(mut self, content: Content) -> ToolResult {
        self.content = content;
        self
    }

    /// Sets or clears the presentation meta.
    pub fn with_meta(mut self, meta: Option<Json>) -> ToolResult {
        self.meta = meta;
        self
    }

    /// Replaces the additional contexts.
    pub fn with_contexts(mut self, contexts: Arc<[ContextMessage]>) -> ToolResult {
        self.contexts = contexts;
        self
    }

    /// Appends contexts after the existing ones.
    pub fn append_contexts(mut self, more: &[ContextMessage]) -> ToolResult {
        if !more.is_empty() {
            let mut v: Vec<ContextMessage> = self.contexts.to_vec();
            v.extend_from_slice(more);
            self.contexts = Arc::from(v);
        }
        self
    }

    /// Puts contexts in front of the existing ones.
    pub fn prepend_contexts(mut self, first: &[ContextMessage]) -> ToolResult {
        if !first.is_empty() {
            let mut v: Vec<ContextMessage> = first.to_vec();
            v.extend_from_slice(&self.contexts);
            self.contexts = Arc::from(v);
        }
        self
    }

    /// Marks (or unmarks) a success as concluding the turn; failures never carry the marker.
    pub fn with_concludes_turn(mut self, yes: bool) -> ToolResult {
        self.concludes_turn = yes && self.error.is_none();
        self
    }

    /// Whether the result is a failure.
    pub fn is_error(&self) -> bool {
        self.error.is_some()
    }
    /// The content the model sees.
    pub fn content(&self) -> &Content {
        &self.content
    }
    /// The canonical value (successes only; never logged, spec I2).
    pub fn value(&self) -> Option<&Json> {
        self.value.as_ref()
    }
    /// The failure, if any.
    pub fn error(&self) -> Option<&Failure> {
        self.error.as_deref()
    }
    /// Presentation metadata for UIs.
    pub fn meta(&self) -> Option<&Json> {
        self.meta.as_ref()
    }
    /// The additional contexts, in delivery order.
    pub fn additional_contexts(&self) -> &Arc<[ContextMessage]> {
        &self.contexts
    }
    /// Whether a success asks the loop to end the turn after this batch.
    pub fn concludes_turn(&self) -> bool {
        self.concludes_turn
    }
    /// The execution this success was rendered for by the registry, if any.
    pub fn rendered_for(&self) -> Option<ExecutionToken> {
        self.rendered_for
    }
    /// First text block, for convenience.
    pub fn first_text(&self) -> Option<&str> {
        self.content.first().and_then(ContentBlock::as_text)
    }
}

impl Serialize for ToolResult {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("content", &*self.content)?;
        m.serialize_entry("isError", &self.is_error())?;
        if let Some(v) = &self.value {
            m.serialize_entry("value", v)?;
        }
        if let Some(e) = &self.error {
            m.serialize_entry("error", e)?;
        }
        if let Some(meta) = &self.meta {
            m.serialize_entry("meta", meta)?;
        }
        if !self.contexts.is_empty() {
            m.serialize_entry("additionalContexts", &*self.contexts)?;
        }
        if self.concludes_turn {
            m.serialize_entry("concludesTurn", &true)?;
        }
        m.end()
    }
}
