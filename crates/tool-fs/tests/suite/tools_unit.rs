//! FS-24..35: the tools' registration, classification and results with the real policy.
//! FS-26 (no provider: pending) cannot happen here, since `FsTools` needs a `Workspace`;
//! FS-28 is TS-only (NaN cannot occur in a JSON value), its Rust analogue is tested below.

use std::sync::{Arc, Mutex};

use dsh_core::{Arguments, ExecutionMode, ToolRegistry};
use dsh_tool_fs::codes::{FS_NOT_FOUND, FS_NOT_OBSERVED, FS_STALE_VERSION};
use dsh_tool_fs::{EditCondition, WriteCondition, register_fs_tools};
use serde_json::json;

use super::common::{Env, change_outside};

#[test]
fn fs_24_mount_registers_the_file_tools() {
    let env = Env::new();
    let registry = ToolRegistry::new();
    let handle = register_fs_tools(&registry, &env.tools).unwrap();
    let names = registry.names(None);
    for n in ["read", "write", "edit", "glob", "grep"] {
        assert!(names.contains(&n.to_owned()), "{n} missing from {names:?}");
    }
    assert_eq!(
        handle.names(),
        vec!["read", "write", "edit", "glob", "grep"]
    );
    handle.dispose();
}

#[test]
fn fs_25_reads_are_parallel_mutations_exclusive() {
    let env = Env::new();
    let registry = ToolRegistry::new();
    let _h = register_fs_tools(&registry, &env.tools).unwrap();
    let mode = |name: &str, args: serde_json::Value| {
        registry.execution_mode(name, None, &Arguments::from_value(args).unwrap())
    };
    assert_eq!(
        mode("read", json!({"file_path": "a"})),
        ExecutionMode::Parallel
    );
    assert_eq!(
        mode("glob", json!({"pattern": "*"})),
        ExecutionMode::Parallel
    );
    assert_eq!(
        mode("grep", json!({"pattern": "x"})),
        ExecutionMode::Parallel
    );
    assert_eq!(
        mode("write", json!({"file_path": "a", "content": ""})),
        ExecutionMode::Exclusive
    );
    assert_eq!(
        mode(
            "edit",
            json!({"file_path": "a", "old_string": "x", "new_string": "y"})
        ),
        ExecutionMode::Exclusive
    );
    // Arguments that fail the schema are exclusive too (fail-closed).
    assert_eq!(mode("read", json!({})), ExecutionMode::Exclusive);
}

#[test]
fn fs_25_permission_subjects_are_the_path_or_pattern() {
    let env = Env::new();
    let def = env.def("edit");
    let args = Arguments::from_value(
        json!({"file_path": "src/a.rs", "old_string": "a", "new_string": "b"}),
    )
    .unwrap();
    assert_eq!(def.permission_subject(&args).as_deref(), Some("src/a.rs"));
    let g = Arguments::from_value(json!({"pattern": "**/*.rs"})).unwrap();
    assert_eq!(
        env.def("glob").permission_subject(&g).as_deref(),
        Some("**/*.rs")
    );
}

#[test]
fn fs_27_unload_removes_every_schema() {
    let env = Env::new();
    let registry = ToolRegistry::new();
    let handle = register_fs_tools(&registry, &env.tools).unwrap();
    assert_eq!(registry.schemas(None).len(), 5);
    assert_eq!(handle.prompt_sections().len(), 5);
    handle.dispose();
    assert!(registry.schemas(None).is_empty());
    assert!(registry.get("read", None).is_none());
}

#[test]
fn fs_27_a_name_clash_leaves_nothing_half_registered() {
    let env = Env::new();
    let registry = ToolRegistry::new();
    let first = register_fs_tools(&registry, &env.tools).unwrap();
    assert!(register_fs_tools(&registry, &env.tools).is_err());
    assert_eq!(registry.schemas(None).len(), 5);
    first.dispose();
    assert!(registry.schemas(None).is_empty());
}

#[tokio::test]
async fn fs_28_rust_analogue_raw_arguments_fail_validation() {
    let env = Env::new();
    let def = env.def("read");
    let args = Arguments::from_raw("{not json");
    let err = def.check_arguments(&args).unwrap_err();
    assert_eq!(err.code(), Some("INVALID_ARGS"));
    let out = env
        .call("read", json!({"file_path": "a", "offset": "two"}))
        .await;
    assert_eq!(out.code().as_deref(), Some("INVALID_ARGS"));
}

#[tokio::test]
async fn fs_29_read_then_edit_uses_the_read_version_as_basis() {
    let (env, _p) = Env::with_policy();
    env.put("a.txt", "a\n");
    let seen: Arc<Mutex<Vec<EditCondition>>> = Arc::default();
    let s = seen.clone();
    let _spy = env.tools.hooks().edit_intent().prepend(move |q, next| {
        let answer = next.run(q);
        if let Ok(c) = &answer {
            s.lock().unwrap().push(*c);
        }
        answer
    });
    let v1 = env
        .call("read", json!({"file_path": "a.txt"}))
        .await
        .ok()
        .version();
    env.call(
        "edit",
        json!({"file_path": "a.txt", "old_string": "a", "new_string": "b"}),
    )
    .await
    .ok();
    assert_eq!(*seen.lock().unwrap(), vec![EditCondition::IfVersion(v1)]);
}

