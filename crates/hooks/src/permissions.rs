//! The `permissions` block of a Claude Code `settings.json` (`allow`, `ask`, `deny`), read from
//! the same files as the hooks, as rules over our calls.
//!
//! Rule syntax (Claude Code's): `Tool` matches every call of the tool; `Bash(npm run build)`
//! the exact command; `Bash(npm run test:*)` (or a single trailing ` *`) the command and
//! anything after it past a word boundary; `*` elsewhere any text. `Read(...)` and `Edit(...)`
//! take gitignore-style paths: `//abs` from the root, `~/p` from the home directory, `/p` from
//! the settings file's project (the workspace for `.dsh/settings.json`, else the file's
//! directory), `p` or `./p` from the workspace; a pattern without a slash matches at any
//! depth. `Read` rules also cover `glob` and `grep`, `Edit` rules `write`.
//!
//! Guarantees: a rule for a tool dsh does not have (`WebFetch(domain:...)`, `mcp__...`) is
//! refused with "not supported", naming the rule and its file; a command that chains or
//! substitutes commands (`;`, `&`, `|`, a newline, a backtick, `$(`) is never allowed by a
//! `Bash(...)` allow rule, while deny and ask rules are also checked against each of its parts.

use std::path::{Component, Path, PathBuf};

use dsh_core::{Json, ToolExecution};
use dsh_guard::PermissionAction;
use globset::{GlobBuilder, GlobMatcher};
use serde_json::Value;

use crate::error::HooksError;

/// Which of our tools a Claude Code tool name governs.
fn governed(claude: &str) -> Option<&'static [&'static str]> {
    Some(match claude {
        "Bash" => &["bash"],
        "Read" => &["read", "glob", "grep"],
        "Edit" => &["edit", "write"],
        "Write" => &["write"],
        "Glob" => &["glob"],
        "Grep" => &["grep"],
        _ => return None,
    })
}

#[derive(Clone, Debug)]
enum Specifier {
    /// Every call.
    Any,
    /// `Bash(cmd)`: exactly this command.
    Exact(String),
    /// `Bash(cmd:*)`: the command, or it followed by a space and anything.
    Prefix(String),
    /// `Bash(a * b)`: a wildcard pattern over the whole command.
    Wildcard(regex::Regex),
    /// `Read(path)`: the absolute path matches.
    Path(GlobMatcher),
}

/// One rule of a settings file.
#[derive(Clone, Debug)]
pub struct ClaudeRule {
    action: PermissionAction,
    text: String,
    origin: PathBuf,
    tools: &'static [&'static str],
    specifier: Specifier,
}

impl ClaudeRule {
    /// The list the rule is in.
    pub fn action(&self) -> PermissionAction {
        self.action
    }
    /// The rule as written.
    pub fn text(&self) -> &str {
        &self.text
    }
    /// The settings file it came from.
    pub fn origin(&self) -> &Path {
        &self.origin
    }
    /// Whether it matches every call of `tool`.
    fn is_bare_for(&self, tool: &str) -> bool {
        matches!(self.specifier, Specifier::Any) && self.tools.contains(&tool)
    }
}

/// Where relative rule paths resolve: the workspace (`p`, `./p`), the settings file's project
/// (`/p`) and the home directory (`~/p`).
#[derive(Clone, Debug)]
pub(crate) struct RuleBase {
    /// The workspace.
    pub workspace: PathBuf,
    /// The project of the file (`/p`).
    pub project: PathBuf,
    /// The home directory, if known.
    pub home: Option<PathBuf>,
}

/// Lexically normalized `path` (no `.`, `..` resolved against what precedes it).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

