//! What an agent asks its model with: the provider, the model, the system prompt, the tools'
//! order, request options and the limits of a turn.
//!
//! Guarantees: the tools a request carries are every tool the agent sees, the configured order
//! first and the rest in lexicographic order, whatever order they were registered in (REG-81..83);
//! a configured name that is not registered is an error before any request (REG-84).

use std::sync::Arc;
use std::time::Duration;

use dsh_core::{AgentId, ToolSchema};
use dsh_model::{Options, Provider};
use serde_json::{Value, json};

use crate::error::AgentError;

/// Limits of one turn; the turn that reaches one ends with reason `{kind: "limit", limit}`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    /// At most this many steps (model requests) per turn (`limit: "steps"`).
    pub max_steps: Option<u32>,
    /// At most this many output tokens per turn, as the provider reports them
    /// (`limit: "tokens"`).
    pub max_output_tokens: Option<u64>,
    /// At most this long per turn, from `turn/start` (`limit: "wall-time"`).
    pub wall_time: Option<Duration>,
}

/// The tools a request offers the model, when not every tool the agent sees (Code Mode's
/// `run_code` alone, say, or the tools minus those the rules deny outright). Called once per
/// request with the agent's id.
pub type ToolOffer = Arc<dyn Fn(Option<&AgentId>) -> Vec<ToolSchema> + Send + Sync>;

/// An agent's model configuration.
#[derive(Clone)]
pub struct AgentConfig {
    /// The provider the requests go to.
    pub provider: Arc<dyn Provider>,
    /// The model's name, as the provider knows it.
    pub model: String,
    /// The system prompt, sent first in every request and logged in `request/header`.
    pub system: Option<String>,
    /// Tools to list first, in this order; the rest follow in lexicographic order.
    pub tool_order: Vec<String>,
    /// Sampling and reasoning options.
    pub options: Options,
    /// Limits of each turn.
    pub limits: Limits,
    /// Most tool bodies of one step running at once (`None`: the step scheduler's default).
    pub max_parallel: Option<usize>,
    /// The tools offered (`None`: every tool the agent sees in the registry).
    pub tools: Option<ToolOffer>,
}

impl std::fmt::Debug for AgentConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentConfig")
            .field("provider", &self.provider.name())
            .field("model", &self.model)
            .field("tool_order", &self.tool_order)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl AgentConfig {
    /// A configuration for `model` on `provider`, with no system prompt, options or limits.
    pub fn new(provider: Arc<dyn Provider>, model: impl Into<String>) -> AgentConfig {
        AgentConfig {
            provider,
            model: model.into(),
            system: None,
            tool_order: Vec::new(),
            options: Options::default(),
            limits: Limits::default(),
            max_parallel: None,
            tools: None,
        }
    }

    /// Sets the system prompt.
    pub fn with_system(mut self, system: impl Into<String>) -> AgentConfig {
        self.system = Some(system.into());
        self
    }

    /// Sets the tools listed first, in order.
    pub fn with_tool_order<S: Into<String>>(
        mut self,
        order: impl IntoIterator<Item = S>,
    ) -> AgentConfig {
        self.tool_order = order.into_iter().map(Into::into).collect();
        self
    }

    /// Sets the request options.
    pub fn with_options(mut self, options: Options) -> AgentConfig {
        self.options = options;
        self
    }

    /// Sets the limits of each turn.
    pub fn with_limits(mut self, limits: Limits) -> AgentConfig {
        self.limits = limits;
        self
    }

    /// Sets how many tool bodies of one step may run at once.
    pub fn with_max_parallel(mut self, n: usize) -> AgentConfig {
        self.max_parallel = Some(n);
        self
    }

    /// Offers the model the tools `offer` returns instead of every registered one (a call to
    /// a tool not offered still goes through the pipeline, which decides about it).
    pub fn with_tool_offer(
        mut self,
        offer: impl Fn(Option<&AgentId>) -> Vec<ToolSchema> + Send + Sync + 'static,
    ) -> AgentConfig {
        self.tools = Some(Arc::new(offer));
        self
    }

    /// The tools a request of `agent` offers, before ordering: the offer when one is set,
    /// else every tool `registry` shows the agent.
    pub fn offered(
        &self,
        registry: &dsh_core::ToolRegistry,
        agent: Option<&AgentId>,
    ) -> Vec<ToolSchema> {
        match &self.tools {
            Some(offer) => offer(agent),
            None => registry.schemas(agent),
        }
    }

    /// `schemas` in request order: the configured order first, the rest lexicographic.
    pub fn order_tools(&self, mut schemas: Vec<ToolSchema>) -> Result<Vec<ToolSchema>, AgentError> {
        schemas.sort_by(|a, b| a.name.cmp(&b.name));
        let mut ordered = Vec::with_capacity(schemas.len());
        for name in &self.tool_order {
            let Some(at) = schemas.iter().position(|s| &*s.name == name.as_str()) else {
                if ordered
                    .iter()
                    .any(|s: &ToolSchema| &*s.name == name.as_str())
                {
                    continue;
                }
                return Err(AgentError::UnknownToolInOrder(name.clone()));
            };
            ordered.push(schemas.remove(at));
        }
        ordered.extend(schemas);
        Ok(ordered)
    }

    /// The `request/header` data of a request with `tools` and the system prompt `system` (the
    /// reference shape: `{config: {provider, model, ...options}, system, tools}`; the caller
    /// adds the reason).
    pub fn header(&self, tools: &[ToolSchema], system: Option<&str>) -> Value {
        let mut config = serde_json::Map::new();
        config.insert("provider".into(), self.provider.name().into());
        config.insert("model".into(), self.model.as_str().into());
        if let Some(max) = self.options.max_tokens {
            config.insert("maxTokens".into(), max.into());
        }
        if let Some(t) = self.options.temperature {
            config.insert("temperature".into(), t.into());
        }
        let tools: Vec<Value> = tools
            .iter()
            .map(|t| {
                json!({
                    "name": &*t.name,
                    "description": &*t.description,
                    "inputSchema": t.parameters.value(),
                })
            })
            .collect();
        json!({
            "config": config,
            "system": system.unwrap_or(""),
            "tools": tools,
        })
    }
}
