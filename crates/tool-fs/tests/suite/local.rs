//! FS-40..72: the tools against the real local filesystem, with and without the policy.

use dsh_core::{AgentId, Failure, Signal};
use dsh_tool_fs::codes::{
    FS_AMBIGUOUS_EDIT, FS_EDIT_NOT_FOUND, FS_NOT_FOUND, FS_NOT_OBSERVED, FS_NOT_TEXT,
    FS_STALE_VERSION,
};
use dsh_tool_fs::{FsContext, Observation};
use serde_json::json;

use super::common::{Env, SESSION, aborted, change_outside};

fn edit(old: &str, new: &str) -> serde_json::Value {
    json!({"file_path": "f.txt", "old_string": old, "new_string": new})
}

#[tokio::test]
async fn fs_40_write_new_file_exact_bytes() {
    let (env, _p) = Env::with_policy();
    let content = "line one\nline two\n\ttabbed ünïcode\n";
    env.call("write", json!({"file_path": "n.txt", "content": content}))
        .await
        .ok();
    assert_eq!(
        std::fs::read(env.path("n.txt")).unwrap(),
        content.as_bytes()
    );
}

#[tokio::test]
async fn fs_41_overwrite_of_unread_file_is_not_observed() {
    let (env, _p) = Env::with_policy();
    env.put("f.txt", "original\n");
    let out = env
        .call("write", json!({"file_path": "f.txt", "content": "new"}))
        .await
        .err(FS_NOT_OBSERVED);
    assert!(
        out.text().contains("without reading it first"),
        "{}",
        out.text()
    );
    assert!(out.text().contains("read the file, then retry"));
    assert_eq!(env.get("f.txt"), "original\n");
}

#[tokio::test]
async fn fs_42_read_then_write() {
    let (env, _p) = Env::with_policy();
    env.put("f.txt", "original\n");
    env.call("read", json!({"file_path": "f.txt"})).await.ok();
    let out = env
        .call("write", json!({"file_path": "f.txt", "content": "new\n"}))
        .await
        .ok();
    assert_eq!(out.value()["operation"], json!("update"));
    assert_eq!(out.value()["before"], json!("original\n"));
    assert_eq!(env.get("f.txt"), "new\n");
}

#[tokio::test]
async fn fs_43_outside_change_is_stale() {
    let (env, _p) = Env::with_policy();
    let p = env.put("f.txt", "v1\n");
    env.call("read", json!({"file_path": "f.txt"})).await.ok();
    change_outside(&p, "v2\n");
    let out = env
        .call("write", json!({"file_path": "f.txt", "content": "mine\n"}))
        .await
        .err(FS_STALE_VERSION);
    assert!(
        out.text().contains("file changed since it was read"),
        "{}",
        out.text()
    );
    assert!(out.text().contains("re-read the file, then retry"));
    assert_eq!(env.get("f.txt"), "v2\n");
}

#[tokio::test]
async fn fs_44_after_a_stale_failure_a_reread_lets_the_write_succeed() {
    let (env, _p) = Env::with_policy();
    let p = env.put("f.txt", "v1\n");
    env.call("read", json!({"file_path": "f.txt"})).await.ok();
    change_outside(&p, "v2\n");
    let write = json!({"file_path": "f.txt", "content": "mine\n"});
    env.call("write", write.clone()).await.err(FS_STALE_VERSION);
    // Retrying without the remedy still fails: the failure did not refresh the observation.
    env.call("write", write.clone()).await.err(FS_STALE_VERSION);
    assert_eq!(env.get("f.txt"), "v2\n");
    // The remedy the text names works.
    env.call("read", json!({"file_path": "f.txt"})).await.ok();
    env.call("write", write).await.ok();
    assert_eq!(env.get("f.txt"), "mine\n");
}

