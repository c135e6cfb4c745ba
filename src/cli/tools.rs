//! `dsh tools`: the tool definitions a model would be sent under the current policy and mode,
//! in the shape of the API a user's own model loop passes them to.

use clap::{Args, ValueEnum};
use dsh::core::ToolSchema;
use dsh::{Approvals, Harness};
use serde_json::{Value, json};

use super::run::ModeArg;
use super::{Exit, out};

/// The shape of the printed definitions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ToolsFormat {
    /// Chat Completions `tools`: `[{type: "function", function: {name, description, parameters}}]`.
    Openai,
    /// Messages API `tools`: `[{name, description, input_schema}]`.
    Anthropic,
    /// An MCP `tools/list` result: `{tools: [{name, description, inputSchema}]}`.
    Mcp,
}

#[derive(Args, Debug)]
pub struct ToolsArgs {
    /// The shape of the definitions.
    #[arg(long, value_enum, default_value_t = ToolsFormat::Openai)]
    pub format: ToolsFormat,
    /// Print instead the system-prompt text that goes with them (Code Mode's `tools` SDK under
    /// `--mode code|both`; nothing under `native`).
    #[arg(long)]
    pub system: bool,
    #[command(flatten)]
    pub pipeline: super::options::PipelineArgs,
    /// Tool presentation mode (overrides the policy).
    #[arg(long, value_enum)]
    pub mode: Option<ModeArg>,
    /// Include the `echo`, `sleep` and `fail` tools.
    #[arg(long)]
    pub demo_tools: bool,
}

/// Prints the definitions (or, with `--system`, the prompt text) on stdout, and the harness's
/// warnings (an MCP server that did not start) on stderr; nothing is written to disk.
pub async fn tools(args: ToolsArgs) -> Result<i32, Exit> {
    let policy = super::options::load_policy(
        args.pipeline.policy.as_deref(),
        None,
        args.mode,
        args.pipeline.preset,
    )?;
    Harness::supports(&policy).map_err(|e| Exit::usage(e.to_string()))?;
    let workspace = super::options::workspace_or_cwd(args.pipeline.workspace.as_ref())?;
    let workspace = workspace
        .canonicalize()
        .map_err(|e| Exit::usage(format!("workspace {}: {e}", workspace.display())))?;
    let session = dsh::session::Session::in_memory("dsh-tools");
    let build = Harness::builder(session)
        .policy(policy)
        .approvals(Approvals::NoChannel)
        .demo_tools(args.demo_tools)
        .bash(dsh::BashOptions::default())
        .workspace(&workspace)
        .settings(args.pipeline.settings.clone())
        .workspace_trusted(super::trust::decide(
            &workspace,
            args.pipeline.trust_workspace,
        )?)
        .build();
    // The MCP servers start here: a signal meanwhile ends them and stops dsh.
    let harness = super::signals::while_starting(build)
        .await
        .map_err(|_signal| Exit {
            code: 130,
            message: None,
        })?
        .map_err(|e| match e {
            dsh::HarnessError::Policy(_)
            | dsh::HarnessError::Unsupported(_)
            | dsh::HarnessError::Hooks(_) => Exit::usage(e.to_string()),
            other => Exit::internal(other.to_string()),
        })?;
    // As `dsh run` says them: an MCP server that did not start is why its tools are missing.
    for w in harness.warnings() {
        err_line!("dsh: warning: {}", super::render::sanitize(w));
    }
    let agent = harness.agent().clone();
    let code = code_mode_offer(&harness, &agent)?;
    if args.system {
        if let Some((_, system)) = &code {
            out(system);
        }
        return Ok(0);
    }
    let mut schemas = match code {
        Some((tools, _)) => tools,
        None => harness.registry().schemas(Some(&agent)),
    };
    schemas.retain(|s| !harness.denies_every_call(&s.name));
    let printed = shape(&schemas, args.format);
    let text = serde_json::to_string_pretty(&printed)
        .map_err(|e| Exit::internal(format!("printing the tools: {e}")))?;
    out(&text);
    Ok(0)
}

/// The definitions in `format`'s shape.
fn shape(schemas: &[ToolSchema], format: ToolsFormat) -> Value {
    let each = schemas.iter().map(|s| {
        let (name, description, schema) = (&*s.name, &*s.description, s.parameters.value());
        match format {
            ToolsFormat::Openai => json!({"type": "function", "function": {
                "name": name, "description": description, "parameters": schema}}),
            ToolsFormat::Anthropic => {
                json!({"name": name, "description": description, "input_schema": schema})
            }
            ToolsFormat::Mcp => {
                json!({"name": name, "description": description, "inputSchema": schema})
            }
        }
    });
    let list: Vec<Value> = each.collect();
    match format {
        ToolsFormat::Mcp => json!({ "tools": list }),
        _ => Value::Array(list),
    }
}

/// What Code Mode offers the model, when the mode shows `run_code`: its tools and the system text
/// that goes with them.
#[cfg(feature = "code-mode")]
pub fn code_mode_offer(
    harness: &Harness,
    agent: &dsh::core::AgentId,
) -> Result<Option<(Vec<dsh::core::ToolSchema>, String)>, Exit> {
    let Some(code) = harness.code_mode() else {
        return Ok(None);
    };
    let tools = code
        .tools(Some(agent))
        .map_err(|e| Exit::internal(e.to_string()))?;
    let assembly = code
        .assemble(Some(agent))
        .map_err(|e| Exit::internal(e.to_string()))?;
    let text: Vec<&str> = assembly.sections.iter().map(|s| s.text.as_str()).collect();
    Ok(Some((tools, text.join("\n\n"))))
}

/// Without Code Mode in the build, the model is offered the native tools only.
#[cfg(not(feature = "code-mode"))]
pub fn code_mode_offer(
    _harness: &Harness,
    _agent: &dsh::core::AgentId,
) -> Result<Option<(Vec<dsh::core::ToolSchema>, String)>, Exit> {
    Ok(None)
}