fn path_matcher(pattern: &str, base: &RuleBase) -> Result<GlobMatcher, String> {
    let (root, rest) = if let Some(abs) = pattern.strip_prefix("//") {
        (PathBuf::from("/"), abs.to_owned())
    } else if let Some(home) = pattern.strip_prefix("~/") {
        let h = base
            .home
            .clone()
            .ok_or("`~/` needs a home directory and $HOME is not set")?;
        (h, home.to_owned())
    } else if let Some(p) = pattern.strip_prefix('/') {
        (base.project.clone(), p.to_owned())
    } else {
        let p = pattern.strip_prefix("./").unwrap_or(pattern);
        (base.workspace.clone(), p.to_owned())
    };
    let dir_only = rest.ends_with('/');
    let rest = rest.trim_end_matches('/');
    if rest.is_empty() {
        return Err("the path is empty".to_owned());
    }
    // gitignore: a pattern with no slash (but a trailing one) matches at any depth.
    let anchored = rest.contains('/') || pattern.starts_with("./") || pattern.starts_with('/');
    let body = if anchored {
        rest.to_owned()
    } else {
        format!("**/{rest}")
    };
    let root = normalize(&root);
    let root = root.to_string_lossy();
    let root = root.trim_end_matches('/');
    let escaped = globset::escape(root);
    // A pattern naming a directory covers everything beneath it.
    let glob = if dir_only {
        format!("{escaped}/{body}/**")
    } else {
        format!("{escaped}/{{{body},{body}/**}}")
    };
    GlobBuilder::new(&glob)
        .literal_separator(true)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| e.kind().to_string())
}

fn bash_specifier(spec: &str) -> Result<Specifier, String> {
    if let Some(prefix) = spec.strip_suffix(":*") {
        if prefix.contains('*') {
            return Err("`:*` works only at the end, after a prefix without `*`".to_owned());
        }
        return Ok(Specifier::Prefix(prefix.trim_end().to_owned()));
    }
    let stars = spec.matches('*').count();
    if stars == 0 {
        return Ok(Specifier::Exact(spec.to_owned()));
    }
    if stars == 1
        && let Some(prefix) = spec.strip_suffix(" *")
    {
        return Ok(Specifier::Prefix(prefix.to_owned()));
    }
    let re = spec
        .split('*')
        .map(regex::escape)
        .collect::<Vec<_>>()
        .join(".*");
    regex::Regex::new(&format!("^(?s:{re})$"))
        .map(Specifier::Wildcard)
        .map_err(|e| e.to_string())
}

impl ClaudeRule {
    /// Parses one rule of list `action` from `origin`, resolving paths against `base`.
    pub(crate) fn parse(
        text: &str,
        action: PermissionAction,
        origin: &Path,
        base: &RuleBase,
    ) -> Result<ClaudeRule, String> {
        let t = text.trim();
        let (tool, spec) = match t.find('(') {
            None => (t, None),
            Some(open) => match t[open + 1..].strip_suffix(')') {
                Some(inner) => (&t[..open], Some(inner)),
                None => return Err("a specifier must close with \")\" at the end".to_owned()),
            },
        };
        let Some(tools) = governed(tool) else {
            return Err(format!(
                "not supported: dsh has no {tool} tool (it has Bash, Read, Edit, Write, Glob and Grep)"
            ));
        };
        let specifier = match spec {
            None | Some("*") => Specifier::Any,
            Some("") => return Err("the specifier between \"(\" and \")\" is empty".to_owned()),
            Some(s) if tool == "Bash" => bash_specifier(s)?,
            Some(s) if s.starts_with("domain:") => {
                return Err(format!("not supported: {tool} takes a path, not a domain"));
            }
            Some(s) => Specifier::Path(path_matcher(s, base)?),
        };
        Ok(ClaudeRule {
            action,
            text: t.to_owned(),
            origin: origin.to_path_buf(),
            tools,
            specifier,
        })
    }