#[tokio::test]
async fn fs_43_rewrite_with_restored_mtime_is_still_stale() {
    // Restoring the modification time does not hide the change (ctime and the hash see it).
    let (env, _p) = Env::with_policy();
    let p = env.put("f.txt", "aaaa");
    let before = std::fs::metadata(&p).unwrap().modified().unwrap();
    env.call("read", json!({"file_path": "f.txt"})).await.ok();
    std::fs::write(&p, "bbbb").unwrap();
    let f = std::fs::File::options().write(true).open(&p).unwrap();
    f.set_modified(before).unwrap();
    env.call("write", json!({"file_path": "f.txt", "content": "c"}))
        .await
        .err(FS_STALE_VERSION);
}

#[tokio::test]
async fn fs_45_read_two_lines() {
    let env = Env::new();
    env.put("f.txt", "alpha\nbeta\n");
    let t = env
        .call("read", json!({"file_path": "f.txt"}))
        .await
        .ok()
        .text();
    assert!(t.contains("1: alpha"));
    assert!(t.contains("2: beta"));
    assert!(t.contains("(End of file - total 2 lines)"));
}

#[tokio::test]
async fn fs_46_binary_is_not_text() {
    let env = Env::new();
    std::fs::write(env.path("bin"), [0x89, b'P', b'N', b'G', 0, 1, 2, 0xff]).unwrap();
    env.call("read", json!({"file_path": "bin"}))
        .await
        .err(FS_NOT_TEXT);
}

#[tokio::test]
async fn fs_47_offset_and_limit() {
    let env = Env::new();
    env.put("f.txt", "one\ntwo\nthree\nfour\n");
    let out = env
        .call(
            "read",
            json!({"file_path": "f.txt", "offset": 2, "limit": 2}),
        )
        .await
        .ok();
    let t = out.text();
    assert!(t.contains("2: two\n3: three\n"), "{t}");
    assert!(!t.contains("1: one") && !t.contains("4: four"));
    assert!(
        t.contains("(Showing lines 2-3 of 4. Use offset=4 to continue.)"),
        "{t}"
    );
    assert_eq!(out.meta()["offset"], json!(2));
    assert_eq!(out.meta()["totalLines"], json!(4));
}

#[tokio::test]
async fn fs_48_read_then_replace_unique_literal() {
    let (env, _p) = Env::with_policy();
    env.put("f.txt", "hello world");
    env.call("read", json!({"file_path": "f.txt"})).await.ok();
    env.call("edit", edit("world", "there")).await.ok();
    assert_eq!(env.get("f.txt"), "hello there");
}

#[tokio::test]
async fn fs_49_edit_before_read_is_refused_and_file_untouched() {
    let (env, _p) = Env::with_policy();
    env.put("f.txt", "hello world");
    let out = env
        .call("edit", edit("world", "there"))
        .await
        .err(FS_NOT_OBSERVED);
    assert!(out.text().contains("edit requires reading"));
    assert!(out.text().contains("read the file, then retry"));
    assert_eq!(env.get("f.txt"), "hello world");
}

#[tokio::test]
async fn fs_50_partial_read_authorizes_edit_of_unchanged_file() {
    let (env, _p) = Env::with_policy();
    let body: String = (1..=20).map(|i| format!("line {i}\n")).collect();
    env.put("f.txt", &body);
    env.call("read", json!({"file_path": "f.txt", "limit": 1}))
        .await
        .ok();
    env.call("edit", edit("line 12\n", "line twelve\n"))
        .await
        .ok();
    assert!(env.get("f.txt").contains("line twelve\nline 13"));
}

#[tokio::test]
async fn fs_51_staleness_is_checked_before_matching() {
    let (env, _p) = Env::with_policy();
    let p = env.put("f.txt", "hello there");
    env.call("read", json!({"file_path": "f.txt", "limit": 1}))
        .await
        .ok();
    change_outside(&p, "something else entirely");
    let out = env
        .call("edit", edit("hello", "hi"))
        .await
        .err(FS_STALE_VERSION);
    assert!(out.text().contains("re-read the file, then retry"));
    assert_eq!(env.get("f.txt"), "something else entirely");
}

