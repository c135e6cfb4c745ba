//! Approvals a person makes broader than one call: "yes, for this session" to exactly one rule
//! (`edit(src/**)`, `bash(cargo test *)`), and "always" for one workspace.
//!
//! Guarantees:
//! - A grant only answers a question. A call the rules deny stays denied (a denial never
//!   reaches an approval question), and a grant never answers a sandbox escalation: running a
//!   command outside its sandbox is asked every time, whatever was granted.
//! - A grant covers a call exactly when an `allow` rule of the same text in the policy would:
//!   the same parser and matcher ([`PermissionRules`]), every part of the call's subject (each
//!   simple command of a shell line, each spelling of a path) decided as the rules decide it.
//! - A rule is shown to the person before it is stored ([`Grants::proposed`] is what the
//!   question offers); one that does not parse is refused and nothing is stored.
//! - A session grant is logged as an `approval/grant` event (`{rule, scope: "session",
//!   callId?}`) before it answers anything, and [`Grants::restore`] reads them back when the
//!   session is resumed, so the resumed session asks exactly what the first one would have.
//! - An "always" grant is written to the person's own grants file (never to a file inside the
//!   workspace, which whoever wrote the repository controls), under the workspace's canonical
//!   path, and logged with `scope: "always"` and the file.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use dsh_core::{Json, ToolRegistry};
use dsh_guard::{AnswerNext, Answerer, ApprovalOutcome, ApprovalRequest};
use dsh_guard::{GuardError, PermissionAction, PermissionMatch, PermissionRule, PermissionRules};
use dsh_session::{Event, Session};
use parking_lot::RwLock;
use serde_json::json;

/// The event a grant is logged as.
pub const APPROVAL_GRANT: &str = "approval/grant";

/// How an approval question about running a command outside its sandbox begins (the `bash`
/// tool's reason): such a question is never answered by a grant.
pub const ESCALATION_PREFIX: &str = "escalate sandbox to ";

/// How long a grant lasts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum GrantScope {
    /// Until the session ends (and again when it is resumed).
    Session,
    /// In this workspace from now on (the person's grants file).
    Always,
}

impl GrantScope {
    /// `session` or `always`, as logged.
    pub fn as_str(self) -> &'static str {
        match self {
            GrantScope::Session => "session",
            GrantScope::Always => "always",
        }
    }
}

/// Failures of a grant.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GrantError {
    /// The rule does not parse.
    #[error(transparent)]
    Rule(#[from] GuardError),
    /// The grant could not be logged: it was not stored.
    #[error("the grant was not stored: the session log failed: {0}")]
    Log(#[source] dsh_session::SessionError),
    /// The grants file could not be read or written.
    #[error("grants file {path}: {source}")]
    File {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The grants file is not what dsh writes.
    #[error("grants file {path} is not valid: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, as the TOML parser says it.
        message: String,
    },
    /// "Always" was asked of grants that have no file.
    #[error("no grants file is configured, so nothing can be allowed always")]
    NoFile,
}

/// The person's grants file and the workspace its rules are for.
#[derive(Clone, Debug)]
struct AlwaysFile {
    path: PathBuf,
    workspace: String,
}

#[derive(Default)]
struct State {
    /// Every rule granted, with its scope, in the order granted.
    granted: Vec<(Arc<str>, GrantScope)>,
    /// The same rules as `allow` rules, for matching.
    rules: Option<PermissionRules>,
}

/// The grants of one session: rules a person allowed for the session or always. Shared
/// (`Arc`) between the harness, which answers with it, and the host's approval question, which
/// adds to it.
pub struct Grants {
    state: RwLock<State>,
    session: OnceLock<Session>,
    always: Option<AlwaysFile>,
}

impl std::fmt::Debug for Grants {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Grants")
            .field("rules", &self.rules())
            .finish_non_exhaustive()
    }
}

impl Grants {
    /// Grants with no "always" file: session grants only.
    pub fn new() -> Arc<Grants> {
        Arc::new(Grants {
            state: RwLock::default(),
            session: OnceLock::new(),
            always: None,
        })
    }

    /// Grants whose "always" rules live in `file` (TOML, one table per workspace path), for
    /// `workspace`; the rules already there for it are loaded. A missing file is empty.
    pub fn with_file(file: &Path, workspace: &Path) -> Result<Arc<Grants>, GrantError> {
        let workspace = std::fs::canonicalize(workspace)
            .unwrap_or_else(|_| workspace.to_path_buf())
            .display()
            .to_string();
        let always = AlwaysFile {
            path: file.to_path_buf(),
            workspace,
        };
        let grants = Grants {
            state: RwLock::default(),
            session: OnceLock::new(),
            always: Some(always.clone()),
        };
        for rule in read_rules(&always)? {
            grants
                .insert(&rule, GrantScope::Always)
                .map_err(|e| GrantError::Invalid {
                    path: always.path.clone(),
                    message: e.to_string(),
                })?;
        }
        Ok(Arc::new(grants))
    }

