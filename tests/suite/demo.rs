//! `dsh demo`: the bundled session runs through the whole pipeline, prints where its log is, and
//! the log checks clean with the expected outcomes in it.

use std::path::PathBuf;

use super::support::*;

#[test]
fn demo_runs_every_stage_and_leaves_a_clean_log() {
    let tmpdir = tmp();
    let out = run(dsh().arg("demo").env("TMPDIR", tmpdir.path()));
    assert_eq!(out.code, 0, "{}", out.both());

    // The rendered outcomes, as plain lines (stdout is not a terminal: no escapes).
    assert!(!out.stdout.contains('\u{1b}'), "{}", out.stdout);
    assert!(out.stdout.contains("FS_NOT_OBSERVED"), "{}", out.stdout);
    assert!(out.stdout.contains("✓ edit config.toml"), "{}", out.stdout);
    assert!(out.stdout.contains("TOOL_TIMEOUT"), "{}", out.stdout);
    assert!(
        out.stdout.contains("denied by permission rule"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("log checks clean"), "{}", out.stdout);
    // It ends saying how to see the session in the browser.
    assert_eq!(
        out.stdout
            .lines()
            .last()
            .and_then(|l| l.strip_prefix("view it: dsh view ")),
        out.stdout.lines().find_map(|l| l.strip_prefix("log: ")),
        "{}",
        out.stdout
    );

    // The printed log path is real, inside the temporary directory, and checks clean.
    let log: PathBuf = out
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("log: "))
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("no `log:` line\n{}", out.stdout));
    assert!(log.starts_with(tmpdir.path()), "{}", log.display());
    assert_checks_clean(&log);

    // The log holds what was rendered.
    let ev = events(&log);
    assert_paired(&ev);
    let blind = result_of(&ev, "call_edit_blind");
    assert!(blind.is_error);
    assert_eq!(blind.code.as_deref(), Some("FS_NOT_OBSERVED"));
    let edit = result_of(&ev, "call_edit_config");
    assert!(!edit.is_error, "{edit:?}");
    let secrets = result_of(&ev, "call_read_secrets");
    assert!(secrets.is_error);
    assert_eq!(secrets.code, None, "a policy denial carries no code");
    assert!(secrets.text.contains("denied"), "{secrets:?}");
    let slow = result_of(&ev, "call_slow_build");
    assert_eq!(slow.code.as_deref(), Some("TOOL_TIMEOUT"));
    // The shell command that tried to write outside the workspace was refused by the sandbox
    // (a result, not a failure: the command ran and exited 1), and nothing was written.
    let outside = result_of(&ev, "call_bash_outside");
    assert!(!outside.is_error, "{outside:?}");
    assert!(
        outside
            .text
            .contains("[sandbox: file access denied under workspace-write mode]"),
        "{outside:?}"
    );
    assert!(
        out.stdout
            .contains("    [sandbox: file access denied under workspace-write mode]"),
        "{}",
        out.stdout
    );
    // The Code Mode step: a program that called two tools through the same pipeline; its
    // sub-calls are recorded as code-dispatch events, never as results of their own.
    if cfg!(feature = "code-mode") {
        let program = result_of(&ev, "call_run_code");
        assert!(!program.is_error, "{program:?}");
        assert!(program.text.contains("config file(s)"), "{program:?}");
        assert_eq!(of_type(&ev, "tool/code-dispatch-start").len(), 2);
        assert_eq!(of_type(&ev, "tool/code-dispatch").len(), 2);
    }
    for id in ["call_read_notes", "call_read_app", "call_write_changes"] {
        assert!(!result_of(&ev, id).is_error, "{id}");
    }
    let end = of_type(&ev, "turn/end");
    assert_eq!(end.len(), 1);
    assert_eq!(end[0]["data"]["reason"]["kind"], "completed");

    // The workspace copy was really edited and written.
    let workspace: PathBuf = out
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("dsh demo: workspace "))
        .map(PathBuf::from)
        .unwrap();
    let config = std::fs::read_to_string(workspace.join("config.toml")).unwrap();
    assert!(config.contains("debug = false") && !config.contains("debug = true"));
    assert!(workspace.join("CHANGES.md").is_file());
    assert!(!workspace.join("../config.backup").exists());
    let secrets_file = std::fs::read_to_string(workspace.join("secrets.env")).unwrap();
    assert!(
        !out.stdout.contains(secrets_file.trim()),
        "the denied read leaked the file"
    );
}

#[test]
fn demo_summary_counts_calls_and_failures_by_code() {
    let tmpdir = tmp();
    let out = run(dsh().arg("demo").env("TMPDIR", tmpdir.path()));
    assert_eq!(out.code, 0, "{}", out.both());
    let summary = out
        .stdout
        .lines()
        .find(|l| l.contains(" calls"))
        .unwrap_or_else(|| panic!("no summary\n{}", out.stdout));
    // The counts are the log's: every call, the failed results, and each code's tally.
    let log: PathBuf = out
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("log: "))
        .map(PathBuf::from)
        .unwrap();
    let ev = events(&log);
    let res = results(&ev);
    let failed = res.iter().filter(|r| r.is_error).count();
    assert!(
        summary.starts_with(&format!("{} calls", res.len()))
            && summary.contains(&format!(", {failed} failed")),
        "{summary}"
    );
    for code in ["FS_NOT_OBSERVED", "TOOL_TIMEOUT"] {
        let n = res
            .iter()
            .filter(|r| r.code.as_deref() == Some(code))
            .count();
        assert!(n > 0, "{code}");
        assert!(summary.contains(&format!("{code} ×{n}")), "{summary}");
    }
}
