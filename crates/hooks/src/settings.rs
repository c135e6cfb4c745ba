//! Hook configuration in the Claude Code settings shape, and where it is read from.
//!
//! Guarantees: a file either loads completely or is refused with an error naming the file and
//! the offending key (a bad regex, an unknown hook type, a bad timeout); files merge by
//! concatenation in the documented order (workspace, user, explicit), so hooks of every file run.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use dsh_core::Json;
use serde_json::{Map, Value};

use crate::error::HooksError;
use crate::matcher::Matcher;

/// The settings file inside a workspace, relative to its root.
pub const WORKSPACE_SETTINGS: &str = ".dsh/settings.json";
/// The settings file inside the user configuration directory.
pub const SETTINGS_FILE: &str = "settings.json";
/// A hook's timeout when it gives none, in seconds (as in Claude Code).
pub const DEFAULT_TIMEOUT_SECS: f64 = 60.0;

/// The hook points this crate runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HookEvent {
    /// Before a call runs: maps onto `tools/pre-execute`.
    PreToolUse,
    /// After a call succeeded: maps onto `tools/post-execute`.
    PostToolUse,
}

impl HookEvent {
    /// `PreToolUse` or `PostToolUse`, as in the settings and in `hook_event_name`.
    pub fn as_str(self) -> &'static str {
        match self {
            HookEvent::PreToolUse => "PreToolUse",
            HookEvent::PostToolUse => "PostToolUse",
        }
    }
}

/// What a hook error (crash, timeout, invalid output) does to the call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OnFailure {
    /// Reported, but the decision is what the other hooks made of it (Claude Code's behaviour).
    #[default]
    Ignore,
    /// Fail closed: a PreToolUse hook error denies the call, a PostToolUse one blocks the result.
    Block,
}

/// One `{"type": "command", "command", "timeout"?, "onFailure"?}` entry.
#[derive(Clone, Debug)]
pub struct CommandHook {
    /// The shell command (run with `sh -c`).
    pub command: Arc<str>,
    /// How long it may run before it is killed.
    pub timeout: Duration,
    /// What an error of this hook does.
    pub on_failure: OnFailure,
    /// The settings file it came from.
    pub origin: Arc<Path>,
}

/// A `{"matcher", "hooks": [...]}` group.
#[derive(Clone, Debug)]
pub struct MatcherGroup {
    /// Which tools the group applies to.
    pub matcher: Matcher,
    /// Its hooks, in file order.
    pub hooks: Vec<CommandHook>,
}

/// The hooks of one or more settings files, per point, in configuration order.
#[derive(Clone, Debug, Default)]
pub struct HookSettings {
    pub(crate) pre: Vec<MatcherGroup>,
    pub(crate) post: Vec<MatcherGroup>,
    pub(crate) sources: Vec<PathBuf>,
}

fn field_err(path: &Path, at: &str, message: impl std::fmt::Display) -> HooksError {
    HooksError::invalid(path, format!("{at}: {message}"))
}

fn parse_hook(path: &Path, at: &str, value: &Value) -> Result<CommandHook, HooksError> {
    let Some(map) = value.as_object() else {
        return Err(field_err(path, at, "a hook must be an object"));
    };
    match map.get("type") {
        Some(Value::String(t)) if t == "command" => {}
        Some(Value::String(t)) => {
            return Err(field_err(
                path,
                &format!("{at}.type"),
                format!("hook type \"{t}\" is not supported (only \"command\")"),
            ));
        }
        _ => {
            return Err(field_err(
                path,
                &format!("{at}.type"),
                "must be \"command\"",
            ));
        }
    }
    let command = match map.get("command") {
        Some(Value::String(c)) if !c.trim().is_empty() => Arc::from(c.as_str()),
        _ => {
            return Err(field_err(
                path,
                &format!("{at}.command"),
                "must be a non-empty string",
            ));
        }
    };
    let timeout = match map.get("timeout") {
        None | Some(Value::Null) => Duration::from_secs_f64(DEFAULT_TIMEOUT_SECS),
        Some(Value::Number(n)) => match n.as_f64() {
            Some(s) if s.is_finite() && s > 0.0 && s <= 86_400.0 => Duration::from_secs_f64(s),
            _ => {
                return Err(field_err(
                    path,
                    &format!("{at}.timeout"),
                    "must be a positive number of seconds (at most 86400)",
                ));
            }
        },
        Some(_) => {
            return Err(field_err(
                path,
                &format!("{at}.timeout"),
                "must be a number of seconds",
            ));
        }
    };
    let on_failure = match map.get("onFailure") {
        None | Some(Value::Null) => OnFailure::Ignore,
        Some(Value::String(s)) if s == "block" => OnFailure::Block,
        Some(Value::String(s)) if s == "ignore" => OnFailure::Ignore,
        Some(_) => {
            return Err(field_err(
                path,
                &format!("{at}.onFailure"),
                "must be \"block\" or \"ignore\"",
            ));
        }
    };
    Ok(CommandHook {
        command,
        timeout,
        on_failure,
        origin: Arc::from(path),
    })
}

