//! The request side of the seam: a provider-neutral [`Request`] (messages, tools in the caller's
//! order, options) that every adapter translates to its wire format.
//!
//! Guarantees: tools reach the wire in the order given here; a tool call's `arguments` are the
//! raw text the model produced and reach an OpenAI-compatible API as that exact string; a tool
//! result is one message per call id, in the order given.

use std::sync::Arc;

use dsh_core::{Content, ToolSchema};
use serde_json::{Map, Value};

/// One model request: everything an adapter needs to build its HTTP body.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    /// The model id as the provider knows it (`deepseek-chat`, `claude-sonnet-4-5`).
    pub model: String,
    /// The conversation, oldest first.
    pub messages: Vec<Message>,
    /// The tools the model may call, in the order they are sent.
    pub tools: Vec<ToolSchema>,
    /// Sampling and limits.
    pub options: Options,
}

impl Request {
    /// A request for `model` with `messages`, no tools and default options.
    pub fn new(model: impl Into<String>, messages: Vec<Message>) -> Request {
        Request {
            model: model.into(),
            messages,
            tools: Vec::new(),
            options: Options::default(),
        }
    }

    /// The same request with `tools`, in this order.
    pub fn with_tools(mut self, tools: Vec<ToolSchema>) -> Request {
        self.tools = tools;
        self
    }

    /// The same request with `options`.
    pub fn with_options(mut self, options: Options) -> Request {
        self.options = options;
        self
    }
}

/// Sampling and limits. `None` leaves the provider's default.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Options {
    /// The most output tokens (Anthropic requires one: the adapter's default is used if unset).
    pub max_tokens: Option<u32>,
    /// Sampling temperature.
    pub temperature: Option<f64>,
    /// Nucleus sampling.
    pub top_p: Option<f64>,
    /// Stop sequences.
    pub stop: Vec<String>,
    /// Reasoning effort or budget, where the provider takes one.
    pub reasoning: Option<Reasoning>,
    /// Whether the model may call several tools in one message (`parallel_tool_calls`;
    /// Anthropic `disable_parallel_tool_use`). `None` leaves the default.
    pub parallel_tool_calls: Option<bool>,
    /// Provider-specific members merged into the top level of the body last (OpenRouter's
    /// `provider`, vLLM's `chat_template_kwargs`, ...).
    pub extra: Map<String, Value>,
}

/// How much the model should reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reasoning {
    /// An effort level (OpenAI-compatible `reasoning_effort`).
    Effort(Effort),
    /// A token budget (Anthropic `thinking: {type: enabled, budget_tokens}`).
    Budget(u32),
}

/// A reasoning effort level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Effort {
    /// `low`.
    Low,
    /// `medium`.
    Medium,
    /// `high`.
    High,
}

impl Effort {
    /// The wire word.
    pub fn as_str(self) -> &'static str {
        match self {
            Effort::Low => "low",
            Effort::Medium => "medium",
            Effort::High => "high",
        }
    }
}

/// One message of the conversation, provider-neutral.
#[derive(Clone, Debug, PartialEq)]
pub enum Message {
    /// Instructions. OpenAI-compatible: a `system` message in place; Anthropic: joined into the
    /// top-level `system` text.
    System {
        /// The text.
        text: Arc<str>,
    },
    /// What the user (or an injected context) says: text and image blocks.
    User {
        /// The blocks; blocks of other kinds are sent as `[<type> content]` text.
        content: Content,
    },
    /// What the model said, as it was assembled.
    Assistant {
        /// Text, reasoning and tool calls, in order.
        blocks: Vec<AssistantBlock>,
    },
    /// The result of one tool call.
    ToolResult {
        /// The call it answers.
        call_id: Arc<str>,
        /// What the model sees.
        content: Content,
        /// Whether the call failed.
        is_error: bool,
    },
}

impl Message {
    /// A system message.
    pub fn system(text: impl Into<Arc<str>>) -> Message {
        Message::System { text: text.into() }
    }

    /// A user message of one text block.
    pub fn user(text: impl Into<Arc<str>>) -> Message {
        Message::User {
            content: dsh_core::text_content(text),
        }
    }

    /// A tool result of one text block.
    pub fn tool_result(call_id: impl Into<Arc<str>>, text: impl Into<Arc<str>>) -> Message {
        Message::ToolResult {
            call_id: call_id.into(),
            content: dsh_core::text_content(text),
            is_error: false,
        }
    }
}

/// One block of an assistant message.
#[derive(Clone, Debug, PartialEq)]
pub enum AssistantBlock {
    /// Visible text.
    Text {
        /// The text.
        text: String,
    },
    /// Reasoning, with what the provider needs to accept it back.
    Reasoning {
        /// The reasoning text (empty for a redacted block).
        text: String,
        /// Anthropic's signature of the thinking block.
        signature: Option<String>,
        /// Anthropic's encrypted `redacted_thinking` data.
        redacted: Option<String>,
    },
    /// A tool call.
    ToolCall(ToolCall),
}

/// A tool call as the model made it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolCall {
    /// The provider's call id.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The raw argument text the model produced, byte for byte.
    pub arguments: String,
}
