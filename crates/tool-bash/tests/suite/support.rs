//! Fixtures: a workspace in a temp dir, a tool whose helper is this crate's `dsh-tool-bash-helper`,
//! and a runtime to call it through the whole pipeline.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use dsh_core::{AgentId, Failure, Signal, ToolExecution, ToolRegistry, ToolResult};
use dsh_guard::Hooks;
use dsh_scheduler::{Approver, Runtime};
use dsh_tool_bash::{BashConfig, BashTool, SandboxHelper, SandboxSettings, mount};
use dsh_tool_fs::Workspace;
use parking_lot::Mutex;
use serde_json::Value;

/// The helper built with this crate.
pub fn helper() -> SandboxHelper {
    SandboxHelper::new(env!("CARGO_BIN_EXE_dsh-tool-bash-helper"), Vec::new())
}

/// A temp dir holding `workspace/`, `outside/`, `out/` (full outputs) and `tmp/` (private temp
/// dirs), kept alive with the fixture.
pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub tool: BashTool,
    pub runtime: Arc<Runtime>,
    pub approver: Arc<FakeApprover>,
}

impl Fixture {
    pub fn workspace(&self) -> PathBuf {
        self.tool.config().workspace.default_cwd().to_path_buf()
    }
    pub fn outside(&self) -> PathBuf {
        canonical(&self.dir.path().join("outside"))
    }
    pub fn temp_parent(&self) -> PathBuf {
        self.tool.config().temp_parent.clone()
    }
    /// Runs `bash` with `args` through the pipeline, as agent `main`.
    pub async fn call(&self, args: Value) -> Arc<ToolResult> {
        self.call_with(args, Signal::never()).await
    }
    pub async fn call_with(&self, args: Value, signal: Signal) -> Arc<ToolResult> {
        let input = dsh_test_support::input(&next_id(), "bash", args)
            .with_agent(AgentId::new("main"))
            .with_signal(signal);
        self.runtime.execute(input).await
    }
    /// Runs a command with a description.
    pub async fn sh(&self, command: &str) -> Arc<ToolResult> {
        self.call(serde_json::json!({"command": command, "description": "test"}))
            .await
    }
}

fn next_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(1);
    format!("call_{}", N.fetch_add(1, Ordering::Relaxed))
}

pub fn canonical(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// A fixture under `settings`, with `tweak` applied to the default configuration.
pub fn fixture_with(settings: SandboxSettings, tweak: impl FnOnce(&mut BashConfig)) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    for d in ["workspace", "outside", "out", "tmp"] {
        std::fs::create_dir_all(dir.path().join(d)).unwrap();
    }
    let workspace = Workspace::new([dir.path().join("workspace")]).unwrap();
    let mut config = BashConfig::new(workspace).with_helper(Some(helper()));
    config.output_dir = canonical(&dir.path().join("out"));
    config.temp_parent = canonical(&dir.path().join("tmp"));
    config.kill_grace = std::time::Duration::from_millis(300);
    tweak(&mut config);
    let tool = BashTool::with_settings(config, settings);
    let registry = ToolRegistry::new();
    let hooks = Hooks::new();
    mount(&tool, &registry, &hooks).unwrap().keep();
    let approver = Arc::new(FakeApprover::default());
    let runtime = Arc::new(Runtime::new(registry, hooks).with_approver(approver.clone()));
    Fixture {
        dir,
        tool,
        runtime,
        approver,
    }
}

/// A fixture in the default settings (`workspace-write`).
pub fn fixture() -> Fixture {
    fixture_with(SandboxSettings::default(), |_| {})
}

/// An approver that records each question's reason and answers with its current setting.
#[derive(Default)]
pub struct FakeApprover {
    pub asked: Mutex<Vec<Option<String>>>,
    pub grant: Mutex<bool>,
}

impl FakeApprover {
    pub fn grant(&self, yes: bool) {
        *self.grant.lock() = yes;
    }
    pub fn asked(&self) -> Vec<Option<String>> {
        self.asked.lock().clone()
    }
}

#[async_trait]
impl Approver for FakeApprover {
    async fn approve(&self, exec: &ToolExecution, reason: Option<&str>) -> Result<(), Failure> {
        self.asked.lock().push(reason.map(str::to_owned));
        if *self.grant.lock() {
            Ok(())
        } else {
            Err(Failure::new(format!(
                "the user rejected tool \"{}\"",
                exec.name()
            )))
        }
    }
}

/// The result's text.
pub fn text(r: &Arc<ToolResult>) -> String {
    r.first_text().unwrap_or_default().to_owned()
}

/// The code of a failed result.
pub fn code(r: &Arc<ToolResult>) -> Option<String> {
    r.error().and_then(|f| f.code()).map(str::to_owned)
}

pub use dsh_test_support::processes_with;

/// Whether this kernel contains commands (the probe of a fresh tool).
pub async fn sandbox_available() -> bool {
    fixture().tool.probe().await.is_available()
}