fn parse_groups(path: &Path, at: &str, value: &Value) -> Result<Vec<MatcherGroup>, HooksError> {
    let Some(items) = value.as_array() else {
        return Err(field_err(path, at, "must be an array of matcher groups"));
    };
    let mut groups = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let at = format!("{at}[{i}]");
        let Some(map) = item.as_object() else {
            return Err(field_err(path, &at, "a matcher group must be an object"));
        };
        let matcher = match map.get("matcher") {
            None | Some(Value::Null) => Matcher::new(""),
            Some(Value::String(m)) => Matcher::new(m),
            Some(_) => Err(crate::matcher::MatcherError("must be a string".to_owned())),
        }
        .map_err(|e| field_err(path, &format!("{at}.matcher"), e.0))?;
        let Some(hooks) = map.get("hooks").and_then(Value::as_array) else {
            return Err(field_err(
                path,
                &format!("{at}.hooks"),
                "must be an array of hooks",
            ));
        };
        let hooks = hooks
            .iter()
            .enumerate()
            .map(|(j, h)| parse_hook(path, &format!("{at}.hooks[{j}]"), h))
            .collect::<Result<Vec<_>, _>>()?;
        groups.push(MatcherGroup { matcher, hooks });
    }
    Ok(groups)
}

impl HookSettings {
    /// No hooks.
    pub fn empty() -> HookSettings {
        HookSettings::default()
    }

    /// Reads settings from JSON text; `origin` names the file in errors and in events. Keys
    /// other than `hooks` are ignored (a settings file may hold more); hook points other than
    /// `PreToolUse` and `PostToolUse` are ignored with a warning.
    pub fn parse(text: &str, origin: &Path) -> Result<HookSettings, HooksError> {
        let json = Json::parse(text).map_err(|e| HooksError::Json {
            path: origin.to_path_buf(),
            message: e.to_string(),
        })?;
        HookSettings::from_json(&json, origin)
    }

    /// Reads settings from a parsed value (see [`HookSettings::parse`]).
    pub fn from_json(json: &Json, origin: &Path) -> Result<HookSettings, HooksError> {
        let Some(root) = json.value().as_object() else {
            return Err(HooksError::invalid(
                origin,
                "settings must be a JSON object",
            ));
        };
        let mut out = HookSettings {
            sources: vec![origin.to_path_buf()],
            ..HookSettings::default()
        };
        let hooks: &Map<String, Value> = match root.get("hooks") {
            None | Some(Value::Null) => return Ok(out),
            Some(Value::Object(m)) => m,
            Some(_) => return Err(field_err(origin, "hooks", "must be an object")),
        };
        for (event, groups) in hooks {
            let at = format!("hooks.{event}");
            match event.as_str() {
                "PreToolUse" => out.pre = parse_groups(origin, &at, groups)?,
                "PostToolUse" => out.post = parse_groups(origin, &at, groups)?,
                other => tracing::warn!(
                    file = %origin.display(),
                    event = other,
                    "hook point not supported by dsh; its hooks will not run"
                ),
            }
        }
        Ok(out)
    }

    /// Reads one file.
    pub fn read(path: &Path) -> Result<HookSettings, HooksError> {
        let text = std::fs::read_to_string(path).map_err(|source| HooksError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        HookSettings::parse(&text, path)
    }

    /// Reads a file that may be absent (an absent file is no hooks).
    pub fn read_optional(path: &Path) -> Result<HookSettings, HooksError> {
        match std::fs::metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(HookSettings::empty()),
            _ => HookSettings::read(path),
        }
    }

    /// Adds `later`'s hooks after this one's (concatenation, point by point).
    pub fn extend(&mut self, later: HookSettings) {
        self.pre.extend(later.pre);
        self.post.extend(later.post);
        self.sources.extend(later.sources);
    }

    /// The files the hooks came from, in merge order.
    pub fn sources(&self) -> &[PathBuf] {
        &self.sources
    }

    /// The matcher groups of one point, in configuration order.
    pub fn groups(&self, event: HookEvent) -> &[MatcherGroup] {
        match event {
            HookEvent::PreToolUse => &self.pre,
            HookEvent::PostToolUse => &self.post,
        }
    }

    /// How many command hooks one point has.
    pub fn count(&self, event: HookEvent) -> usize {
        self.groups(event).iter().map(|g| g.hooks.len()).sum()
    }

    /// Whether no hook is configured at all.
    pub fn is_empty(&self) -> bool {
        self.count(HookEvent::PreToolUse) == 0 && self.count(HookEvent::PostToolUse) == 0
    }

    /// The hooks of `event` that apply to a call of our tool `tool`, in configuration order,
    /// each with the matcher text of its group.
    pub fn matching<'a>(
        &'a self,
        event: HookEvent,
        tool: &'a str,
    ) -> impl Iterator<Item = (&'a str, &'a CommandHook)> + 'a {
        self.groups(event)
            .iter()
            .filter(move |g| g.matcher.matches_tool(tool))
            .flat_map(|g| g.hooks.iter().map(move |h| (g.matcher.source(), h)))
    }
}

/// The user-level configuration directory: `$XDG_CONFIG_HOME/dsh`, else `~/.config/dsh`.
pub fn user_config_dir() -> Option<PathBuf> {
    if let Some(xdg) = std::env::var_os("XDG_CONFIG_HOME").filter(|v| !v.is_empty()) {
        let p = PathBuf::from(xdg);
        if p.is_absolute() {
            return Some(p.join("dsh"));
        }
    }
    std::env::var_os("HOME")
        .filter(|v| !v.is_empty())
        .map(|h| PathBuf::from(h).join(".config").join("dsh"))
}
