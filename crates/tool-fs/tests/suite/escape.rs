//! The escape suite: every way out of the roots (`..`, absolute paths, symlinks at any component
//! including dangling and chained ones, `/proc/self/...`, NUL bytes, loops) is denied for every
//! tool, the error names the path and the roots, and nothing outside is read, created or changed.

use std::os::unix::fs::symlink;

use dsh_tool_fs::codes::{FS_INVALID_PATH, FS_OUTSIDE_WORKSPACE};
use dsh_tool_fs::{FsError, WriteCondition};
use serde_json::{Value, json};

use super::common::{Env, snapshot};

const SECRET: &str = "TOP-SECRET-CONTENT";

/// A workspace with an outside directory holding a secret, and symlinks leading out.
fn hostile() -> Env {
    let env = Env::new();
    std::fs::write(env.outside.join("secret.txt"), format!("{SECRET}\n")).unwrap();
    std::fs::create_dir_all(env.outside.join("dir")).unwrap();
    std::fs::write(env.outside.join("dir/inner.txt"), "inner\n").unwrap();
    symlink(&env.outside, env.path("link_dir")).unwrap();
    symlink(env.outside.join("secret.txt"), env.path("link_file")).unwrap();
    std::fs::create_dir_all(env.path("a")).unwrap();
    symlink("../../outside", env.path("a/rel_out")).unwrap();
    symlink(env.outside.join("not-yet.txt"), env.path("dangling")).unwrap();
    symlink("chain2", env.path("chain1")).unwrap();
    symlink(&env.outside, env.path("chain2")).unwrap();
    symlink("/proc/self/root", env.path("procroot")).unwrap();
    symlink("loop2", env.path("loop1")).unwrap();
    symlink("loop1", env.path("loop2")).unwrap();
    env
}

fn tricks(env: &Env) -> Vec<String> {
    let out = env.outside.display().to_string();
    let root = env.root.display().to_string();
    vec![
        "../outside/secret.txt".into(),
        "sub/../../outside/secret.txt".into(),
        "./../outside/new.txt".into(),
        format!("{out}/secret.txt"),
        format!("{out}/new.txt"),
        format!("{root}/../outside/secret.txt"),
        "/etc/passwd".into(),
        "/tmp/dsh-escape-new.txt".into(),
        "link_dir/secret.txt".into(),
        "link_dir/new.txt".into(),
        "link_dir/dir/inner.txt".into(),
        "link_file".into(),
        "a/rel_out/secret.txt".into(),
        "a/rel_out/new.txt".into(),
        "dangling".into(),
        "chain1/secret.txt".into(),
        "chain1/new.txt".into(),
        "procroot/etc/passwd".into(),
        format!("procroot{out}/secret.txt"),
        format!("/proc/self/root{out}/secret.txt"),
        format!("/proc/self/cwd/../outside/secret.txt"),
        "/proc/self/environ".into(),
        "/".into(),
        "..".into(),
    ]
}

fn assert_denied(out: &super::common::Outcome, raw: &str, env: &Env) {
    assert!(out.is_error(), "{raw}: allowed: {}", out.text());
    let code = out.code().unwrap_or_default();
    assert!(
        code == FS_OUTSIDE_WORKSPACE || code == FS_INVALID_PATH,
        "{raw}: code {code}: {}",
        out.text()
    );
    assert!(!out.text().contains(SECRET), "{raw}: leaked the secret");
    if code == FS_OUTSIDE_WORKSPACE {
        assert!(
            out.text().contains(raw),
            "{raw}: message must name the path: {}",
            out.text()
        );
        assert!(
            out.text().contains(&env.root.display().to_string()),
            "{raw}: message must name the roots: {}",
            out.text()
        );
    }
}

#[tokio::test]
async fn every_escape_is_denied_for_every_tool_and_nothing_outside_changes() {
    let (env, _policy) = {
        let env = hostile();
        let p = env.tools.mount_policy();
        (env, p)
    };
    let before = snapshot(&env.outside);
    for raw in tricks(&env) {
        let calls: Vec<(&str, Value)> = vec![
            ("read", json!({"file_path": raw})),
            ("write", json!({"file_path": raw, "content": "pwned"})),
            (
                "edit",
                json!({"file_path": raw, "old_string": SECRET, "new_string": "pwned"}),
            ),
            ("glob", json!({"pattern": "*", "path": raw})),
            ("grep", json!({"pattern": "SECRET", "path": raw})),
        ];
        for (tool, args) in calls {
            let out = env.call(tool, args).await;
            assert_denied(&out, &raw, &env);
        }
    }
    assert_eq!(
        snapshot(&env.outside),
        before,
        "something outside the root changed"
    );
    assert!(!std::path::Path::new("/tmp/dsh-escape-new.txt").exists());
}

#[tokio::test]
async fn escapes_are_denied_without_the_policy_too() {
    let env = hostile();
    let before = snapshot(&env.outside);
    for raw in tricks(&env) {
        let out = env
            .call("write", json!({"file_path": raw, "content": "pwned"}))
            .await;
        assert_denied(&out, &raw, &env);
    }
    assert_eq!(snapshot(&env.outside), before);
}

