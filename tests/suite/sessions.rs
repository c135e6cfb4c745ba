//! Where sessions are kept and when they are not created (issue 17, item 6): by default under
//! `$XDG_STATE_HOME/dsh/sessions/<workspace key>/` (else `~/.local/state`), so a read-only
//! workspace runs; a run refused before it starts leaves nothing; a log that cannot be opened
//! for lack of permission is exit 2 naming it.

use serde_json::json;

use super::support::*;

fn read_script(dir: &std::path::Path) -> std::path::PathBuf {
    script(
        dir,
        "read.jsonl",
        &[anthropic(
            "",
            &[call("r1", "read", json!({"file_path": "notes.txt"}))],
        )],
    )
}

#[test]
fn issue17_6_sessions_default_outside_the_workspace() {
    let t = tmp();
    let ws = t.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(ws.join("notes.txt"), "hello\n").unwrap();
    let sc = read_script(t.path());
    let state = t.path().join("state");
    let out = run(dsh()
        .args(["run", s(&sc), "--workspace", s(&ws)])
        .env("XDG_STATE_HOME", &state));
    assert_eq!(out.code, 0, "{}", out.both());
    let key = dsh::jsonl::workspace_key(&ws.canonicalize().unwrap());
    let dir = state.join("dsh/sessions").join(&key);
    let logs: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    assert_eq!(logs.len(), 1, "{dir:?}");
    let log = logs.into_iter().next().unwrap().unwrap().path();
    assert!(
        out.stderr.contains(&format!("log: {}", log.display())),
        "{}",
        out.both()
    );
    assert_checks_clean(&log);
    // Nothing was written in the workspace.
    let entries: Vec<_> = std::fs::read_dir(&ws)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(entries, ["notes.txt"]);
    // Without $XDG_STATE_HOME: ~/.local/state.
    let home = t.path().join("home");
    let out = run(dsh()
        .args(["run", s(&sc), "--workspace", s(&ws)])
        .env_remove("XDG_STATE_HOME")
        .env("HOME", &home));
    assert_eq!(out.code, 0, "{}", out.both());
    let dir = home.join(".local/state/dsh/sessions").join(&key);
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "{dir:?}");
    // Keys differ for paths that read alike.
    assert_ne!(
        dsh::jsonl::workspace_key(std::path::Path::new("/a-b")),
        dsh::jsonl::workspace_key(std::path::Path::new("/a/b"))
    );
}

#[test]
fn issue17_6_a_read_only_workspace_runs_with_the_read_only_preset() {
    let t = tmp();
    let ws = t.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(ws.join("notes.txt"), "hello\n").unwrap();
    let sc = read_script(t.path());
    let _frozen = Immutable::set(&ws);
    let out = dsh_run(&[
        "run",
        s(&sc),
        "--workspace",
        s(&ws),
        "--preset",
        "read-only",
    ]);
    assert_eq!(out.code, 0, "{}", out.both());
    let logs = default_sessions(&ws);
    assert_eq!(logs.len(), 1);
    let r = result_of(&events(&logs[0]), "r1");
    assert!(!r.is_error && r.text.contains("hello"), "{r:?}");
}

#[test]
fn issue17_6_a_bad_settings_file_leaves_no_log() {
    let t = tmp();
    let ws = t.path().join("ws");
    std::fs::create_dir_all(ws.join(".dsh")).unwrap();
    std::fs::write(ws.join(".dsh/settings.json"), "{\"hooks\": 3}").unwrap();
    let sc = read_script(t.path());
    let out = dsh_run(&["run", s(&sc), "--workspace", s(&ws)]);
    assert_eq!(out.code, 2, "{}", out.both());
    assert!(out.stderr.contains("settings.json"), "{}", out.both());
    assert!(default_sessions(&ws).is_empty());
    let log = t.path().join("explicit.jsonl");
    let out = dsh_run(&["run", s(&sc), "--workspace", s(&ws), "--session", s(&log)]);
    assert_eq!(out.code, 2, "{}", out.both());
    assert!(!log.exists(), "a header-only log was left");
}

#[test]
fn issue17_6_a_log_that_cannot_be_opened_is_exit_2_with_its_path() {
    let t = tmp();
    let ws = t.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(ws.join("notes.txt"), "hello\n").unwrap();
    let sc = read_script(t.path());
    let log = t.path().join("s.jsonl");
    let first = dsh_run(&["run", s(&sc), "--workspace", s(&ws), "--session", s(&log)]);
    assert_eq!(first.code, 0, "{}", first.both());
    let _frozen = Immutable::set(&log);
    let out = dsh_run(&["run", s(&sc), "--workspace", s(&ws), "--session", s(&log)]);
    assert_eq!(out.code, 2, "{}", out.both());
    assert!(out.stderr.contains(s(&log)), "{}", out.both());
    assert!(!out.stderr.contains("internal error"), "{}", out.both());
}

/// Makes a path unwritable for the length of a test, even for root: `chattr +i` where the
/// file system has it, else mode `0555`/`0444` (enough when not root).
struct Immutable(std::path::PathBuf, bool);

impl Immutable {
    fn set(path: &std::path::Path) -> Immutable {
        let chattr = std::process::Command::new("chattr")
            .arg("+i")
            .arg(path)
            .status()
            .is_ok_and(|s| s.success());
        if !chattr {
            use std::os::unix::fs::PermissionsExt;
            let mode = if path.is_dir() { 0o555 } else { 0o444 };
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        Immutable(path.to_path_buf(), chattr)
    }
}

impl Drop for Immutable {
    fn drop(&mut self) {
        if self.1 {
            let _ = std::process::Command::new("chattr")
                .arg("-i")
                .arg(&self.0)
                .status();
        } else {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&self.0, std::fs::Permissions::from_mode(0o755));
        }
    }
}

#[test]
fn file_sessions_are_listed_one_per_line_whatever_their_file_names() {
    let t = tmp();
    let ws = t.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let sc = script(t.path(), "s.jsonl", &[openai("done", &[])]);
    let out = run(dsh()
        .args(["run", s(&sc), "--workspace", s(&ws)])
        .env_remove("DSH_STORE"));
    assert_eq!(out.code, 0, "{}", out.both());
    let log = default_sessions(&ws).pop().unwrap();
    // A file name with a line break, put in the sessions folder by hand.
    std::fs::copy(&log, log.with_file_name("two\nlines.jsonl")).unwrap();
    let listed = run(dsh()
        .args(["sessions", "--workspace", s(&ws)])
        .env_remove("DSH_STORE"));
    assert_eq!(listed.code, 0, "{}", listed.both());
    assert_eq!(listed.stdout.lines().count(), 2, "{}", listed.both());
    assert!(
        listed
            .stdout
            .lines()
            .any(|l| l.starts_with(r"two\nlines  ")),
        "{}",
        listed.both()
    );
}