#[tokio::test]
async fn fs_52_stale_edit_reread_retry() {
    let (env, _p) = Env::with_policy();
    let p = env.put("f.txt", "hello there");
    env.call("read", json!({"file_path": "f.txt"})).await.ok();
    change_outside(&p, "hello  there");
    env.call("edit", edit("hello ", "hello brave"))
        .await
        .err(FS_STALE_VERSION);
    env.call("read", json!({"file_path": "f.txt"})).await.ok();
    env.call("edit", edit("hello ", "hello brave")).await.ok();
    assert_eq!(env.get("f.txt"), "hello brave there");
}

#[tokio::test]
async fn fs_53_ambiguous_edit_is_refused() {
    let (env, _p) = Env::with_policy();
    env.put("f.txt", "a a a");
    env.call("read", json!({"file_path": "f.txt"})).await.ok();
    let out = env
        .call("edit", edit("a", "b"))
        .await
        .err(FS_AMBIGUOUS_EDIT);
    assert!(out.text().contains("3 times"), "{}", out.text());
    assert!(out.text().contains("replace_all"));
    assert_eq!(env.get("f.txt"), "a a a");
}

#[tokio::test]
async fn fs_54_replace_all() {
    let (env, _p) = Env::with_policy();
    env.put("f.txt", "a a a");
    env.call("read", json!({"file_path": "f.txt"})).await.ok();
    let out = env
        .call(
            "edit",
            json!({"file_path": "f.txt", "old_string": "a", "new_string": "b", "replace_all": true}),
        )
        .await
        .ok();
    assert_eq!(out.value()["replacements"], json!(3));
    assert_eq!(env.get("f.txt"), "b b b");
}

#[tokio::test]
async fn fs_55_own_write_authorizes_edit() {
    let (env, _p) = Env::with_policy();
    env.call("write", json!({"file_path": "f.txt", "content": "draft"}))
        .await
        .ok();
    env.call("edit", edit("draft", "final")).await.ok();
    assert_eq!(env.get("f.txt"), "final");
}

#[tokio::test]
async fn fs_56_raw_service_read_is_not_an_observation() {
    let (env, _p) = Env::with_policy();
    let p = env.put("f.txt", "x");
    let direct = env.ws().read(&p).await.unwrap();
    assert_eq!(direct.bytes, b"x");
    env.call("edit", edit("x", "y")).await.err(FS_NOT_OBSERVED);
}

#[tokio::test]
async fn fs_57_deleted_outside_then_recovery() {
    let (env, _p) = Env::with_policy();
    let p = env.put("f.txt", "x");
    env.call("read", json!({"file_path": "f.txt"})).await.ok();
    std::fs::remove_file(&p).unwrap();
    env.call("edit", edit("x", "y")).await.err(FS_STALE_VERSION);
    env.call("write", json!({"file_path": "f.txt", "content": "w"}))
        .await
        .err(FS_STALE_VERSION);
    env.call("read", json!({"file_path": "f.txt"}))
        .await
        .err(FS_NOT_FOUND);
    env.call("edit", edit("x", "y")).await.err(FS_NOT_FOUND);
    let out = env
        .call("write", json!({"file_path": "f.txt", "content": "fresh"}))
        .await
        .ok();
    assert_eq!(out.value()["operation"], json!("create"));
    assert_eq!(env.get("f.txt"), "fresh");
}

#[tokio::test]
async fn fs_58_compare_and_set_runs_inside_the_seam() {
    let (env, _p) = Env::with_policy();
    env.put("f.txt", "one");
    let c0 = env.ws().op_counts();
    env.call("read", json!({"file_path": "f.txt"})).await.ok();
    let c1 = env.ws().op_counts();
    assert_eq!(c1.stats - c0.stats, 1, "read stats exactly once");
    env.call("edit", edit("one", "two")).await.ok();
    let c2 = env.ws().op_counts();
    assert_eq!(
        c2.stats, c1.stats,
        "a guarded edit after the read stats 0 times"
    );
    assert_eq!(c2.cas - c1.cas, 1);
    env.call("write", json!({"file_path": "f.txt", "content": "three"}))
        .await
        .ok();
    let c3 = env.ws().op_counts();
    assert_eq!(c3.stats, c2.stats, "a guarded write after it stats 0 times");
    assert_eq!(c3.cas - c2.cas, 1);
}