    /// Whether the rule matches a call of our `tool` with these arguments (`cwd`: where
    /// relative paths of the call resolve).
    fn matches(&self, tool: &str, args: Option<&Json>, cwd: &Path) -> bool {
        if !self.tools.contains(&tool) {
            return false;
        }
        let field = |k: &str| args.and_then(|a| a.value().get(k)).and_then(Value::as_str);
        match &self.specifier {
            Specifier::Any => true,
            Specifier::Path(m) => {
                let arg = field("file_path").or_else(|| field("path")).unwrap_or(".");
                m.is_match(normalize(&cwd.join(arg)))
            }
            spec => {
                let Some(command) = field("command") else {
                    // An unreadable command: only deny and ask rules may take it (strictly).
                    return self.action != PermissionAction::Allow;
                };
                let command = command.trim();
                if self.action == PermissionAction::Allow {
                    return !chains(command) && bash_match(spec, command);
                }
                bash_match(spec, command)
                    || (chains(command) && parts(command).any(|p| bash_match(spec, p)))
            }
        }
    }
}

const CHAINING: &[&str] = &[";", "&", "|", "\n", "`", "$("];

fn chains(command: &str) -> bool {
    CHAINING.iter().any(|op| command.contains(op))
}

/// The pieces of a chained command between its operators (a conservative cut, used only to
/// make deny and ask rules match more, never to allow).
fn parts(command: &str) -> impl Iterator<Item = &str> {
    command
        .split([';', '&', '|', '\n', '`', '(', ')'])
        .map(|p| p.trim().trim_start_matches('$').trim())
        .filter(|p| !p.is_empty())
}

fn bash_match(spec: &Specifier, command: &str) -> bool {
    match spec {
        Specifier::Exact(c) => command == c,
        Specifier::Prefix(p) => {
            command == p
                || command
                    .strip_prefix(p.as_str())
                    .is_some_and(|rest| rest.starts_with(char::is_whitespace))
        }
        Specifier::Wildcard(re) => re.is_match(command),
        Specifier::Any | Specifier::Path(_) => false,
    }
}

/// The rules of every settings file, in load order.
#[derive(Clone, Debug, Default)]
pub struct ClaudePermissions {
    rules: Vec<ClaudeRule>,
    cwd: PathBuf,
}

/// The rule that decided a call.
#[derive(Clone, Debug)]
pub struct ClaudeMatch<'a> {
    /// The rule.
    pub rule: &'a ClaudeRule,
}

impl ClaudePermissions {
    /// No rules, calls resolved in `cwd`.
    pub fn empty(cwd: impl Into<PathBuf>) -> ClaudePermissions {
        ClaudePermissions {
            rules: Vec::new(),
            cwd: cwd.into(),
        }
    }

    /// Reads the `permissions` block of one settings file's JSON (other keys are ignored);
    /// `project` is where its `/p` paths resolve.
    pub fn add_file(
        &mut self,
        json: &Json,
        origin: &Path,
        project: &Path,
    ) -> Result<(), HooksError> {
        let Some(block) = json.value().get("permissions") else {
            return Ok(());
        };
        let Some(block) = block.as_object() else {
            return Err(HooksError::invalid(
                origin,
                "permissions: must be an object",
            ));
        };
        let base = RuleBase {
            workspace: self.cwd.clone(),
            project: project.to_path_buf(),
            home: std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .map(PathBuf::from),
        };
        for (key, action) in [
            ("allow", PermissionAction::Allow),
            ("ask", PermissionAction::Ask),
            ("deny", PermissionAction::Deny),
        ] {
            let Some(list) = block.get(key) else { continue };
            let Some(list) = list.as_array() else {
                return Err(HooksError::invalid(
                    origin,
                    format!("permissions.{key}: must be an array of rules"),
                ));
            };
            for (i, item) in list.iter().enumerate() {
                let Some(text) = item.as_str() else {
                    return Err(HooksError::invalid(
                        origin,
                        format!("permissions.{key}[{i}]: a rule must be a string"),
                    ));
                };
                let rule = ClaudeRule::parse(text, action, origin, &base).map_err(|why| {
                    HooksError::invalid(origin, format!("permissions.{key}[{i}] \"{text}\": {why}"))
                })?;
                tracing::info!(
                    rule = text,
                    list = key,
                    file = %origin.display(),
                    "permission rule loaded from settings"
                );
                self.rules.push(rule);
            }
        }
        Ok(())
    }