#[tokio::test]
async fn nul_bytes_and_loops_are_invalid_paths() {
    let env = hostile();
    for raw in ["a\0b", "loop1", "loop1/x"] {
        let out = env.call("read", json!({"file_path": raw})).await;
        assert_eq!(
            out.code().as_deref(),
            Some(FS_INVALID_PATH),
            "{raw}: {}",
            out.text()
        );
    }
    let out = env.call("read", json!({"file_path": ""})).await;
    assert_eq!(out.code().as_deref(), Some(FS_INVALID_PATH));
}

#[tokio::test]
async fn searches_do_not_follow_links_out_of_the_root() {
    let env = hostile();
    env.put("inside.txt", "SECRET is not here\n");
    let grep = env.call("grep", json!({"pattern": SECRET})).await.ok();
    assert_eq!(grep.text(), "No matches found");
    let glob = env.call("glob", json!({"pattern": "**/*.txt"})).await.ok();
    let files = glob.value()["files"].clone();
    assert_eq!(files, json!([env.path("inside.txt").to_str().unwrap()]));
}

#[tokio::test]
async fn links_that_stay_inside_are_followed() {
    let env = Env::new();
    env.put("real/data.txt", "inside\n");
    symlink(env.path("real"), env.path("alias")).unwrap();
    symlink("real/data.txt", env.path("file_alias")).unwrap();
    let out = env
        .call("read", json!({"file_path": "alias/data.txt"}))
        .await
        .ok();
    assert!(out.text().contains("1: inside"));
    // The canonical path is what is shown and observed.
    assert_eq!(
        out.value()["path"],
        json!(env.path("real/data.txt").to_str().unwrap())
    );
    env.call("read", json!({"file_path": "file_alias"}))
        .await
        .ok();
    let grep = env.call("grep", json!({"pattern": "inside"})).await.ok();
    assert!(grep.text().contains("Line 1: inside"));
}

#[tokio::test]
async fn seam_operations_refuse_outside_paths_directly() {
    let env = hostile();
    let secret = env.outside.join("secret.txt");
    assert!(env.ws().read(&secret).await.is_err_and(|e| e.is_outside()));
    assert!(matches!(
        env.ws()
            .write_if(&secret, WriteCondition::Unconditional, b"x".to_vec())
            .await,
        Err(FsError::Outside { .. })
    ));
    assert!(
        env.ws()
            .stat(&env.path("link_file"))
            .await
            .is_err_and(|e| e.is_outside())
    );
    assert_eq!(
        std::fs::read_to_string(&secret).unwrap(),
        format!("{SECRET}\n")
    );
}

#[tokio::test]
async fn a_file_swapped_for_an_outside_symlink_after_the_read_is_refused() {
    let (env, _p) = Env::with_policy();
    std::fs::write(env.outside.join("target.txt"), "outside\n").unwrap();
    let p = env.put("f.txt", "inside\n");
    env.call("read", json!({"file_path": "f.txt"})).await.ok();
    std::fs::remove_file(&p).unwrap();
    symlink(env.outside.join("target.txt"), &p).unwrap();
    let out = env
        .call(
            "edit",
            json!({"file_path": "f.txt", "old_string": "outside", "new_string": "pwned"}),
        )
        .await;
    assert_eq!(
        out.code().as_deref(),
        Some(FS_OUTSIDE_WORKSPACE),
        "{}",
        out.text()
    );
    let out = env
        .call("write", json!({"file_path": "f.txt", "content": "pwned"}))
        .await;
    assert_eq!(out.code().as_deref(), Some(FS_OUTSIDE_WORKSPACE));
    assert_eq!(
        std::fs::read_to_string(env.outside.join("target.txt")).unwrap(),
        "outside\n"
    );
}

#[tokio::test]
async fn a_symlink_outside_that_leads_into_the_root_is_followed() {
    // Like a host whose `/tmp` is a symlink to `/private/tmp`: a session may name the root by an
    // alias; whatever it reaches is shown by its canonical path.
    let env = hostile();
    let base = env.root.parent().unwrap().to_path_buf();
    symlink(&env.root, base.join("alias_ws")).unwrap();
    symlink(&env.outside, base.join("alias_out")).unwrap();
    env.put("f.txt", "inside\n");
    let via_alias = base.join("alias_ws/f.txt");
    let out = env
        .call("read", json!({"file_path": via_alias.to_str().unwrap()}))
        .await
        .ok();
    assert_eq!(
        out.value()["path"],
        json!(env.path("f.txt").to_str().unwrap())
    );
    let agent = "aliased";
    env.tools.sessions().bind(
        dsh_core::AgentId::from(agent),
        dsh_tool_fs::FsContext::new("s-alias", base.join("alias_ws")),
    );
    env.call_with(
        "write",
        json!({"file_path": "g.txt", "content": "via alias"}),
        Some(agent),
        dsh_core::Signal::never(),
    )
    .await
    .ok();
    assert_eq!(env.get("g.txt"), "via alias");
    // An alias that leads elsewhere is refused without naming where it leads.
    let raw = base.join("alias_out/secret.txt");
    let out = env
        .call("read", json!({"file_path": raw.to_str().unwrap()}))
        .await;
    assert_eq!(out.code().as_deref(), Some(FS_OUTSIDE_WORKSPACE));
    assert!(
        !out.text().contains(&env.outside.display().to_string()),
        "{}",
        out.text()
    );
}
