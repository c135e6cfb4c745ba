//! Shared fixtures: a temporary workspace (`<tmp>/ws`, with `<tmp>/outside` beside it), the file
//! tools over it, and a way to run one tool call directly (argument check, body, render).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use dsh_core::{
    AbortController, AgentId, Arguments, BodyEffects, Signal, ToolContext, ToolDefinition,
    ToolExecution, ToolExecutionInput, ToolResult,
};
use dsh_tool_fs::{FileVersion, FsContext, FsTools, ObservationPolicy, Workspace};
use serde_json::Value;
use tempfile::TempDir;

/// The session id the default context uses in policy tests.
pub const SESSION: &str = "session-1";

/// A workspace in a temp dir, with the tools over it.
pub struct Env {
    /// Keeps the temporary directory alive.
    _dir: TempDir,
    pub root: PathBuf,
    pub outside: PathBuf,
    pub tools: FsTools,
    defs: HashMap<String, Arc<ToolDefinition>>,
}

impl Env {
    /// A workspace with no policy; the default context is session [`SESSION`] in the root.
    pub fn new() -> Env {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let root = base.join("ws");
        let outside = base.join("outside");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        let ws = Workspace::new([&root]).unwrap();
        let tools = FsTools::new(ws);
        tools
            .sessions()
            .set_default(FsContext::new(SESSION, root.clone()));
        let defs = tools
            .definitions()
            .unwrap()
            .into_iter()
            .map(|d| (d.name().to_owned(), Arc::new(d)))
            .collect();
        Env {
            _dir: dir,
            root,
            outside,
            tools,
            defs,
        }
    }

    /// A workspace with the observation policy mounted.
    pub fn with_policy() -> (Env, ObservationPolicy) {
        let env = Env::new();
        let policy = env.tools.mount_policy();
        (env, policy)
    }

    pub fn ws(&self) -> &Workspace {
        self.tools.workspace()
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    pub fn put(&self, rel: &str, content: &str) -> PathBuf {
        let p = self.path(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(&p, content).unwrap();
        p
    }

    pub fn get(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path(rel)).unwrap()
    }

    pub fn def(&self, name: &str) -> Arc<ToolDefinition> {
        self.defs[name].clone()
    }

    /// Runs one call with the default context and a live signal.
    pub async fn call(&self, name: &str, args: Value) -> Outcome {
        self.call_with(name, args, None, Signal::never()).await
    }

    /// Runs one call as `agent` (if any) with `signal`.
    pub async fn call_with(
        &self,
        name: &str,
        args: Value,
        agent: Option<&str>,
        signal: Signal,
    ) -> Outcome {
        run_call(&self.def(name), args, agent, signal).await
    }
}

/// Runs a call the way the registry would (validation, body, render with meta) without a
/// scheduler.
pub async fn run_call(
    def: &ToolDefinition,
    args: Value,
    agent: Option<&str>,
    signal: Signal,
) -> Outcome {
    let mut input =
        ToolExecutionInput::new("call-1", def.name(), Arguments::from_value(args).unwrap())
            .with_signal(signal.clone());
    if let Some(a) = agent {
        input = input.with_agent(AgentId::from(a));
    }
    let exec = ToolExecution::new(input);
    if let Err(f) = def.check_arguments(exec.arguments()) {
        return Outcome(ToolResult::failure(f));
    }
    let ctx = ToolContext::new(exec.clone(), signal, Arc::new(BodyEffects::default()));
    let result = match def.run_body(ctx).await {
        Ok(v) => match def.render_success(exec.token(), v, true) {
            Ok(r) => r,
            Err(f) => ToolResult::failure(f),
        },
        Err(f) => ToolResult::failure(f),
    };
    Outcome(result)
}

/// A finished call.
#[derive(Debug)]
pub struct Outcome(pub ToolResult);

impl Outcome {
    pub fn is_error(&self) -> bool {
        self.0.is_error()
    }
    pub fn text(&self) -> String {
        self.0.first_text().unwrap_or_default().to_owned()
    }
    pub fn code(&self) -> Option<String> {
        self.0.error().and_then(|e| e.code()).map(str::to_owned)
    }
    pub fn error_name(&self) -> Option<String> {
        self.0
            .error()
            .and_then(|e| e.info())
            .map(|i| i.name.to_string())
    }
    pub fn value(&self) -> Value {
        self.0
            .value()
            .map(|v| v.value().clone())
            .unwrap_or(Value::Null)
    }
    pub fn meta(&self) -> Value {
        self.0
            .meta()
            .map(|v| v.value().clone())
            .unwrap_or(Value::Null)
    }
    /// The version this result's meta says is now observed.
    pub fn version(&self) -> FileVersion {
        self.meta()["observed"]["version"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap()
    }
    #[track_caller]
    pub fn ok(self) -> Outcome {
        assert!(!self.is_error(), "expected success, got {:?}", self.text());
        self
    }
    #[track_caller]
    pub fn err(self, code: &str) -> Outcome {
        assert!(
            self.is_error(),
            "expected {code}, got success {:?}",
            self.text()
        );
        assert_eq!(self.code().as_deref(), Some(code), "text: {}", self.text());
        self
    }
}

/// A synthetic version for policy-level tests.
pub fn v(n: u64) -> FileVersion {
    format!("1:0:0:0:0:0:{n:x}").parse().unwrap()
}

/// An already-aborted signal.
pub fn aborted() -> Signal {
    let c = AbortController::new();
    c.cancel();
    c.signal()
}

/// Every file under `dir` with its bytes (to prove nothing outside was touched).
pub fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let ft = e.file_type().unwrap();
            if ft.is_dir() {
                stack.push(e.path());
            } else if ft.is_symlink() {
                out.push((
                    e.path(),
                    std::fs::read_link(e.path())
                        .unwrap()
                        .into_os_string()
                        .into_encoded_bytes(),
                ));
            } else {
                out.push((e.path(), std::fs::read(e.path()).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// Bumps a file's modification time by rewriting it with the same length but other bytes.
pub fn change_outside(p: &Path, content: &str) {
    std::fs::write(p, content).unwrap();
}