    /// Reads the rules of the files the hooks come from, in the same order:
    /// `<workspace>/.dsh/settings.json` (only when `workspace_trusted`: its rules may allow
    /// things, see [`crate::TrustStore`]), `<user_dir>/settings.json`, then `explicit` (which must
    /// exist). Calls resolve in `workspace` (else the current directory). This reads files:
    /// call it off async threads.
    pub fn load(
        workspace: Option<&Path>,
        workspace_trusted: bool,
        user_dir: Option<&Path>,
        explicit: Option<&Path>,
    ) -> Result<ClaudePermissions, HooksError> {
        let cwd = workspace
            .map(Path::to_path_buf)
            .or_else(|| std::env::current_dir().ok())
            .unwrap_or_else(|| PathBuf::from("."));
        let mut out = ClaudePermissions::empty(cwd.clone());
        let mut files: Vec<(PathBuf, PathBuf, bool)> = Vec::new();
        if let Some(w) = workspace.filter(|_| workspace_trusted) {
            files.push((
                w.join(crate::settings::WORKSPACE_SETTINGS),
                w.to_path_buf(),
                false,
            ));
        }
        if let Some(u) = user_dir {
            files.push((
                u.join(crate::settings::SETTINGS_FILE),
                u.to_path_buf(),
                false,
            ));
        }
        if let Some(e) = explicit {
            let dir = e
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or_else(|| cwd.clone());
            files.push((e.to_path_buf(), dir, true));
        }
        for (path, project, required) in files {
            let text = match std::fs::read_to_string(&path) {
                Ok(t) => t,
                Err(e) if !required && e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(source) => return Err(HooksError::Read { path, source }),
            };
            let json = Json::parse(&text).map_err(|e| HooksError::Json {
                path: path.clone(),
                message: e.to_string(),
            })?;
            out.add_file(&json, &path, &project)?;
        }
        Ok(out)
    }

    /// [`ClaudePermissions::load`] with the standard user directory.
    pub fn load_standard(
        workspace: Option<&Path>,
        workspace_trusted: bool,
        explicit: Option<&Path>,
    ) -> Result<ClaudePermissions, HooksError> {
        ClaudePermissions::load(
            workspace,
            workspace_trusted,
            crate::settings::user_config_dir().as_deref(),
            explicit,
        )
    }

    /// The rules, in load order.
    pub fn rules(&self) -> &[ClaudeRule] {
        &self.rules
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The rule that decides `exec`: the first deny that matches, else the first ask, else the
    /// first allow; `None` when none matches.
    pub fn decide(&self, exec: &ToolExecution) -> Option<ClaudeMatch<'_>> {
        let args = exec.arguments().json();
        for action in [
            PermissionAction::Deny,
            PermissionAction::Ask,
            PermissionAction::Allow,
        ] {
            if let Some(rule) = self
                .rules
                .iter()
                .filter(|r| r.action == action)
                .find(|r| r.matches(exec.name(), args, &self.cwd))
            {
                return Some(ClaudeMatch { rule });
            }
        }
        None
    }

