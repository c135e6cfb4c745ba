//! The tool's contract: output shape, exit codes, workdir confinement, no state between calls,
//! the tail cap with the full output saved, the private temp dir, and its definition.

use super::support::*;
use dsh_core::Arguments;
use serde_json::json;

#[tokio::test]
async fn stdout_is_returned_as_is() {
    let f = fixture();
    let r = f.sh("echo hello").await;
    assert!(!r.is_error(), "{r:?}");
    assert_eq!(text(&r), "hello\n");
}

/// The shell is found on `PATH` once and started by its path, under the name it was
/// configured with: `$0` and bash's own messages still say `bash`, with the helper or without.
#[tokio::test]
async fn the_shell_still_calls_itself_bash() {
    let contained = fixture();
    let direct = fixture_with(
        dsh_tool_bash::SandboxSettings {
            mode: dsh_tool_bash::SandboxMode::DangerFullAccess,
            ..Default::default()
        },
        |c| c.helper = None,
    );
    for f in [&contained, &direct] {
        for _ in 0..2 {
            let t = text(&f.sh("echo $0; no-such-command-4711").await);
            assert!(
                t.starts_with(
                    "bash\n[stderr]\nbash: line 1: no-such-command-4711: command not found"
                ),
                "{t}"
            );
        }
    }
}

#[tokio::test]
async fn a_command_without_output_says_so() {
    let f = fixture();
    assert_eq!(text(&f.sh("true").await), "(no output)");
}

#[tokio::test]
async fn stderr_and_a_non_zero_exit_are_a_result_in_the_reference_shape() {
    let f = fixture();
    let r = f.sh("echo out; echo err >&2; exit 3").await;
    assert!(
        !r.is_error(),
        "a non-zero exit is not a tool failure: {r:?}"
    );
    assert_eq!(text(&r), "out\n[stderr]\nerr\n[exit code: 3]");
    let value = r.value().unwrap().value();
    assert_eq!(value["exitCode"], json!(3));
    assert_eq!(value["sandbox"], json!("workspace-write"));
    assert_eq!(value["truncated"], json!(false));
}

#[tokio::test]
async fn output_without_a_final_newline_still_separates_the_notes() {
    let f = fixture();
    let r = f.sh("printf out; printf err >&2; exit 1").await;
    assert_eq!(text(&r), "out\n[stderr]\nerr\n[exit code: 1]");
}

#[tokio::test]
async fn each_call_is_a_fresh_shell_in_the_workspace() {
    let f = fixture();
    f.sh("X=1; cd /; export Y=2").await;
    let r = f.sh("echo ${X:-unset} ${Y:-unset}; pwd").await;
    assert_eq!(
        text(&r),
        format!("unset unset\n{}\n", f.workspace().display())
    );
}

#[tokio::test]
async fn workdir_resolves_against_the_workspace() {
    let f = fixture();
    std::fs::create_dir_all(f.workspace().join("sub/dir")).unwrap();
    let r = f
        .call(json!({"command": "pwd", "description": "d", "workdir": "sub/dir"}))
        .await;
    assert_eq!(
        text(&r),
        format!("{}\n", f.workspace().join("sub/dir").display())
    );
    let abs = f.workspace().join("sub");
    let r = f
        .call(json!({"command": "pwd", "description": "d", "workdir": abs}))
        .await;
    assert_eq!(text(&r), format!("{}\n", abs.display()));
}

#[tokio::test]
async fn workdir_outside_the_roots_is_refused_before_anything_runs() {
    let f = fixture();
    let marker = f.outside().join("ran");
    std::os::unix::fs::symlink(f.outside(), f.workspace().join("escape")).unwrap();
    for workdir in [
        f.outside().display().to_string(),
        "../outside".to_owned(),
        "escape".to_owned(),
        "/".to_owned(),
    ] {
        let r = f
            .call(json!({
                "command": format!("touch {}", marker.display()),
                "description": "d",
                "workdir": workdir,
            }))
            .await;
        assert!(r.is_error(), "{workdir}: {r:?}");
        assert_eq!(code(&r).as_deref(), Some("BASH_WORKDIR"), "{workdir}");
        assert!(!marker.exists(), "{workdir}: the command must not run");
    }
}

