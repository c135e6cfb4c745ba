//! The policy file (TOML): pool size, presentation mode, approval policy, permission rules and
//! per-tool timeouts. Everything is validated when the file is loaded; an error names the key
//! and its line.
//!
//! ```toml
//! max_parallel_tool_calls = 4
//! mode = "native"            # native | code | both
//! approval = "ask"           # ask | never
//! # preset = "workspace-write"  # read-only | workspace-write | danger-full-access (feature
//! #                             # `bash`): sets the sandbox mode and the approval policy together
//!
//! [permissions]
//! allow = ["read", "glob", "grep"]
//! ask = ["write", "edit"]
//! deny = ["write(secrets/*)"]
//! default = "ask"
//!
//! [tools.sleep]
//! timeout_ms = 500
//! ```

use std::collections::BTreeMap;
use std::path::Path;

use dsh_core::ToolRegistry;
use dsh_guard::{ApprovalPolicy, PermissionRules};
use serde::Deserialize;

/// How tools are presented to the model (spec CM5).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// Every tool is sent to the model.
    #[default]
    Native,
    /// Only `run_code`.
    Code,
    /// Both.
    Both,
}

impl Mode {
    /// Parses `native`, `code` or `both`.
    pub fn parse(s: &str) -> Option<Mode> {
        match s {
            "native" => Some(Mode::Native),
            "code" => Some(Mode::Code),
            "both" => Some(Mode::Both),
            _ => None,
        }
    }
    /// The mode's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Native => "native",
            Mode::Code => "code",
            Mode::Both => "both",
        }
    }
}

/// A bad policy file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// The file could not be read.
    #[error("policy file {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// A key or value is wrong.
    #[error("policy file{}: line {line}: {message}", path.as_deref().map(|p| format!(" {p}")).unwrap_or_default())]
    Invalid {
        /// The file, when loaded from one.
        path: Option<String>,
        /// 1-based line.
        line: usize,
        /// What is wrong, naming the key.
        message: String,
    },
    /// A permission rule is wrong.
    #[error("policy file{}: {source}", path.as_deref().map(|p| format!(" {p}")).unwrap_or_default())]
    Permissions {
        /// The file, when loaded from one.
        path: Option<String>,
        /// The rule error (names the rule and line).
        source: dsh_guard::GuardError,
    },
}

/// A loaded, validated policy.
#[derive(Clone, Debug)]
pub struct Policy {
    /// `max_parallel_tool_calls` (default 10).
    pub max_parallel_tool_calls: usize,
    /// `mode` (default native).
    pub mode: Mode,
    /// `approval` (default ask).
    pub approval: ApprovalPolicy,
    /// `[tools.<name>] timeout_ms` overrides.
    pub tool_timeouts: BTreeMap<String, u64>,
    /// `preset`: the permission preset (sandbox mode and approval together); `None` when not
    /// chosen (the `bash` tool then runs in `workspace-write` under `approval`).
    #[cfg(feature = "bash")]
    pub preset: Option<dsh_tool_bash::Preset>,
    /// `[mcp.servers.<name>]`: the MCP servers whose tools are offered as `mcp__<name>__<tool>`.
    #[cfg(feature = "mcp")]
    pub mcp_servers: BTreeMap<String, dsh_mcp::ServerConfig>,
    has_permissions: bool,
    text: String,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            max_parallel_tool_calls: dsh_scheduler::DEFAULT_MAX_PARALLEL,
            mode: Mode::Native,
            approval: ApprovalPolicy::Ask,
            tool_timeouts: BTreeMap::new(),
            #[cfg(feature = "bash")]
            preset: None,
            #[cfg(feature = "mcp")]
            mcp_servers: BTreeMap::new(),
            has_permissions: false,
            text: String::new(),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    max_parallel_tool_calls: Option<toml::Spanned<toml::Value>>,
    mode: Option<toml::Spanned<String>>,
    approval: Option<toml::Spanned<String>>,
    preset: Option<toml::Spanned<String>>,
    permissions: Option<toml::Value>,
    #[serde(default)]
    tools: BTreeMap<String, ToolTable>,
    mcp: Option<toml::Spanned<toml::Value>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolTable {
    timeout_ms: toml::Spanned<toml::Value>,
}

/// Appends to `path` the keys leading from `value` to the key or value at `offset` (nothing
/// when none is there); array items are `[i]`.
#[cfg(feature = "mcp")]
fn key_path(
    value: &toml::Spanned<toml::de::DeValue<'_>>,
    offset: usize,
    path: &mut Vec<String>,
) -> bool {
    match value.get_ref() {
        toml::de::DeValue::Table(table) => {
            for (k, v) in table.iter() {
                path.push(k.get_ref().to_string());
                if k.span().contains(&offset) || key_path(v, offset, path) {
                    return true;
                }
                if v.span().contains(&offset) {
                    return true;
                }
                path.pop();
            }
            false
        }
        toml::de::DeValue::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                if let Some(last) = path.last_mut() {
                    last.push_str(&format!("[{i}]"));
                    if key_path(v, offset, path) || v.span().contains(&offset) {
                        return true;
                    }
                    if let Some(last) = path.last_mut() {
                        last.truncate(last.len() - format!("[{i}]").len());
                    }
                }
            }
            false
        }
        _ => false,
    }
}

