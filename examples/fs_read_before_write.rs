//! The filesystem tools with the read-before-write policy alone, without the rest of the
//! harness: an edit of a file the session never read is refused; after a read it goes through.
//!
//! Run: `cargo run --example fs_read_before_write`

use std::sync::Arc;

use dsh::core::{Arguments, ToolExecutionInput, ToolRegistry};
use dsh::fs::{FsContext, FsTools, Workspace, register_fs_tools};
use dsh::scheduler::Runtime;
use dsh::serde_json::json;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    std::fs::write(dir.path().join("config.toml"), "debug = true\n")?;

    // The seam: every path is confined to the workspace roots.
    let workspace = Workspace::new([dir.path()])?;
    let tools = FsTools::new(workspace);
    // Which session a call belongs to: the policy remembers what each session has read.
    let cwd = tools.workspace().default_cwd().to_path_buf();
    tools.sessions().set_default(FsContext::new("s1", cwd));
    // The read-before-write policy, on the tools' own `fs/write-intent` and `fs/edit-intent`.
    tools.mount_policy().keep();

    let registry = ToolRegistry::new();
    register_fs_tools(&registry, &tools)?.keep(); // read, write, edit, glob, grep
    let runtime = Arc::new(Runtime::new(registry, dsh::guard::Hooks::new()));

    let run = |id: &str, name: &str, args: dsh::serde_json::Value| {
        let runtime = runtime.clone();
        let input = Arguments::from_value(args).map(|a| ToolExecutionInput::new(id, name, a));
        async move { Ok::<_, dsh::core::JsonError>(runtime.execute(input?).await) }
    };
    let edit = json!({"file_path": "config.toml", "old_string": "true", "new_string": "false"});

    let refused = run("e1", "edit", edit.clone()).await?;
    println!(
        "edit before read: {}",
        refused.first_text().unwrap_or_default()
    );
    assert!(refused.is_error());
    assert_eq!(
        refused.error().and_then(|f| f.code()),
        Some("FS_NOT_OBSERVED")
    );

    let read = run("r1", "read", json!({"file_path": "config.toml"})).await?;
    assert!(!read.is_error());
    let edited = run("e2", "edit", edit).await?;
    println!(
        "edit after read: {}",
        edited.first_text().unwrap_or_default()
    );
    assert!(!edited.is_error());
    assert_eq!(
        std::fs::read_to_string(dir.path().join("config.toml"))?,
        "debug = false\n"
    );
    Ok(())
}

#[test]
fn example_runs() -> Result<(), Box<dyn std::error::Error>> {
    main()
}