#[tokio::test]
async fn workdir_must_be_a_directory() {
    let f = fixture();
    std::fs::write(f.workspace().join("file"), "x").unwrap();
    let r = f
        .call(json!({"command": "pwd", "description": "d", "workdir": "file"}))
        .await;
    assert_eq!(code(&r).as_deref(), Some("BASH_WORKDIR"));
    assert!(text(&r).contains("is not a directory"), "{}", text(&r));
}

#[tokio::test]
async fn long_output_keeps_its_tail_and_saves_all_of_it_to_a_reported_file() {
    let f = fixture_with(Default::default(), |c| c.max_output_bytes = 1000);
    let r = f.sh("seq 1 5000; echo warn >&2").await;
    assert!(!r.is_error(), "{r:?}");
    let t = text(&r);
    let stdout: String = (1..=5000).map(|i| format!("{i}\n")).collect();
    let total = stdout.len() + "warn\n".len();
    let first = t.lines().next().unwrap();
    let prefix =
        format!("[output truncated: showing the last 1000 of {total} bytes; full output: ");
    assert!(first.starts_with(&prefix), "{first}");
    let path = first[prefix.len()..first.len() - 1].to_owned();
    assert!(t.ends_with("4999\n5000\n[stderr]\nwarn\n"), "{t}");
    let full = std::fs::read_to_string(&path).unwrap();
    assert_eq!(full, format!("{stdout}\n[stderr]\nwarn\n"));
    let value = r.value().unwrap().value();
    assert_eq!(value["truncated"], json!(true));
    assert_eq!(value["fullOutputPath"], json!(path));
    assert!(path.starts_with(&*f.tool.config().output_dir.to_string_lossy()));
}