fn line_at(text: &str, offset: usize) -> usize {
    text.get(..offset)
        .map_or(1, |t| t.matches('\n').count() + 1)
}

impl Policy {
    /// Loads and validates a policy file.
    pub fn load(path: &Path) -> Result<Policy, PolicyError> {
        let text = std::fs::read_to_string(path).map_err(|source| PolicyError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Policy::parse(&text).map_err(|e| match e {
            PolicyError::Invalid { line, message, .. } => PolicyError::Invalid {
                path: Some(path.display().to_string()),
                line,
                message,
            },
            PolicyError::Permissions { source, .. } => PolicyError::Permissions {
                path: Some(path.display().to_string()),
                source,
            },
            other => other,
        })
    }

    /// Parses and validates policy text.
    pub fn parse(text: &str) -> Result<Policy, PolicyError> {
        let invalid = |offset: usize, message: String| PolicyError::Invalid {
            path: None,
            line: line_at(text, offset),
            message,
        };
        let file: File = toml::from_str(text).map_err(|e| {
            let offset = e.span().map_or(0, |s| s.start);
            invalid(offset, e.message().to_owned())
        })?;
        let mut policy = Policy {
            text: text.to_owned(),
            ..Policy::default()
        };
        if let Some(v) = file.max_parallel_tool_calls {
            let n = match v.get_ref() {
                toml::Value::Integer(i) => serde_json::Value::from(*i),
                toml::Value::Float(f) => serde_json::Value::from(*f),
                _ => serde_json::Value::Null,
            };
            policy.max_parallel_tool_calls = dsh_scheduler::max_parallel_from_config(&n)
                .map_err(|e| invalid(v.span().start, format!("max_parallel_tool_calls: {e}")))?;
        }
        if let Some(m) = file.mode {
            policy.mode = Mode::parse(m.get_ref()).ok_or_else(|| {
                invalid(
                    m.span().start,
                    format!(
                        "mode: must be \"native\", \"code\" or \"both\", not \"{}\"",
                        m.get_ref()
                    ),
                )
            })?;
        }
        let has_approval = file.approval.is_some();
        if let Some(a) = file.approval {
            policy.approval = match a.get_ref().as_str() {
                "ask" => ApprovalPolicy::Ask,
                "never" => ApprovalPolicy::Never,
                other => {
                    return Err(invalid(
                        a.span().start,
                        format!(
                            "approval: {} (got \"{other}\")",
                            dsh_core::codes::messages::APPROVAL_POLICY_VALUES
                        ),
                    ));
                }
            };
        }
        if let Some(p) = file.preset {
            policy.set_preset(&p, has_approval, invalid)?;
        }
        for (name, table) in &file.tools {
            let ms = match table.timeout_ms.get_ref() {
                toml::Value::Integer(i) if *i > 0 && *i <= i64::from(i32::MAX) => *i as u64,
                _ => {
                    return Err(invalid(
                        table.timeout_ms.span().start,
                        format!(
                            "tools.{name}.timeout_ms: must be a positive whole number of milliseconds no greater than 2147483647"
                        ),
                    ));
                }
            };
            policy.tool_timeouts.insert(name.clone(), ms);
        }
        if let Some(mcp) = file.mcp {
            policy.set_mcp(text, mcp.span().start, invalid)?;
        }
        if file.permissions.is_some() {
            policy.has_permissions = true;
            policy.permissions(ToolRegistry::new())?;
        }
        Ok(policy)
    }

    /// The permission rules of `[permissions]`, bound to `registry` (no table: no rules).
    pub fn permissions(&self, registry: ToolRegistry) -> Result<PermissionRules, PolicyError> {
        PermissionRules::from_toml(&self.text, registry)
            .map_err(|source| PolicyError::Permissions { path: None, source })
    }

    /// Applies `preset = "..."`: the preset and its approval policy (refused next to an explicit
    /// `approval`, which it would contradict, and in a build without the `bash` tool).
    fn set_preset(
        &mut self,
        p: &toml::Spanned<String>,
        has_approval: bool,
        invalid: impl Fn(usize, String) -> PolicyError,
    ) -> Result<(), PolicyError> {
        let at = p.span().start;
        if has_approval {
            return Err(invalid(
                at,
                "preset: a preset sets the approval policy too; remove `approval` or `preset`"
                    .to_owned(),
            ));
        }
        #[cfg(feature = "bash")]
        {
            let preset: dsh_tool_bash::Preset = p
                .get_ref()
                .parse()
                .map_err(|e: dsh_tool_bash::BashError| invalid(at, format!("preset: {e}")))?;
            self.preset = Some(preset);
            self.approval = preset.approval();
            Ok(())
        }
        #[cfg(not(feature = "bash"))]
        {
            let _ = self;
            Err(invalid(
                at,
                "preset: this build has no `bash` tool (feature \"bash\")".to_owned(),
            ))
        }
    }

    /// Reads `[mcp]` of the policy `text` (which starts at offset `at`): `servers.<name>`
    /// tables, each a server to start (refused in a build without the MCP client, and for a
    /// name a tool name cannot carry). It is read again from `text` with the spans of its keys,
    /// so an error names the line and the path of the key at fault (`mcp.servers.two.timeout_ms`).
    fn set_mcp(
        &mut self,
        text: &str,
        at: usize,
        invalid: impl Fn(usize, String) -> PolicyError,
    ) -> Result<(), PolicyError> {
        #[cfg(feature = "mcp")]
        {
            use serde::de::Deserialize as _;

            #[derive(Deserialize)]
            #[serde(deny_unknown_fields)]
            struct Mcp {
                #[serde(default)]
                servers: BTreeMap<String, dsh_mcp::ServerConfig>,
            }
            let root = toml::de::DeTable::parse(text)
                .map_err(|e| invalid(e.span().map_or(at, |s| s.start), e.message().to_owned()))?;
            let root = root.into_inner();
            let Some((_, table)) = root.iter().find(|(k, _)| k.get_ref() == "mcp") else {
                return Ok(());
            };
            let mcp = Mcp::deserialize(toml::de::ValueDeserializer::from(table.clone())).map_err(
                |e| match e.span() {
                    Some(span) => {
                        let mut path = vec!["mcp".to_owned()];
                        key_path(table, span.start, &mut path);
                        invalid(span.start, format!("{}: {}", path.join("."), e.message()))
                    }
                    None => invalid(at, format!("mcp: {}", e.message())),
                },
            )?;
            let servers = table.get_ref().get("servers");
            for (name, config) in &mcp.servers {
                // The line of the server's own table.
                let at = servers
                    .and_then(|t| match t.get_ref() {
                        toml::de::DeValue::Table(t) => {
                            t.iter().find(|(k, _)| k.get_ref() == name.as_str())
                        }
                        _ => None,
                    })
                    .map_or(at, |(k, _)| k.span().start);
                dsh_mcp::tool_name(name, "x").map_err(|_| {
                    invalid(
                        at,
                        format!(
                            "mcp.servers.{name}: a server's name may hold only letters, digits, `_` and `-`"
                        ),
                    )
                })?;
                config
                    .check(name)
                    .map_err(|e| invalid(at, format!("mcp.servers.{name}: {e}")))?;
            }
            self.mcp_servers = mcp.servers;
            Ok(())
        }
        #[cfg(not(feature = "mcp"))]
        {
            let _ = (self, text);
            Err(invalid(
                at,
                "mcp: this build has no MCP client (feature \"mcp\")".to_owned(),
            ))
        }
    }

    /// Whether the file had a `[permissions]` table.
    pub fn has_permissions(&self) -> bool {
        self.has_permissions
    }
}