    /// The grants file, when "always" can be granted.
    pub fn file(&self) -> Option<&Path> {
        self.always.as_ref().map(|a| a.path.as_path())
    }

    /// Every rule granted so far, with its scope, in the order granted.
    pub fn rules(&self) -> Vec<(Arc<str>, GrantScope)> {
        self.state.read().granted.clone()
    }

    /// Where session grants are logged (the harness attaches its session once).
    pub(crate) fn attach(&self, session: Session) {
        let _ = self.session.set(session);
    }

    /// Reads back the session grants logged in `events` (a resumed session's log). Returns the
    /// rules restored; a logged rule that no longer parses is skipped and named in the error.
    pub fn restore<'a>(
        &self,
        events: impl IntoIterator<Item = &'a Event>,
    ) -> Result<Vec<Arc<str>>, GrantError> {
        let mut restored = Vec::new();
        for event in events {
            if event.event_type() != APPROVAL_GRANT {
                continue;
            }
            let data = event.data().value();
            if data.get("scope").and_then(|s| s.as_str()) != Some("session") {
                continue;
            }
            if let Some(rule) = data.get("rule").and_then(|r| r.as_str()) {
                self.insert(rule, GrantScope::Session)?;
                restored.push(Arc::from(rule));
            }
        }
        Ok(restored)
    }

    /// The rule a grant covering `req` matched, if any (never for a sandbox escalation).
    pub fn covering(&self, req: &ApprovalRequest) -> Option<Arc<str>> {
        if req
            .reason
            .as_deref()
            .is_some_and(|r| r.starts_with(ESCALATION_PREFIX))
        {
            return None;
        }
        let state = self.state.read();
        let rules = state.rules.as_ref()?;
        match rules.decide_subject(&req.tool_name, req.subject.as_ref()) {
            PermissionMatch::Rule {
                action: PermissionAction::Allow,
                rule,
            } => Some(rule),
            _ => None,
        }
    }

    /// The rules a question about `req` offers to grant: one per distinct part of its subject
    /// (see [`proposed_rules`]); empty for a sandbox escalation, which no grant answers.
    pub fn proposed(req: &ApprovalRequest) -> Vec<String> {
        if req
            .reason
            .as_deref()
            .is_some_and(|r| r.starts_with(ESCALATION_PREFIX))
        {
            return Vec::new();
        }
        proposed_rules(&req.tool_name, req.subject.as_ref())
    }

    /// Grants `rules` for the rest of the session: checked, logged, then stored.
    pub async fn grant_session(
        &self,
        rules: &[String],
        call_id: Option<&str>,
    ) -> Result<(), GrantError> {
        self.grant(rules, GrantScope::Session, call_id).await
    }

    /// Grants `rules` always in this workspace: checked, written to the grants file, logged,
    /// then stored. Returns the file.
    pub async fn grant_always(
        &self,
        rules: &[String],
        call_id: Option<&str>,
    ) -> Result<PathBuf, GrantError> {
        let always = self.always.as_ref().ok_or(GrantError::NoFile)?;
        self.grant(rules, GrantScope::Always, call_id).await?;
        Ok(always.path.clone())
    }

    async fn grant(
        &self,
        rules: &[String],
        scope: GrantScope,
        call_id: Option<&str>,
    ) -> Result<(), GrantError> {
        for rule in rules {
            PermissionRule::parse(rule, "an approval grant")?;
        }
        if scope == GrantScope::Always {
            let always = self.always.as_ref().ok_or(GrantError::NoFile)?;
            write_rules(always, rules)?;
        }
        if let Some(session) = self.session.get() {
            for rule in rules {
                let mut data = json!({"rule": rule, "scope": scope.as_str()});
                if let Some(id) = call_id {
                    data["callId"] = json!(id);
                }
                if let (GrantScope::Always, Some(a)) = (scope, &self.always) {
                    data["file"] = json!(a.path.display().to_string());
                }
                session
                    .append(Event::other(APPROVAL_GRANT, Json::from_shallow(data)))
                    .await
                    .map_err(GrantError::Log)?;
            }
        }
        for rule in rules {
            self.insert(rule, scope)?;
        }
        Ok(())
    }

    fn insert(&self, rule: &str, scope: GrantScope) -> Result<(), GrantError> {
        let mut state = self.state.write();
        if state.granted.iter().any(|(r, _)| &**r == rule) {
            return Ok(());
        }
        let rules = state
            .rules
            .take()
            .unwrap_or_else(|| PermissionRules::new(ToolRegistry::new()));
        let rules = match rules.clone().allow(rule) {
            Ok(r) => r,
            Err(e) => {
                state.rules = Some(rules);
                return Err(e.into());
            }
        };
        state.rules = Some(rules.with_default(PermissionAction::Ask));
        state.granted.push((Arc::from(rule), scope));
        Ok(())
    }
}

