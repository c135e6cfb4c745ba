//! Shared helpers: a tempdir workspace holding real hook scripts and settings files, and a staged
//! runtime over an in-memory session with small test tools (`bash`, `edit`, `echo`, `fail`).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use dsh_core::{
    Failure, Json, ToolDefinition, ToolExecution, ToolOutput, ToolRegistry, ToolResult,
};
use dsh_guard::Hooks;
use dsh_hooks::{ClaudeHooks, Installed};
use dsh_scheduler::{Approver, Runtime, TurnDriver};
use dsh_session::Session;
use parking_lot::Mutex;
use serde_json::{Value, json};
use tempfile::TempDir;

/// A workspace in a tempdir.
pub struct Ws {
    pub dir: TempDir,
}

impl Ws {
    pub fn new() -> Ws {
        Ws {
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    /// Writes an executable script and returns its absolute path as a command string.
    pub fn script(&self, name: &str, body: &str) -> String {
        let path = self.root().join(name);
        std::fs::write(&path, body).expect("write script");
        let mut perm = std::fs::metadata(&path).expect("meta").permissions();
        perm.set_mode(0o755);
        std::fs::set_permissions(&path, perm).expect("chmod");
        path.display().to_string()
    }

    /// Writes a file under the workspace.
    pub fn file(&self, rel: &str, text: &str) -> PathBuf {
        let path = self.root().join(rel);
        if let Some(p) = path.parent() {
            std::fs::create_dir_all(p).expect("mkdir");
        }
        std::fs::write(&path, text).expect("write");
        path
    }

    /// Reads a file under the workspace ("" when absent).
    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.root().join(rel)).unwrap_or_default()
    }

    /// Loads hooks from an explicit settings file holding `settings` (no user file).
    pub fn hooks(&self, settings: Value) -> ClaudeHooks {
        let path = self.file("explicit-settings.json", &settings.to_string());
        ClaudeHooks::load(Some(self.root()), true, None, Some(&path)).expect("settings load")
    }
}

/// `{"hooks": {<point>: [{"matcher", "hooks": [{"type": "command", "command"}]}]}}`.
pub fn one_hook(point: &str, matcher: &str, command: &str) -> Value {
    json!({"hooks": {point: [{"matcher": matcher, "hooks": [{"type": "command", "command": command}]}]}})
}

/// An approver that records each question's reason and answers as told.
pub struct RecordingApprover {
    pub grant: bool,
    pub asked: Mutex<Vec<Option<String>>>,
}

#[async_trait]
impl Approver for RecordingApprover {
    async fn approve(&self, _exec: &ToolExecution, reason: Option<&str>) -> Result<(), Failure> {
        self.asked.lock().push(reason.map(str::to_owned));
        if self.grant {
            Ok(())
        } else {
            Err(Failure::new("rejected by the test approver"))
        }
    }
}

/// A pipeline with the test tools and the hooks installed, over a fresh session (no turn open).
pub struct Pipe {
    pub runtime: Arc<Runtime>,
    pub hooks: Hooks,
    pub session: Session,
    pub ran: Arc<Mutex<Vec<String>>>,
    pub installed: Installed,
    pub approver: Option<Arc<RecordingApprover>>,
    _keep: Vec<dsh_core::Registration>,
}

fn string_tool(
    name: &str,
    key: &'static str,
    ran: Arc<Mutex<Vec<String>>>,
    parallel: bool,
) -> ToolDefinition {
    let tool = name.to_owned();
    ToolDefinition::builder(name, "A test tool")
        .output(ToolOutput::string())
        .concurrency_safe(parallel)
        .execute(move |ctx| {
            let ran = ran.clone();
            let tool = tool.clone();
            async move {
                let arg = ctx
                    .arguments()
                    .json()
                    .and_then(|j| {
                        j.value()
                            .get(key)
                            .and_then(Value::as_str)
                            .map(str::to_owned)
                    })
                    .unwrap_or_default();
                ran.lock().push(format!("{tool}:{arg}"));
                Ok(Json::string(format!("{tool} ran: {arg}")))
            }
        })
        .build()
        .expect("tool")
}

