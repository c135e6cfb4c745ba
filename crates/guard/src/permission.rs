//! Permission rules as a `tools/pre-execute` listener: `allow`, `ask` and `deny` lists of `tool`
//! or `tool(pattern)`, precedence deny > ask > allow, a default for unmatched calls.
//!
//! Guarantees: a rule that does not parse is refused when the rules are built, with an error
//! naming the rule and where it came from; a pattern rule whose subject cannot be read never
//! silently allows (see [`PermissionRules::decide`]).

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use async_trait::async_trait;
use dsh_core::{
    Failure, PermissionSubject, PreExecuteHook, PreNext, PreToolDecision, ToolExecution,
    ToolRegistry,
};
use globset::{GlobBuilder, GlobMatcher};
use serde::Deserialize;

use crate::error::GuardError;

mod offer;

/// What a rule (or the default) does with a call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PermissionAction {
    /// Let the call through to the rest of the waterfall.
    #[default]
    Allow,
    /// Ask a human (the pre-execute decision `ask`).
    Ask,
    /// Refuse the call.
    Deny,
}

impl PermissionAction {
    /// `allow`, `ask` or `deny`.
    pub fn as_str(self) -> &'static str {
        match self {
            PermissionAction::Allow => "allow",
            PermissionAction::Ask => "ask",
            PermissionAction::Deny => "deny",
        }
    }
}

impl FromStr for PermissionAction {
    type Err = GuardError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "allow" => Ok(PermissionAction::Allow),
            "ask" => Ok(PermissionAction::Ask),
            "deny" => Ok(PermissionAction::Deny),
            other => Err(GuardError::UnknownAction(other.to_owned())),
        }
    }
}

impl fmt::Display for PermissionAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One parsed rule: `tool` or `tool(pattern)`. Both parts are globs (`*`, `?`, `[..]`, `{a,b}`);
/// `*` also matches `/`, so `bash(rm *)` covers `rm -rf /tmp/x`.
#[derive(Clone)]
pub struct PermissionRule {
    text: Arc<str>,
    origin: Arc<str>,
    /// The tool part as written (after a Claude Code name is read as ours).
    tool_text: Arc<str>,
    tool: GlobMatcher,
    pattern: Option<GlobMatcher>,
}

impl fmt::Debug for PermissionRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PermissionRule({})", self.text)
    }
}

fn glob(text: &str) -> Result<GlobMatcher, String> {
    GlobBuilder::new(text)
        .literal_separator(false)
        .backslash_escape(true)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| e.kind().to_string())
}

impl PermissionRule {
    /// Parses `tool` or `tool(pattern)`; `origin` names where the rule came from in the error.
    pub fn parse(text: &str, origin: &str) -> Result<PermissionRule, GuardError> {
        let err = |reason: &str| GuardError::PermissionRule {
            rule: text.to_owned(),
            origin: origin.to_owned(),
            reason: reason.to_owned(),
        };
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Err(err("a rule must name a tool"));
        }
        let (tool, pattern) = match trimmed.find('(') {
            None => {
                if trimmed.contains(')') {
                    return Err(err("unbalanced \")\""));
                }
                (trimmed, None)
            }
            Some(open) => {
                let Some(inner) = trimmed[open + 1..].strip_suffix(')') else {
                    return Err(err(
                        "a pattern must close with \")\" at the end of the rule",
                    ));
                };
                (trimmed[..open].trim_end(), Some(inner))
            }
        };
        if tool.is_empty() {
            return Err(err("a rule must name a tool before \"(\""));
        }
        if tool.chars().any(char::is_whitespace) {
            return Err(err("a tool name cannot contain whitespace"));
        }
        // Claude Code's spelling of a tool (`Read(./.env)`) names ours.
        let tool = dsh_core::names::from_claude(tool).unwrap_or(tool);
        let tool_text: Arc<str> = Arc::from(tool);
        let tool = glob(tool).map_err(|e| err(&format!("bad tool glob: {e}")))?;
        let pattern = match pattern {
            None => None,
            Some("") => return Err(err("the pattern between \"(\" and \")\" is empty")),
            Some(p) => Some(glob(p).map_err(|e| err(&format!("bad pattern: {e}")))?),
        };
        Ok(PermissionRule {
            text: Arc::from(trimmed),
            origin: Arc::from(origin),
            tool_text,
            tool,
            pattern,
        })
    }

    /// The tool the rule names (a Claude Code name read as ours), or its pattern.
    pub fn tool(&self) -> &str {
        &self.tool_text
    }

    /// Where the rule came from (`permissions.deny (line 4)`).
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// Whether the tool part is a pattern (`mcp__*`) rather than one tool's name.
    pub fn names_a_pattern(&self) -> bool {
        self.tool_text
            .chars()
            .any(|c| matches!(c, '*' | '?' | '[' | '{'))
    }

    /// The rule as written.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether the rule has a subject pattern.
    pub fn has_pattern(&self) -> bool {
        self.pattern.is_some()
    }

    fn names(&self, tool: &str) -> bool {
        self.tool.is_match(tool)
    }
}

