//! Shared fixtures: the echo tool, constant-reply tools, and the part of one call that dsh-core
//! owns (lookup, argument check, body, output stage). The staged end-to-end pipeline is tested in
//! dsh-scheduler.

use std::sync::Arc;

use dsh_core::{
    AgentId, Arguments, BodyEffects, Failure, Json, Signal, ToolContext, ToolDefinition,
    ToolExecution, ToolExecutionInput, ToolOutput, ToolRegistry, ToolResult,
};
use serde_json::{Value, json};

/// The echo fixture: optional string `text`, string output, returns `text` or `""`.
pub fn echo() -> ToolDefinition {
    ToolDefinition::builder("echo", "Echo the text back")
        .validated_parameters(Json::from_shallow(
            json!({"type": "object", "properties": {"text": {"type": "string"}}}),
        ))
        .output(ToolOutput::string())
        .execute(|ctx: ToolContext| async move {
            let text = ctx
                .arguments()
                .json()
                .and_then(|j| {
                    j.value()
                        .get("text")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                })
                .unwrap_or_default();
            Ok(Json::string(text))
        })
        .build()
        .expect("echo builds")
}

/// A tool named `name` that ignores its arguments and returns the string `reply`.
pub fn reply(name: &str, reply: &str) -> ToolDefinition {
    let reply = reply.to_owned();
    ToolDefinition::builder(name, &format!("the {name} tool"))
        .output(ToolOutput::string())
        .execute(move |_ctx: ToolContext| {
            let reply = reply.clone();
            async move { Ok(Json::string(reply)) }
        })
        .build()
        .expect("reply tool builds")
}

/// A tool named `name` that returns `ran:<name>`.
pub fn ran(name: &str) -> ToolDefinition {
    reply(name, &format!("ran:{name}"))
}

/// Registers and keeps `def` globally.
pub fn keep(reg: &ToolRegistry, def: ToolDefinition) {
    reg.register(def).expect("registers").keep();
}

/// Registers and keeps `def` in `agent`'s scope.
pub fn keep_scoped(reg: &ToolRegistry, agent: &AgentId, def: ToolDefinition) {
    reg.register_scoped(agent, def).expect("registers").keep();
}

/// A frozen execution of `name` with `args`.
pub fn exec(name: &str, args: Arguments, agent: Option<&AgentId>) -> Arc<ToolExecution> {
    let mut input = ToolExecutionInput::new("c1", name, args);
    input.agent = agent.cloned();
    ToolExecution::new(input)
}

/// A body context for `exec` observing `signal`.
pub fn ctx(exec: Arc<ToolExecution>, signal: Signal) -> ToolContext {
    ToolContext::new(exec, signal, Arc::new(BodyEffects::default()))
}

/// The part of one call dsh-core owns: resolve `name` for `agent` (unknown or out of view is
/// `UNKNOWN_TOOL`), check arguments, run the body, validate and render its value.
pub async fn call(
    reg: &ToolRegistry,
    name: &str,
    agent: Option<&AgentId>,
    args: Arguments,
) -> ToolResult {
    let Some(def) = reg.get(name, agent) else {
        return ToolResult::failure(Failure::unknown_tool(name));
    };
    call_def(&def, args, agent).await
}

/// Runs a definition directly (argument check, body, output stage).
pub async fn call_def(
    def: &ToolDefinition,
    args: Arguments,
    agent: Option<&AgentId>,
) -> ToolResult {
    if let Err(f) = def.check_arguments(&args) {
        return ToolResult::failure(f);
    }
    let exec = exec(def.name(), args, agent);
    let token = exec.token();
    match def.run_body(ctx(exec, Signal::never())).await {
        Ok(value) => def
            .render_success(token, value, true)
            .unwrap_or_else(ToolResult::failure),
        Err(f) => ToolResult::failure(f),
    }
}

/// Arguments from a JSON literal.
pub fn args(v: Value) -> Arguments {
    Arguments::from_value(v).expect("shallow arguments")
}

/// The result as reference-shaped JSON.
pub fn shape(r: &ToolResult) -> Value {
    serde_json::to_value(r).expect("results serialize")
}

/// The first text block of a result.
pub fn text(r: &ToolResult) -> String {
    r.first_text().unwrap_or_default().to_owned()
}

/// Sorted names `agent` sees.
pub fn sorted_names(reg: &ToolRegistry, agent: Option<&AgentId>) -> Vec<String> {
    let mut n = reg.names(agent);
    n.sort();
    n
}