/// The test tools: `bash {command}`, `edit {file_path}`, `echo {text}` (parallel), `fail`.
pub fn tools(ran: &Arc<Mutex<Vec<String>>>) -> Vec<ToolDefinition> {
    let fail = ToolDefinition::builder("fail", "Always fails")
        .output(ToolOutput::string())
        .execute(|_ctx| async move { Err(Failure::new("the tool failed")) })
        .build()
        .expect("fail tool");
    vec![
        string_tool("bash", "command", ran.clone(), false),
        string_tool("edit", "file_path", ran.clone(), true),
        string_tool("echo", "text", ran.clone(), true),
        fail,
    ]
}

impl Pipe {
    /// No approver: an ask is denied with its reason.
    pub async fn new(claude: &ClaudeHooks) -> Pipe {
        Pipe::build(claude, None).await
    }

    /// With an approver that grants or rejects.
    pub async fn with_approver(claude: &ClaudeHooks, grant: bool) -> Pipe {
        let a = Arc::new(RecordingApprover {
            grant,
            asked: Mutex::new(Vec::new()),
        });
        Pipe::build(claude, Some(a)).await
    }

    async fn build(claude: &ClaudeHooks, approver: Option<Arc<RecordingApprover>>) -> Pipe {
        let registry = ToolRegistry::new();
        let ran = Arc::new(Mutex::new(Vec::new()));
        let keep = tools(&ran)
            .into_iter()
            .map(|t| registry.register(t).expect("register"))
            .collect();
        let hooks = Hooks::new();
        let session = Session::in_memory("hooks-test");
        let installed = claude.install(&hooks, session.clone());
        let mut runtime = Runtime::new(registry, hooks.clone());
        if let Some(a) = &approver {
            runtime = runtime.with_approver(a.clone() as Arc<dyn Approver>);
        }
        Pipe {
            runtime: Arc::new(runtime),
            hooks,
            session,
            ran,
            installed,
            approver,
            _keep: keep,
        }
    }

    /// Runs one call through the staged runtime.
    pub async fn call(&self, call_id: &str, name: &str, args: Value) -> Arc<ToolResult> {
        self.runtime
            .execute(dsh_test_support::input(call_id, name, args))
            .await
    }

    /// The data of every event of type `ty`, in log order.
    pub fn events(&self, ty: &str) -> Vec<Value> {
        events_of(&self.session, ty)
    }

    /// What the tool bodies ran, in order.
    pub fn ran(&self) -> Vec<String> {
        self.ran.lock().clone()
    }

    /// A turn driver over the same runtime and session.
    pub fn driver(&self) -> TurnDriver {
        TurnDriver::new(self.runtime.clone(), self.session.clone(), None)
    }
}

/// The data of every event of type `ty` in `session`, in log order.
pub fn events_of(session: &Session, ty: &str) -> Vec<Value> {
    session
        .events()
        .pairs()
        .filter(|(_, e)| e.event_type() == ty)
        .map(|(_, e)| e.data().value().clone())
        .collect()
}

/// `(type, data)` of every event, in log order.
pub fn all_events(session: &Session) -> Vec<(String, Value)> {
    session
        .events()
        .pairs()
        .map(|(_, e)| (e.event_type().to_owned(), e.data().value().clone()))
        .collect()
}

/// An assistant message calling tools: `(id, name, arguments)`.
pub fn calls(list: &[(&str, &str, Value)]) -> Json {
    let content: Vec<Value> = list
        .iter()
        .map(|(id, name, args)| {
            json!({"type": "tool-call", "id": id, "name": name, "arguments": args.to_string()})
        })
        .collect();
    Json::from_shallow(json!({"role": "assistant", "content": content}))
}

/// An assistant message with only text.
pub fn reply(text: &str) -> Json {
    Json::from_shallow(json!({"role": "assistant", "content": [{"type": "text", "text": text}]}))
}

/// The first text of a result.
pub fn text(result: &ToolResult) -> String {
    result.first_text().unwrap_or_default().to_owned()
}

/// The texts of a result's contexts.
pub fn contexts(result: &ToolResult) -> Vec<String> {
    dsh_test_support::context_texts(result)
}

/// Waits until the process `pid` is gone or a zombie (at most `limit`).
pub fn process_gone(pid: u32, limit: Duration) -> bool {
    let deadline = std::time::Instant::now() + limit;
    loop {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => return true,
            Ok(stat) => {
                // The state follows the parenthesized command name.
                let state = stat
                    .rsplit(')')
                    .next()
                    .and_then(|s| s.split_whitespace().next());
                if state == Some("Z") {
                    return true;
                }
            }
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