/// Why a call got its action.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PermissionMatch {
    /// A rule of that list matched.
    Rule {
        /// The list the rule is in.
        action: PermissionAction,
        /// The rule as written.
        rule: Arc<str>,
    },
    /// A pattern rule of the deny or ask list names the tool, but the call's subject could not
    /// be read (the tool declares none, the arguments are not JSON, or reading failed): the
    /// rule cannot be checked, so the call is escalated to `ask`.
    UncheckedPattern {
        /// The list the rule is in.
        action: PermissionAction,
        /// The rule as written.
        rule: Arc<str>,
    },
    /// No rule matched; the default applies.
    Default(PermissionAction),
}

impl PermissionMatch {
    /// The resulting action.
    pub fn action(&self) -> PermissionAction {
        match self {
            PermissionMatch::Rule { action, .. } => *action,
            PermissionMatch::UncheckedPattern { .. } => PermissionAction::Ask,
            PermissionMatch::Default(a) => *a,
        }
    }
}

/// How strict a match is: deny, then ask (an unchecked pattern asks), then allow.
fn rank(m: &PermissionMatch) -> u8 {
    match m.action() {
        PermissionAction::Deny => 2,
        PermissionAction::Ask => 1,
        PermissionAction::Allow => 0,
    }
}

/// The `[permissions]` table of a configuration file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PermissionTable {
    #[serde(default)]
    pub(crate) allow: Vec<toml::Spanned<String>>,
    #[serde(default)]
    pub(crate) ask: Vec<toml::Spanned<String>>,
    #[serde(default)]
    pub(crate) deny: Vec<toml::Spanned<String>>,
    #[serde(default)]
    pub(crate) default: Option<toml::Spanned<String>>,
}

#[derive(Deserialize)]
struct PermissionFile {
    #[serde(default)]
    permissions: Option<PermissionTable>,
}

/// The 1-based line of byte offset `at` in `text`.
pub(crate) fn line_of(text: &str, at: usize) -> usize {
    text.as_bytes()
        .iter()
        .take(at.min(text.len()))
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

/// A TOML parse error as a configuration error with its line.
pub(crate) fn toml_error(text: &str, e: &toml::de::Error) -> GuardError {
    let line = e.span().map(|s| line_of(text, s.start));
    GuardError::config(line, e.message())
}

/// Permission rules, usable as a `tools/pre-execute` listener.
///
/// Register with [`crate::Hooks::on_pre_execute`]. As a listener: a `deny` decides `deny` with a
/// reason naming the rule; an `ask` decides `ask` with a reason naming the rule; an `allow`
/// (by rule or default) delegates to the rest of the waterfall, so listeners further in still
/// see the call (and guards always run after it).
#[derive(Clone)]
pub struct PermissionRules {
    allow: Arc<[PermissionRule]>,
    ask: Arc<[PermissionRule]>,
    deny: Arc<[PermissionRule]>,
    default: PermissionAction,
    registry: ToolRegistry,
}

impl fmt::Debug for PermissionRules {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PermissionRules")
            .field("allow", &self.allow)
            .field("ask", &self.ask)
            .field("deny", &self.deny)
            .field("default", &self.default)
            .finish_non_exhaustive()
    }
}

fn push(list: &mut Arc<[PermissionRule]>, rule: PermissionRule) {
    let mut v = list.to_vec();
    v.push(rule);
    *list = Arc::from(v);
}

impl PermissionRules {
    /// No rules, default `allow`: changes nothing until rules are added. Tools (and their
    /// permission subjects) are looked up in `registry` by name and agent.
    pub fn new(registry: ToolRegistry) -> PermissionRules {
        PermissionRules {
            allow: Arc::from(Vec::new()),
            ask: Arc::from(Vec::new()),
            deny: Arc::from(Vec::new()),
            default: PermissionAction::Allow,
            registry,
        }
    }

    /// Adds a rule to the list of `action`.
    pub fn rule(mut self, action: PermissionAction, rule: &str) -> Result<Self, GuardError> {
        let parsed = PermissionRule::parse(rule, action.as_str())?;
        let list = match action {
            PermissionAction::Allow => &mut self.allow,
            PermissionAction::Ask => &mut self.ask,
            PermissionAction::Deny => &mut self.deny,
        };
        push(list, parsed);
        Ok(self)
    }