#[tokio::test]
async fn fs_30_read_of_a_missing_file_is_not_found() {
    let (env, _p) = Env::with_policy();
    let out = env
        .call("read", json!({"file_path": "missing.txt"}))
        .await
        .err(FS_NOT_FOUND);
    assert_eq!(out.error_name().as_deref(), Some("FsError"));
    assert_eq!(
        out.text(),
        format!(
            "Error: cannot read \"{}\": not found",
            env.path("missing.txt").display()
        )
    );
}

#[tokio::test]
async fn fs_31_write_of_a_new_file_creates_under_create_if_absent() {
    let (env, _p) = Env::with_policy();
    let seen: Arc<Mutex<Vec<WriteCondition>>> = Arc::default();
    let s = seen.clone();
    let _spy = env.tools.hooks().write_intent().prepend(move |q, next| {
        let answer = next.run(q);
        if let Ok(c) = &answer {
            s.lock().unwrap().push(*c);
        }
        answer
    });
    let out = env
        .call("write", json!({"file_path": "new.txt", "content": "hi"}))
        .await
        .ok();
    let v = out.value();
    assert_eq!(v["path"], json!(env.path("new.txt").to_str().unwrap()));
    assert_eq!(v["operation"], json!("create"));
    assert_eq!(v["before"], json!(null));
    assert_eq!(v["after"], json!("hi"));
    assert!(out.text().contains("Created file"), "{}", out.text());
    assert_eq!(*seen.lock().unwrap(), vec![WriteCondition::CreateIfAbsent]);
}

#[tokio::test]
async fn fs_32_stale_write_carries_code_and_remedy() {
    let (env, _p) = Env::with_policy();
    let p = env.put("a.txt", "one\n");
    env.call("read", json!({"file_path": "a.txt"})).await.ok();
    change_outside(&p, "two\n");
    let out = env
        .call("write", json!({"file_path": "a.txt", "content": "three\n"}))
        .await
        .err(FS_STALE_VERSION);
    assert_eq!(out.error_name().as_deref(), Some("FsError"));
    assert!(
        out.text().contains("re-read the file, then retry"),
        "{}",
        out.text()
    );
    assert_eq!(env.get("a.txt"), "two\n");
}

#[tokio::test]
async fn fs_33_read_then_edit_value_and_exact_text() {
    let (env, _p) = Env::with_policy();
    env.put("a.txt", "a");
    env.call("read", json!({"file_path": "a.txt"})).await.ok();
    let out = env
        .call(
            "edit",
            json!({"file_path": "a.txt", "old_string": "a", "new_string": "b"}),
        )
        .await
        .ok();
    let abs = env.path("a.txt");
    let v = out.value();
    assert_eq!(v["path"], json!(abs.to_str().unwrap()));
    assert_eq!(v["before"], json!("a"));
    assert_eq!(v["after"], json!("b"));
    assert_eq!(
        out.text(),
        format!("The file {} has been updated successfully.", abs.display())
    );
}

#[tokio::test]
async fn fs_34_edit_never_read_is_not_observed() {
    let (env, _p) = Env::with_policy();
    env.put("a.txt", "a\n");
    let out = env
        .call(
            "edit",
            json!({"file_path": "a.txt", "old_string": "a", "new_string": "b"}),
        )
        .await
        .err(FS_NOT_OBSERVED);
    assert_eq!(
        out.text(),
        format!(
            "Error: edit requires reading \"{}\" first — read the file, then retry",
            env.path("a.txt").display()
        )
    );
}

#[tokio::test]
async fn fs_35_edit_meta_holds_the_hunk_with_three_lines_of_context() {
    let (env, _p) = Env::with_policy();
    env.put("seven.txt", "l1\nl2\nl3\nOLD\nl5\nl6\nl7\nl8\nl9\n");
    env.call("read", json!({"file_path": "seven.txt"}))
        .await
        .ok();
    let out = env
        .call(
            "edit",
            json!({"file_path": "seven.txt", "old_string": "OLD", "new_string": "NEW"}),
        )
        .await
        .ok();
    let meta = out.meta();
    assert_eq!(
        meta["diffs"],
        json!([{
            "path": "seven.txt",
            "oldText": "l1\nl2\nl3\nOLD\nl5\nl6\nl7",
            "newText": "l1\nl2\nl3\nNEW\nl5\nl6\nl7"
        }])
    );
    // Beside the reference's key, only the observation used to rebuild state on resume.
    let keys: Vec<&String> = meta.as_object().unwrap().keys().collect();
    assert_eq!(keys, vec!["diffs", "observed"]);
}