/// Each stream alone fits its tail, so neither was spooled while it ran: the full file is
/// written from memory once the two together are found to be over the cap.
#[tokio::test]
async fn streams_that_fit_alone_but_not_together_are_saved_whole() {
    let f = fixture_with(Default::default(), |c| c.max_output_bytes = 1000);
    let r = f.sh("seq 1 150; seq 1001 1150 >&2").await;
    assert!(!r.is_error(), "{r:?}");
    let value = r.value().unwrap().value();
    assert_eq!(value["truncated"], json!(true));
    let path = value["fullOutputPath"].as_str().unwrap().to_owned();
    let stdout: String = (1..=150).map(|i| format!("{i}\n")).collect();
    let stderr: String = (1001..=1150).map(|i| format!("{i}\n")).collect();
    assert!(stdout.len() < 1000 && stderr.len() < 1000);
    let full = std::fs::read_to_string(&path).unwrap();
    assert_eq!(full, format!("{stdout}\n[stderr]\n{stderr}"));
    let left: Vec<_> = std::fs::read_dir(&f.tool.config().output_dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(
        left,
        vec![std::path::PathBuf::from(&path)],
        "no side file is left"
    );
}

/// stderr outgrew its tail and was spooled while it ran; stdout (empty) never was.
#[tokio::test]
async fn a_long_stderr_alone_is_saved_whole() {
    let f = fixture_with(Default::default(), |c| c.max_output_bytes = 1000);
    let r = f.sh("seq 1 5000 >&2").await;
    let value = r.value().unwrap().value();
    assert_eq!(value["truncated"], json!(true));
    let path = value["fullOutputPath"].as_str().unwrap().to_owned();
    let stderr: String = (1..=5000).map(|i| format!("{i}\n")).collect();
    let full = std::fs::read_to_string(&path).unwrap();
    assert_eq!(full, format!("\n[stderr]\n{stderr}"));
}

/// The spool keeps the first `max_spool_bytes` of a stream, whether it was spooled as the
/// command ran or written from memory at the end.
#[tokio::test]
async fn the_full_file_stops_at_the_spool_limit() {
    let f = fixture_with(Default::default(), |c| {
        c.max_output_bytes = 1000;
        c.max_spool_bytes = 100;
    });
    let r = f.sh("seq 1 5000; seq 1 300 >&2").await;
    let path = r.value().unwrap().value()["fullOutputPath"]
        .as_str()
        .unwrap()
        .to_owned();
    let stdout: String = (1..=5000).map(|i| format!("{i}\n")).collect();
    let stderr: String = (1..=300).map(|i| format!("{i}\n")).collect();
    let full = std::fs::read_to_string(&path).unwrap();
    assert_eq!(
        full,
        format!("{}\n[stderr]\n{}", &stdout[..100], &stderr[..100])
    );
}

#[tokio::test]
async fn output_that_fits_leaves_no_file_behind() {
    let f = fixture();
    let r = f.sh("seq 1 100; echo e >&2").await;
    assert!(!text(&r).starts_with("[output truncated"));
    let left: Vec<_> = std::fs::read_dir(&f.tool.config().output_dir)
        .unwrap()
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[tokio::test]
async fn each_call_has_a_private_temp_dir_that_is_removed_afterwards() {
    let f = fixture();
    let r = f
        .sh("echo $TMPDIR; touch $TMPDIR/scratch && echo wrote")
        .await;
    let t = text(&r);
    let mut lines = t.lines();
    let tmp = std::path::PathBuf::from(lines.next().unwrap());
    assert_eq!(lines.next(), Some("wrote"), "{t}");
    assert!(tmp.starts_with(f.temp_parent()), "{}", tmp.display());
    assert!(!tmp.exists(), "the temp dir outlived the call");
    let other = text(&f.sh("echo $TMPDIR").await);
    assert_ne!(other.trim(), tmp.to_string_lossy());
}

#[tokio::test]
async fn the_command_sees_its_mode_and_workspace() {
    let f = fixture();
    let r = f.sh("echo $DSH_SANDBOX_MODE $DSH_WORKSPACE").await;
    assert_eq!(
        text(&r),
        format!("workspace-write {}\n", f.workspace().display())
    );
}

#[tokio::test]
async fn the_definition_is_exclusive_with_the_command_as_permission_subject() {
    let f = fixture();
    let def = f.tool.definition().unwrap();
    assert_eq!(def.name(), "bash");
    let args = Arguments::from_value(json!({"command": "ls -la", "description": "List"})).unwrap();
    assert!(!def.is_concurrency_safe(&args));
    assert_eq!(def.permission_subject(&args).as_deref(), Some("ls -la"));
    let schema = def.parameters().value();
    // Issue 17 item 3: only the command is required, as in Claude Code.
    assert_eq!(schema["required"], json!(["command"]));
    for p in [
        "command",
        "description",
        "timeout",
        "timeoutMs",
        "workdir",
        "sandbox_permissions",
    ] {
        assert!(
            schema["properties"].get(p).is_some(),
            "{p} missing: {schema}"
        );
    }
}

#[tokio::test]
async fn arguments_are_validated_before_anything_runs() {
    let f = fixture();
    let r = f.call(json!({"description": "no command"})).await;
    assert_eq!(code(&r).as_deref(), Some("INVALID_ARGS"), "{r:?}");
    let r = f
        .call(json!({"command": "echo hi", "description": "d", "timeoutMs": -5}))
        .await;
    assert_eq!(code(&r).as_deref(), Some("INVALID_ARGS"), "{r:?}");
    let r = f.call(json!({"command": "echo hi", "timeout": -5})).await;
    assert_eq!(code(&r).as_deref(), Some("INVALID_ARGS"), "{r:?}");
    let r = f.call(json!({"command": "echo hi", "tiemout": 5})).await;
    assert_eq!(code(&r).as_deref(), Some("INVALID_ARGS"), "{r:?}");
    // Without a description, with Claude Code's `timeout`: it runs.
    let r = f.call(json!({"command": "echo hi", "timeout": 5000})).await;
    assert_eq!(code(&r), None, "{r:?}");
}