    /// Adds an `allow` rule.
    pub fn allow(self, rule: &str) -> Result<Self, GuardError> {
        self.rule(PermissionAction::Allow, rule)
    }
    /// Adds an `ask` rule.
    pub fn ask(self, rule: &str) -> Result<Self, GuardError> {
        self.rule(PermissionAction::Ask, rule)
    }
    /// Adds a `deny` rule.
    pub fn deny(self, rule: &str) -> Result<Self, GuardError> {
        self.rule(PermissionAction::Deny, rule)
    }
    /// Sets the action for calls no rule matches.
    pub fn with_default(mut self, default: PermissionAction) -> Self {
        self.default = default;
        self
    }

    /// The same rules reading tools from another registry.
    pub fn bind(mut self, registry: ToolRegistry) -> Self {
        self.registry = registry;
        self
    }

    /// The action for calls no rule matches.
    pub fn default_action(&self) -> PermissionAction {
        self.default
    }

    /// Every rule, deny first, then ask, then allow.
    pub fn rules(&self) -> impl Iterator<Item = (PermissionAction, &PermissionRule)> {
        let tag = |a: PermissionAction| move |r| (a, r);
        self.deny
            .iter()
            .map(tag(PermissionAction::Deny))
            .chain(self.ask.iter().map(tag(PermissionAction::Ask)))
            .chain(self.allow.iter().map(tag(PermissionAction::Allow)))
    }

    /// Refuses a rule naming a tool that is not in `known` (a misspelling would otherwise never
    /// match, silently): the error names the rule, where it came from and the closest known
    /// tool. A rule whose tool part is a pattern (`mcp__*`) names tools that may appear later
    /// and is kept.
    pub fn check_tools(&self, known: &[String]) -> Result<(), GuardError> {
        for (_, rule) in self.rules() {
            if rule.names_a_pattern() || known.iter().any(|k| **k == *rule.tool_text) {
                continue;
            }
            let hint =
                match dsh_core::names::closest(&rule.tool_text, known.iter().map(String::as_str)) {
                    Some(c) => format!("did you mean \"{c}\"? "),
                    None => String::new(),
                };
            return Err(GuardError::PermissionRule {
                rule: rule.text.to_string(),
                origin: rule.origin.to_string(),
                reason: format!(
                    "no tool is named \"{}\"; {hint}known tools: {}; a tool that appears later (an MCP server's) is named by a pattern such as mcp__*",
                    rule.tool_text,
                    known.join(", ")
                ),
            });
        }
        Ok(())
    }

    /// Loads `[permissions] allow=[..] ask=[..] deny=[..] default=".."` from TOML text. Other
    /// top-level tables are ignored (they belong to other sections of the file); no
    /// `[permissions]` table means no rules. Errors name the key or rule and its line.
    pub fn from_toml(text: &str, registry: ToolRegistry) -> Result<PermissionRules, GuardError> {
        let file: PermissionFile = toml::from_str(text).map_err(|e| toml_error(text, &e))?;
        match file.permissions {
            None => Ok(PermissionRules::new(registry)),
            Some(t) => PermissionRules::from_table(t, text, registry),
        }
    }

    pub(crate) fn from_table(
        table: PermissionTable,
        text: &str,
        registry: ToolRegistry,
    ) -> Result<PermissionRules, GuardError> {
        let mut rules = PermissionRules::new(registry);
        for (action, list) in [
            (PermissionAction::Allow, &table.allow),
            (PermissionAction::Ask, &table.ask),
            (PermissionAction::Deny, &table.deny),
        ] {
            for item in list {
                let origin = format!(
                    "permissions.{} (line {})",
                    action.as_str(),
                    line_of(text, item.span().start)
                );
                let parsed = PermissionRule::parse(item.get_ref(), &origin)?;
                let target = match action {
                    PermissionAction::Allow => &mut rules.allow,
                    PermissionAction::Ask => &mut rules.ask,
                    PermissionAction::Deny => &mut rules.deny,
                };
                push(target, parsed);
            }
        }
        if let Some(d) = &table.default {
            let action = d.get_ref().parse::<PermissionAction>().map_err(|e| {
                GuardError::config(
                    Some(line_of(text, d.span().start)),
                    format!("permissions.default: {e}"),
                )
            })?;
            rules.default = action;
        }
        Ok(rules)
    }