#[tokio::test]
async fn fs_59_missing_read_then_recovery_write() {
    let (env, _p) = Env::with_policy();
    let c0 = env.ws().op_counts();
    env.call("read", json!({"file_path": "f.txt"}))
        .await
        .err(FS_NOT_FOUND);
    let c1 = env.ws().op_counts();
    assert_eq!(c1.stats - c0.stats, 1);
    env.call("write", json!({"file_path": "f.txt", "content": "made"}))
        .await
        .ok();
    assert_eq!(env.ws().op_counts().stats, c1.stats);
    assert_eq!(env.get("f.txt"), "made");
}

// FS-60..63 describe a deployment without the observation policy: `Env::new()` never mounts
// it, and the second half of FS-62 and FS-63 unloads a mounted one. Each line also checks that
// the same call is refused while the policy is in force, so the success is the policy's absence.

#[tokio::test]
async fn fs_60_without_policy_read_works() {
    let env = Env::new();
    env.put("r.txt", "read me\n");
    let t = env
        .call("read", json!({"file_path": "r.txt"}))
        .await
        .ok()
        .text();
    assert!(t.contains("1: read me"), "{t}");
}

#[tokio::test]
async fn fs_61_without_policy_create_works() {
    let env = Env::new();
    let out = env
        .call("write", json!({"file_path": "c.txt", "content": "c"}))
        .await
        .ok();
    assert_eq!(out.value()["operation"], json!("create"));
    assert_eq!(env.get("c.txt"), "c");
}

#[tokio::test]
async fn fs_62_without_policy_overwrite_of_an_unread_file_succeeds() {
    let overwrite = json!({"file_path": "u.txt", "content": "new"});
    let env = Env::new();
    env.put("u.txt", "old");
    env.call("write", overwrite.clone()).await.ok();
    assert_eq!(env.get("u.txt"), "new");

    let (env, policy) = Env::with_policy();
    env.put("u.txt", "old");
    env.call("write", overwrite.clone())
        .await
        .err(FS_NOT_OBSERVED);
    assert_eq!(env.get("u.txt"), "old");
    policy.unload();
    env.call("write", overwrite).await.ok();
    assert_eq!(env.get("u.txt"), "new");
}

#[tokio::test]
async fn fs_63_without_policy_edit_of_an_unread_file_succeeds() {
    let edit_it = edit("old", "new");
    let env = Env::new();
    env.put("f.txt", "old");
    env.call("edit", edit_it.clone()).await.ok();
    assert_eq!(env.get("f.txt"), "new");

    let (env, policy) = Env::with_policy();
    env.put("f.txt", "old");
    env.call("edit", edit_it.clone()).await.err(FS_NOT_OBSERVED);
    assert_eq!(env.get("f.txt"), "old");
    policy.unload();
    env.call("edit", edit_it).await.ok();
    assert_eq!(env.get("f.txt"), "new");
}

#[tokio::test]
async fn fs_64_without_policy_edit_of_missing_file_is_stale() {
    let env = Env::new();
    let out = env.call("edit", edit("a", "b")).await.err(FS_STALE_VERSION);
    assert!(out.text().contains("re-read the file, then retry"));
    assert!(!env.path("f.txt").exists());
}

#[tokio::test]
async fn fs_65_without_policy_absent_literal() {
    let env = Env::new();
    env.put("f.txt", "abc");
    let out = env
        .call("edit", edit("xyz", "q"))
        .await
        .err(FS_EDIT_NOT_FOUND);
    assert!(out.text().contains("old_string was not found"));
    assert_eq!(env.get("f.txt"), "abc");
}

#[tokio::test]
async fn fs_66_without_policy_no_stats() {
    let env = Env::new();
    env.put("f.txt", "abc");
    let c0 = env.ws().op_counts();
    env.call("write", json!({"file_path": "f.txt", "content": "abd"}))
        .await
        .ok();
    env.call("edit", edit("abd", "abe")).await.ok();
    let c1 = env.ws().op_counts();
    assert_eq!(c1.stats, c0.stats);
    assert_eq!(c1.cas - c0.cas, 2);
}

