//! The file tools end to end through the step scheduler and a session log (issue 5, item 4):
//! an edit without a read is refused, a read then an edit succeeds, an edit after an outside
//! change is stale, and two writes of one file in one batch are never both applied.

use std::sync::Arc;

use dsh_core::{Signal, ToolRegistry};
use dsh_guard::Hooks;
use dsh_scheduler::{Runtime, StepContext, StepOutcome, ToolCallBlock};
use dsh_session::Session;
use dsh_tool_fs::{FsContext, FsTools, Workspace, register_fs_tools};
use serde_json::json;

struct Rig {
    _dir: tempfile::TempDir,
    root: std::path::PathBuf,
    runtime: Arc<Runtime>,
    session: Session,
    step: u32,
    _keep: (dsh_tool_fs::FsToolsHandle, dsh_tool_fs::ObservationPolicy),
}

impl Rig {
    fn new() -> Rig {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().canonicalize().expect("canonical root");
        let workspace = Workspace::new([&root]).expect("workspace");
        let tools = FsTools::new(workspace);
        let session = Session::in_memory("fs-e2e");
        tools
            .sessions()
            .set_default(FsContext::new(session.id(), root.clone()));
        let policy = tools.mount_policy();
        let registry = ToolRegistry::new();
        let handle = register_fs_tools(&registry, &tools).expect("register");
        let runtime = Arc::new(Runtime::new(registry, Hooks::new()));
        Rig {
            _dir: dir,
            root,
            runtime,
            session,
            step: 0,
            _keep: (handle, policy),
        }
    }

    async fn step(&mut self, calls: &[(&str, &str, serde_json::Value)]) -> StepOutcome {
        self.step += 1;
        let blocks: Vec<ToolCallBlock> = calls
            .iter()
            .map(|(id, name, args)| ToolCallBlock::new(id, name, &args.to_string()))
            .collect();
        let cx = StepContext {
            session: self.session.clone(),
            turn: 1,
            step: self.step,
            agent: None,
            signal: Signal::never(),
            max_parallel: 10,
        };
        self.runtime
            .run_step(&cx, &blocks)
            .await
            .expect("step runs")
    }

    fn code(outcome: &StepOutcome, i: usize) -> Option<String> {
        outcome.results[i]
            .error()
            .and_then(|e| e.code())
            .map(str::to_owned)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edit_without_read_is_refused_then_read_edit_succeeds_then_outside_change_is_stale() {
    let mut rig = Rig::new();
    let file = rig.root.join("a.txt");
    std::fs::write(&file, "hello world\n").expect("seed");

    let blind = rig
        .step(&[(
            "c1",
            "edit",
            json!({"file_path": "a.txt", "old_string": "world", "new_string": "there"}),
        )])
        .await;
    assert_eq!(Rig::code(&blind, 0).as_deref(), Some("FS_NOT_OBSERVED"));
    assert_eq!(
        std::fs::read_to_string(&file).expect("read"),
        "hello world\n"
    );

    let read_then_edit = rig
        .step(&[("c2", "read", json!({"file_path": "a.txt"}))])
        .await;
    assert!(!read_then_edit.results[0].is_error());
    let edited = rig
        .step(&[(
            "c3",
            "edit",
            json!({"file_path": "a.txt", "old_string": "world", "new_string": "there"}),
        )])
        .await;
    assert!(!edited.results[0].is_error(), "{:?}", edited.results[0]);
    assert_eq!(
        std::fs::read_to_string(&file).expect("read"),
        "hello there\n"
    );

    std::fs::write(&file, "changed outside\n").expect("outside change");
    let stale = rig
        .step(&[(
            "c4",
            "edit",
            json!({"file_path": "a.txt", "old_string": "changed", "new_string": "x"}),
        )])
        .await;
    assert_eq!(Rig::code(&stale, 0).as_deref(), Some("FS_STALE_VERSION"));
    assert_eq!(
        std::fs::read_to_string(&file).expect("read"),
        "changed outside\n"
    );
    let problems = dsh_session::check_events(rig.session.events().iter().map(|e| (e.0, &e.1)));
    assert!(problems.is_empty(), "{problems:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_writes_of_one_file_in_one_batch_are_never_both_applied() {
    let mut rig = Rig::new();
    let file = rig.root.join("b.txt");
    std::fs::write(&file, "v0\n").expect("seed");
    rig.step(&[("r", "read", json!({"file_path": "b.txt"}))])
        .await;
    let both = rig
        .step(&[
            (
                "w1",
                "write",
                json!({"file_path": "b.txt", "content": "one\n"}),
            ),
            (
                "w2",
                "write",
                json!({"file_path": "b.txt", "content": "two\n"}),
            ),
        ])
        .await;
    // Mutations are exclusive, so the second write runs after the first committed: its basis
    // is the version the first write recorded, and it applies on top of it. What can never
    // happen is both applying against the same basis; the disk holds exactly one of them.
    let disk = std::fs::read_to_string(&file).expect("read");
    assert!(disk == "one\n" || disk == "two\n", "{disk:?}");
    let ok: Vec<bool> = both.results.iter().map(|r| !r.is_error()).collect();
    assert!(ok.iter().any(|b| *b), "{:?}", both.results);
    if ok == [true, true] {
        assert_eq!(
            disk, "two\n",
            "the later write wins when both apply in order"
        );
    }
}