    /// Decides one call. Precedence deny > ask > allow, then the default. A bare `tool` rule
    /// matches every call of the tool; a `tool(pattern)` rule matches when the tool's permission
    /// subject for these arguments matches the pattern in any of its spellings (a file's path
    /// relative to the workspace or absolute). A subject of several parts (the simple commands
    /// of a shell line) is decided part by part and the strictest answer wins, so an `allow`
    /// pattern allows the call only if it (or another allow rule) covers every part. When the
    /// subject cannot be read, pattern rules of `allow` never match, and a pattern rule of
    /// `deny` or `ask` naming the tool makes the call `ask`
    /// ([`PermissionMatch::UncheckedPattern`]), unless a bare rule decides more strictly.
    pub fn decide(&self, exec: &ToolExecution) -> PermissionMatch {
        let name = exec.name();
        let subject = self
            .registry
            .get(name, exec.agent())
            .and_then(|def| def.permission_subjects(exec.arguments(), exec.agent()));
        self.decide_subject(name, subject.as_ref())
    }

    /// Decides a call of tool `name` by its subject (`None`: it could not be read), as
    /// [`PermissionRules::decide`] does for an execution. A host asks this for reads a tool
    /// makes on its own initiative (the files `grep` searches).
    pub fn decide_subject(
        &self,
        name: &str,
        subject: Option<&PermissionSubject>,
    ) -> PermissionMatch {
        let parts = subject.map(|s| s.each()).filter(|p| !p.is_empty());
        let Some(parts) = parts else {
            return self.decide_part(name, None);
        };
        let mut strictest: Option<PermissionMatch> = None;
        for part in parts {
            let m = self.decide_part(name, Some(part));
            if strictest.as_ref().is_none_or(|s| rank(&m) > rank(s)) {
                strictest = Some(m);
            }
        }
        strictest.unwrap_or(PermissionMatch::Default(self.default))
    }

    /// Decides one part of a subject (`None`: the subject could not be read).
    fn decide_part(&self, name: &str, forms: Option<&[String]>) -> PermissionMatch {
        let mut unchecked: Option<(PermissionAction, Arc<str>)> = None;
        for (action, list) in [
            (PermissionAction::Deny, &self.deny),
            (PermissionAction::Ask, &self.ask),
            (PermissionAction::Allow, &self.allow),
        ] {
            for rule in list.iter().filter(|r| r.names(name)) {
                match (&rule.pattern, forms) {
                    (None, _) => {
                        return PermissionMatch::Rule {
                            action,
                            rule: rule.text.clone(),
                        };
                    }
                    (Some(p), Some(forms)) => {
                        if forms.iter().any(|f| p.is_match(f)) {
                            return PermissionMatch::Rule {
                                action,
                                rule: rule.text.clone(),
                            };
                        }
                    }
                    (Some(_), None) => {
                        if action != PermissionAction::Allow && unchecked.is_none() {
                            unchecked = Some((action, rule.text.clone()));
                        }
                    }
                }
            }
            // An unchecked deny/ask pattern outranks everything below its own list.
            if action == PermissionAction::Ask
                && let Some((action, rule)) = unchecked.take()
            {
                return PermissionMatch::UncheckedPattern { action, rule };
            }
        }
        PermissionMatch::Default(self.default)
    }

    /// The pre-execute decision for a match (`None` means delegate).
    fn decision(exec: &ToolExecution, m: &PermissionMatch) -> Option<PreToolDecision> {
        let name = exec.name();
        match m {
            PermissionMatch::Rule {
                action: PermissionAction::Deny,
                rule,
            } => Some(PreToolDecision::deny(format!(
                "tool \"{name}\" is denied by permission rule deny \"{rule}\""
            ))),
            PermissionMatch::Rule {
                action: PermissionAction::Ask,
                rule,
            } => Some(PreToolDecision::ask(format!(
                "tool \"{name}\" requires approval by permission rule ask \"{rule}\""
            ))),
            PermissionMatch::UncheckedPattern { action, rule } => {
                Some(PreToolDecision::ask(format!(
                    "tool \"{name}\" requires approval: its permission subject could not be read to check rule {action} \"{rule}\""
                )))
            }
            PermissionMatch::Default(PermissionAction::Deny) => Some(PreToolDecision::deny(
                format!("tool \"{name}\" is denied by the default permission (no rule matched)"),
            )),
            PermissionMatch::Default(PermissionAction::Ask) => Some(PreToolDecision::ask(format!(
                "tool \"{name}\" requires approval by the default permission (no rule matched)"
            ))),
            PermissionMatch::Rule {
                action: PermissionAction::Allow,
                ..
            }
            | PermissionMatch::Default(PermissionAction::Allow) => None,
        }
    }
}

#[async_trait]
impl PreExecuteHook for PermissionRules {
    async fn pre_execute(
        &self,
        exec: &ToolExecution,
        next: PreNext<'_>,
    ) -> Result<PreToolDecision, Failure> {
        let m = self.decide(exec);
        match PermissionRules::decision(exec, &m) {
            Some(d) => {
                tracing::debug!(tool = exec.name(), call_id = exec.call_id(), decision = ?d, "permission rules decided");
                Ok(d)
            }
            None => next.run(exec).await,
        }
    }
}