/// The answerer in front of the person: allows once, without asking, a call a grant covers.
pub(crate) struct GrantAnswerer(pub(crate) Arc<Grants>);

#[async_trait]
impl Answerer for GrantAnswerer {
    async fn answer(
        &self,
        req: &ApprovalRequest,
        next: AnswerNext<'_>,
    ) -> Result<ApprovalOutcome, GuardError> {
        if self.0.covering(req).is_some() {
            return Ok(ApprovalOutcome::AllowedOnce);
        }
        next.run(req).await
    }
}

/// The narrowest useful rule for each distinct part of a call's subject:
/// - a command (`cargo test --all`): its program and, when the next word is a plain word, that
///   word too, then ` *` when more words follow (`bash(cargo test *)`; `bash(git status)`);
/// - a path inside the workspace: its directory relative to the root (`edit(src/**)`), or the
///   file itself at the root or outside every root (`edit(notes.md)`);
/// - no subject: the tool itself (`mcp__fs__write_file`).
///
/// Glob characters of the subject are escaped, so a rule means exactly what it shows.
pub fn proposed_rules(tool: &str, subject: Option<&dsh_core::PermissionSubject>) -> Vec<String> {
    let Some(subject) = subject.filter(|s| !s.each().is_empty()) else {
        return vec![tool.to_owned()];
    };
    let mut out: Vec<String> = Vec::new();
    for forms in subject.each() {
        let Some(first) = forms.first() else {
            continue;
        };
        let pattern = if forms.len() > 1 || first.starts_with('/') || first == "." {
            path_pattern(forms)
        } else {
            command_pattern(first)
        };
        let rule = format!("{tool}({pattern})");
        if !out.contains(&rule) {
            out.push(rule);
        }
    }
    if out.is_empty() {
        out.push(tool.to_owned());
    }
    out
}

fn path_pattern(forms: &[String]) -> String {
    let relative = forms.iter().find(|f| !f.starts_with('/'));
    match relative {
        Some(rel) if rel != "." => match Path::new(rel).parent() {
            Some(dir) if !dir.as_os_str().is_empty() => {
                format!("{}/**", escape(&dir.to_string_lossy()))
            }
            _ => escape(rel),
        },
        Some(_) => ".".to_owned(),
        None => forms.first().map(|f| escape(f)).unwrap_or_default(),
    }
}

fn command_pattern(command: &str) -> String {
    let words: Vec<&str> = command.split_whitespace().collect();
    if words.is_empty() {
        return escape(command);
    }
    let plain = |w: &str| {
        w.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            && w.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == ':')
    };
    let take = match words.get(1) {
        Some(w) if plain(w) => 2,
        _ => 1,
    };
    let prefix = escape(&words[..take].join(" "));
    if words.len() > take {
        format!("{prefix} *")
    } else {
        prefix
    }
}

