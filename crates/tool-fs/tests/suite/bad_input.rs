//! Bad input: each is a clear error result and no partial file is left behind.

use std::process::Command;

use dsh_tool_fs::MAX_FILE_BYTES;
use dsh_tool_fs::codes::{
    FS_EDIT_INVALID, FS_EDIT_NOT_FOUND, FS_INVALID_RANGE, FS_NOT_A_FILE, FS_NOT_OBSERVED,
    FS_NOT_TEXT, FS_TOO_LARGE,
};
use serde_json::json;

use super::common::Env;

#[tokio::test]
async fn non_utf8_content_is_not_text_for_read_and_edit() {
    let (env, _p) = Env::with_policy();
    std::fs::write(env.path("latin1.txt"), b"caf\xe9\n").unwrap();
    let out = env
        .call("read", json!({"file_path": "latin1.txt"}))
        .await
        .err(FS_NOT_TEXT);
    assert!(out.text().contains("invalid UTF-8"), "{}", out.text());
    // The read saw the file, so the edit gets as far as decoding it.
    env.call(
        "edit",
        json!({"file_path": "latin1.txt", "old_string": "caf", "new_string": "tea"}),
    )
    .await
    .err(FS_NOT_TEXT);
    assert_eq!(std::fs::read(env.path("latin1.txt")).unwrap(), b"caf\xe9\n");
}

#[tokio::test]
async fn empty_identical_and_enormous_old_strings() {
    let (env, _p) = Env::with_policy();
    env.put("f.txt", "short\n");
    env.call("read", json!({"file_path": "f.txt"})).await.ok();
    let empty = env
        .call(
            "edit",
            json!({"file_path": "f.txt", "old_string": "", "new_string": "x"}),
        )
        .await
        .err(FS_EDIT_INVALID);
    assert!(empty.text().contains("old_string is empty"));
    env.call(
        "edit",
        json!({"file_path": "f.txt", "old_string": "short", "new_string": "short"}),
    )
    .await
    .err(FS_EDIT_INVALID);
    let huge = "short".repeat(200_000);
    env.call(
        "edit",
        json!({"file_path": "f.txt", "old_string": huge, "new_string": "x"}),
    )
    .await
    .err(FS_EDIT_NOT_FOUND);
    assert_eq!(env.get("f.txt"), "short\n");
}

#[tokio::test]
async fn a_directory_where_a_file_is_expected() {
    let (env, _p) = Env::with_policy();
    std::fs::create_dir_all(env.path("d")).unwrap();
    env.call("read", json!({"file_path": "d"}))
        .await
        .err(FS_NOT_A_FILE);
    // Without an observation the policy stops the edit first.
    env.call(
        "edit",
        json!({"file_path": "d", "old_string": "a", "new_string": "b"}),
    )
    .await
    .err(FS_NOT_OBSERVED);
    let noguard = Env::new();
    std::fs::create_dir_all(noguard.path("d")).unwrap();
    noguard
        .call("write", json!({"file_path": "d", "content": "x"}))
        .await
        .err(FS_NOT_A_FILE);
    noguard
        .call(
            "edit",
            json!({"file_path": "d", "old_string": "a", "new_string": "b"}),
        )
        .await
        .err(FS_NOT_A_FILE);
    assert!(noguard.path("d").is_dir());
    // A file used as a directory.
    noguard.put("plain", "x");
    noguard
        .call("read", json!({"file_path": "plain/inner.txt"}))
        .await
        .err(FS_NOT_A_FILE);
}

#[tokio::test]
async fn a_fifo_is_refused_without_blocking() {
    let env = Env::new();
    let fifo = env.path("pipe");
    let made = Command::new("mkfifo").arg(&fifo).status();
    if !made.is_ok_and(|s| s.success()) {
        eprintln!("mkfifo unavailable; skipped");
        return;
    }
    let out = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        env.call("read", json!({"file_path": "pipe"})),
    )
    .await
    .expect("read of a FIFO blocked");
    assert_eq!(out.code().as_deref(), Some(FS_NOT_A_FILE), "{}", out.text());
}

#[tokio::test]
async fn a_file_too_large_to_read() {
    let env = Env::new();
    let p = env.path("big.log");
    let f = std::fs::File::create(&p).unwrap();
    f.set_len(MAX_FILE_BYTES + 1).unwrap();
    let out = env
        .call("read", json!({"file_path": "big.log"}))
        .await
        .err(FS_TOO_LARGE);
    assert!(
        out.text().contains("grep") || out.text().contains("limit"),
        "{}",
        out.text()
    );
}

#[tokio::test]
async fn offsets_and_limits_out_of_range() {
    let env = Env::new();
    env.put("f.txt", "a\nb\n");
    env.call("read", json!({"file_path": "f.txt", "offset": 9}))
        .await
        .err(FS_INVALID_RANGE);
    for bad in [json!(0), json!(-1), json!(1.5)] {
        let out = env
            .call("read", json!({"file_path": "f.txt", "limit": bad}))
            .await;
        assert_eq!(out.code().as_deref(), Some("INVALID_ARGS"), "{bad}");
    }
    // offset 0 is read as the first line.
    env.call("read", json!({"file_path": "f.txt", "offset": 0}))
        .await
        .ok();
}

#[tokio::test]
async fn missing_parent_directories_are_created_inside_the_root() {
    let (env, _p) = Env::with_policy();
    env.call(
        "write",
        json!({"file_path": "deep/er/still/f.txt", "content": "x"}),
    )
    .await
    .ok();
    assert_eq!(env.get("deep/er/still/f.txt"), "x");
}