#[tokio::test]
async fn fs_67_relative_paths_resolve_in_the_session_directory() {
    let (env, _p) = Env::with_policy();
    std::fs::create_dir_all(env.path("project")).unwrap();
    env.tools.sessions().bind(
        AgentId::from("worker"),
        FsContext::new("s2", env.path("project")),
    );
    env.call_with(
        "write",
        json!({"file_path": "x.txt", "content": "here"}),
        Some("worker"),
        Signal::never(),
    )
    .await
    .ok();
    assert_eq!(env.get("project/x.txt"), "here");
    assert!(!env.path("x.txt").exists());
}

#[tokio::test]
async fn fs_68_read_and_edit_within_one_session() {
    let (env, _p) = Env::with_policy();
    env.put("project/f.txt", "one");
    let agent = AgentId::from("worker");
    env.tools
        .sessions()
        .bind(agent.clone(), FsContext::new("s2", env.path("project")));
    env.call_with(
        "read",
        json!({"file_path": "f.txt"}),
        Some("worker"),
        Signal::never(),
    )
    .await
    .ok();
    env.call_with("edit", edit("one", "two"), Some("worker"), Signal::never())
        .await
        .ok();
    assert_eq!(env.get("project/f.txt"), "two");
    // The default session never read it.
    env.call(
        "edit",
        json!({"file_path": "project/f.txt", "old_string": "two", "new_string": "3"}),
    )
    .await
    .err(FS_NOT_OBSERVED);
}

#[tokio::test]
async fn fs_69_aborted_signal_touches_nothing() {
    // Called directly, the body is invoked, so the code is ABORTED; through the registry an
    // already-aborted call never reaches the body (ABORTED_BEFORE_DISPATCH).
    let (env, _p) = Env::with_policy();
    env.put("f.txt", "keep");
    let r = env
        .call_with("read", json!({"file_path": "f.txt"}), None, aborted())
        .await;
    assert!(r.0.error().is_some_and(Failure::is_abort));
    let w = env
        .call_with(
            "write",
            json!({"file_path": "new.txt", "content": "x"}),
            None,
            aborted(),
        )
        .await;
    assert!(w.0.error().is_some_and(Failure::is_abort));
    assert!(!env.path("new.txt").exists());
    env.call("read", json!({"file_path": "f.txt"})).await.ok();
    let e = env
        .call_with("edit", edit("keep", "lose"), None, aborted())
        .await;
    assert!(e.0.error().is_some_and(Failure::is_abort));
    assert_eq!(env.get("f.txt"), "keep");
}

#[tokio::test]
async fn fs_71_older_observation_injected_fails_closed() {
    let (env, policy) = Env::with_policy();
    let p = env.put("f.txt", "one");
    let old = env
        .call("read", json!({"file_path": "f.txt"}))
        .await
        .ok()
        .version();
    change_outside(&p, "two");
    env.call("read", json!({"file_path": "f.txt"})).await.ok();
    policy.record(SESSION, &p, Observation::Present(old));
    env.call("edit", edit("two", "three"))
        .await
        .err(FS_STALE_VERSION);
    assert_eq!(env.get("f.txt"), "two");
}

#[tokio::test]
async fn fs_72_failing_observed_listener_fails_the_call_after_the_write() {
    let (env, _p) = Env::with_policy();
    let bad = env
        .tools
        .hooks()
        .observed()
        .on(|_| Err(Failure::new("audit log unavailable")));
    let out = env
        .call("write", json!({"file_path": "f.txt", "content": "bytes"}))
        .await;
    assert!(out.is_error());
    assert!(out.text().contains("audit log unavailable"));
    assert_eq!(env.get("f.txt"), "bytes");
    // The policy's own listener still ran: the write is recorded, so an edit is allowed.
    drop(bad);
    env.call("edit", edit("bytes", "more")).await.ok();
}