    /// Whether a bare deny rule takes every call of our `tool`.
    pub fn denies_every_call(&self, tool: &str) -> bool {
        self.rules
            .iter()
            .any(|r| r.action == PermissionAction::Deny && r.is_bare_for(tool))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> RuleBase {
        RuleBase {
            workspace: PathBuf::from("/ws"),
            project: PathBuf::from("/proj"),
            home: Some(PathBuf::from("/home/u")),
        }
    }

    fn rule(text: &str, action: PermissionAction) -> ClaudeRule {
        ClaudeRule::parse(text, action, Path::new("/s.json"), &base())
            .unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    fn args(v: serde_json::Value) -> Json {
        Json::from_shallow(v)
    }

    fn bash(r: &ClaudeRule, command: &str) -> bool {
        r.matches(
            "bash",
            Some(&args(serde_json::json!({ "command": command }))),
            Path::new("/ws"),
        )
    }

    fn path(r: &ClaudeRule, tool: &str, p: &str) -> bool {
        r.matches(
            tool,
            Some(&args(serde_json::json!({ "file_path": p }))),
            Path::new("/ws"),
        )
    }

    #[test]
    fn bash_prefix_exact_and_wildcards() {
        let allow = rule("Bash(npm run test:*)", PermissionAction::Allow);
        assert!(bash(&allow, "npm run test"));
        assert!(bash(&allow, "npm run test -- --watch"));
        assert!(!bash(&allow, "npm run testing"), "word boundary");
        assert!(!bash(&allow, "npm run test && rm -rf /"), "chained");
        assert!(!bash(&allow, "npm run test $(rm x)"), "substituted");
        let exact = rule("Bash(npm run build)", PermissionAction::Allow);
        assert!(bash(&exact, "npm run build"));
        assert!(!bash(&exact, "npm run build2"));
        let wild = rule("Bash(git * main)", PermissionAction::Allow);
        assert!(bash(&wild, "git push origin main"));
        assert!(!bash(&wild, "git push origin dev"));
        let deny = rule("Bash(rm:*)", PermissionAction::Deny);
        assert!(bash(&deny, "rm -rf x"));
        assert!(bash(&deny, "ls && rm -rf x"), "a deny sees each part");
        assert!(bash(&deny, "echo $(rm -rf x)"));
        assert!(!bash(&deny, "rmdir x"));
    }

    #[test]
    fn read_and_edit_paths_follow_gitignore_anchors() {
        let env = rule("Read(./.env)", PermissionAction::Deny);
        assert!(path(&env, "read", ".env"));
        assert!(path(&env, "read", "/ws/.env"));
        assert!(
            !path(&env, "read", "sub/.env"),
            "./ anchors to the workspace"
        );
        assert!(!path(&env, "edit", ".env"), "Read rules do not cover edits");
        let any_env = rule("Read(*.env)", PermissionAction::Deny);
        assert!(
            path(&any_env, "read", "a/b/secrets.env"),
            "no slash: any depth"
        );
        let src = rule("Edit(src/**)", PermissionAction::Allow);
        assert!(path(&src, "edit", "src/a/b.rs"));
        assert!(path(&src, "write", "src/new.rs"), "Edit rules cover write");
        assert!(!path(&src, "edit", "lib/a.rs"));
        assert!(!path(&src, "read", "src/a.rs"));
        let abs = rule("Read(//etc/**)", PermissionAction::Deny);
        assert!(path(&abs, "read", "/etc/passwd"));
        let home = rule("Read(~/.ssh/**)", PermissionAction::Deny);
        assert!(path(&home, "read", "/home/u/.ssh/id_ed25519"));
        let project = rule("Edit(/docs/*.md)", PermissionAction::Deny);
        assert!(path(&project, "edit", "/proj/docs/a.md"));
        assert!(!path(&project, "edit", "/ws/docs/a.md"));
        let dir = rule("Read(build/)", PermissionAction::Deny);
        assert!(path(&dir, "read", "build/out/x.o"));
        assert!(
            path(&src, "edit", "./src/../src/x.rs"),
            "paths are normalized"
        );
        assert!(!path(&src, "edit", "src/../lib/x.rs"));
    }

    #[test]
    fn tools_dsh_does_not_have_are_not_supported() {
        for text in [
            "WebFetch(domain:example.com)",
            "WebFetch",
            "mcp__github__create_issue",
            "Read(domain:x)",
        ] {
            let e = ClaudeRule::parse(text, PermissionAction::Allow, Path::new("/s"), &base())
                .err()
                .unwrap_or_default();
            assert!(e.starts_with("not supported"), "{text}: {e}");
        }
    }
}