/// Escapes the glob characters of a literal.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '\\' | '*' | '?' | '[' | ']' | '{' | '}') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn read_table(path: &Path) -> Result<toml::Table, GrantError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(toml::Table::new()),
        Err(source) => {
            return Err(GrantError::File {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    text.parse::<toml::Table>()
        .map_err(|e| GrantError::Invalid {
            path: path.to_path_buf(),
            message: e.message().to_owned(),
        })
}

fn read_rules(always: &AlwaysFile) -> Result<Vec<String>, GrantError> {
    let table = read_table(&always.path)?;
    let Some(entry) = table.get(&always.workspace) else {
        return Ok(Vec::new());
    };
    let invalid = |message: String| GrantError::Invalid {
        path: always.path.clone(),
        message,
    };
    let allow = entry
        .get("allow")
        .and_then(|a| a.as_array())
        .ok_or_else(|| invalid(format!("[\"{}\"] has no allow list", always.workspace)))?;
    allow
        .iter()
        .map(|v| {
            v.as_str().map(str::to_owned).ok_or_else(|| {
                invalid(format!(
                    "[\"{}\"] allow holds {v}, not a rule string",
                    always.workspace
                ))
            })
        })
        .collect()
}

fn write_rules(always: &AlwaysFile, rules: &[String]) -> Result<(), GrantError> {
    let file_err = |source| GrantError::File {
        path: always.path.clone(),
        source,
    };
    let mut table = read_table(&always.path)?;
    let entry = table
        .entry(always.workspace.clone())
        .or_insert_with(|| toml::Value::Table(toml::Table::new()));
    let Some(entry) = entry.as_table_mut() else {
        return Err(GrantError::Invalid {
            path: always.path.clone(),
            message: format!("[\"{}\"] is not a table", always.workspace),
        });
    };
    let allow = entry
        .entry("allow")
        .or_insert_with(|| toml::Value::Array(Vec::new()));
    let Some(allow) = allow.as_array_mut() else {
        return Err(GrantError::Invalid {
            path: always.path.clone(),
            message: format!("[\"{}\"] allow is not a list", always.workspace),
        });
    };
    for rule in rules {
        if !allow.iter().any(|v| v.as_str() == Some(rule)) {
            allow.push(toml::Value::String(rule.clone()));
        }
    }
    let text = format!(
        "# Rules allowed \"always\" at dsh's approval questions, per workspace.\n{}",
        toml::to_string(&table).map_err(|e| GrantError::Invalid {
            path: always.path.clone(),
            message: e.to_string(),
        })?
    );
    if let Some(dir) = always.path.parent() {
        std::fs::create_dir_all(dir).map_err(file_err)?;
    }
    // Written beside and renamed over, so a crash never leaves half a file.
    let tmp = always.path.with_extension("toml.tmp");
    std::fs::write(&tmp, text).map_err(file_err)?;
    std::fs::rename(&tmp, &always.path).map_err(file_err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_core::PermissionSubject;

    #[test]
    fn a_command_is_granted_by_its_program_and_subcommand() {
        let s = PermissionSubject::parts(vec!["cargo test --all".into(), "git status".into()]);
        assert_eq!(
            proposed_rules("bash", Some(&s)),
            ["bash(cargo test *)", "bash(git status)"]
        );
        let s = PermissionSubject::parts(vec!["ls -la /tmp".into()]);
        assert_eq!(proposed_rules("bash", Some(&s)), ["bash(ls *)"]);
    }

    #[test]
    fn a_path_is_granted_by_its_directory_and_glob_characters_are_literal() {
        let s = PermissionSubject::spelled(vec!["src/a[1].rs".into(), "/w/src/a[1].rs".into()]);
        assert_eq!(proposed_rules("edit", Some(&s)), ["edit(src/**)"]);
        let s = PermissionSubject::spelled(vec!["notes*.md".into(), "/w/notes*.md".into()]);
        assert_eq!(proposed_rules("write", Some(&s)), ["write(notes\\*.md)"]);
        let s = PermissionSubject::spelled(vec!["/etc/hosts".into()]);
        assert_eq!(proposed_rules("read", Some(&s)), ["read(/etc/hosts)"]);
        assert_eq!(proposed_rules("mcp__a__b", None), ["mcp__a__b"]);
    }

    fn asking(tool: &str, parts: &[&str], reason: Option<&str>) -> ApprovalRequest {
        let mut req = ApprovalRequest::new(dsh_core::AgentId::new("main"), tool);
        req.subject = Some(PermissionSubject::parts(
            parts.iter().map(|p| (*p).to_owned()).collect(),
        ));
        req.reason = reason.map(Arc::from);
        req
    }

    #[tokio::test]
    async fn a_grant_covers_a_line_only_when_it_covers_every_command_of_it() {
        let grants = Grants::new();
        grants
            .grant_session(&["bash(cargo test *)".to_owned()], None)
            .await
            .unwrap();
        let covered = grants.covering(&asking("bash", &["cargo test --all"], None));
        assert_eq!(covered.as_deref(), Some("bash(cargo test *)"));
        let chained = asking("bash", &["cargo test --all", "rm -rf target"], None);
        assert_eq!(grants.covering(&chained), None);
        assert_eq!(
            grants.covering(&asking("bash", &["cargo build"], None)),
            None
        );
        // Another tool with the same subject is not covered.
        assert_eq!(
            grants.covering(&asking("sh", &["cargo test x"], None)),
            None
        );
    }

    #[tokio::test]
    async fn no_grant_answers_or_offers_a_sandbox_escalation() {
        let grants = Grants::new();
        grants
            .grant_session(&["bash".to_owned()], None)
            .await
            .unwrap();
        let escalation = asking(
            "bash",
            &["cargo test"],
            Some("escalate sandbox to danger-full-access: needs the network"),
        );
        assert_eq!(grants.covering(&escalation), None);
        assert!(Grants::proposed(&escalation).is_empty());
        assert!(
            grants
                .covering(&asking("bash", &["cargo test"], None))
                .is_some()
        );
    }

    #[tokio::test]
    async fn a_rule_that_does_not_parse_is_refused_and_nothing_is_stored() {
        let grants = Grants::new();
        let bad = ["bash(ok *)".to_owned(), "bash(cargo test".to_owned()];
        assert!(matches!(
            grants.grant_session(&bad, None).await,
            Err(GrantError::Rule(_))
        ));
        assert!(grants.rules().is_empty());
        assert!(matches!(
            grants.grant_always(&["bash".to_owned()], None).await,
            Err(GrantError::NoFile)
        ));
    }
}
