//! A store's sessions belong to the workspace they were started in (their header's `cwd`), as a
//! workspace's files do: `dsh sessions --store` lists the workspace's, a bare `--resume`
//! continues the workspace's most recent one, and a workspace that does not exist is refused,
//! in store mode as in file mode. A real PostgreSQL (the cluster `store_cli.rs` starts).

use serde_json::json;

use super::store_cli::fresh_db;
use super::support::*;

/// `dsh run` of one echo on session `id` of the store, in `ws`.
fn run_in(url: &str, ws: &std::path::Path, id: &str) {
    let sc = script(
        ws,
        &format!("{id}.jsonl"),
        &[openai("", &[call("e1", "echo", json!({"text": id}))])],
    );
    let out = dsh_run(&[
        "run",
        s(&sc),
        "--workspace",
        s(ws),
        "--store",
        url,
        "--session",
        id,
        "--demo-tools",
    ]);
    assert_eq!(out.code, 0, "{}", out.both());
}

/// The ids `dsh sessions` printed, in order.
fn ids(out: &Out) -> Vec<String> {
    out.stdout
        .lines()
        .map(|l| l.split("  ").next().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn sessions_on_a_store_lists_the_workspaces_sessions_and_refuses_a_missing_workspace() {
    let url = fresh_db();
    let t = tmp();
    let (a, b) = (t.path().join("a"), t.path().join("b"));
    std::fs::create_dir(&a).unwrap();
    std::fs::create_dir(&b).unwrap();
    run_in(&url, &a, "in-a");
    run_in(&url, &b, "in-b");
    run_in(&url, &a, "in-a-2");

    let listed = dsh_run(&["sessions", "--store", &url, "--workspace", s(&a)]);
    assert_eq!(listed.code, 0, "{}", listed.both());
    assert_eq!(ids(&listed), ["in-a-2", "in-a"], "{}", listed.both());
    let listed = dsh_run(&["sessions", "--store", &url, "--workspace", s(&b)]);
    assert_eq!(ids(&listed), ["in-b"], "{}", listed.both());
    // Without --workspace: the current directory's.
    let here = run(dsh().args(["sessions", "--store", &url]).current_dir(&b));
    assert_eq!(ids(&here), ["in-b"], "{}", here.both());
    // --all: every session of the store, each with its workspace.
    let all = dsh_run(&["sessions", "--store", &url, "--all"]);
    assert_eq!(all.code, 0, "{}", all.both());
    assert_eq!(ids(&all), ["in-a-2", "in-b", "in-a"], "{}", all.both());
    let b_line = all.stdout.lines().nth(1).unwrap();
    let b_path = b.canonicalize().unwrap();
    assert!(b_line.ends_with(s(&b_path)), "{}", all.both());

    // A workspace that does not exist is refused, as in file mode.
    let missing = t.path().join("nowhere");
    let stored = dsh_run(&["sessions", "--store", &url, "--workspace", s(&missing)]);
    let filed = run(dsh()
        .args(["sessions", "--workspace", s(&missing)])
        .env_remove("DSH_STORE"));
    for out in [&stored, &filed] {
        assert_eq!(out.code, 2, "{}", out.both());
        assert!(
            out.stderr
                .contains(&format!("workspace {}: No such file", missing.display())),
            "{}",
            out.both()
        );
        assert_eq!(out.stdout, "", "{}", out.both());
    }
}

#[test]
fn a_bare_resume_on_a_store_continues_the_workspaces_most_recent_session() {
    use super::agent_policy::{agent, history, mock, push_reads_then_answer, workspace};
    let url = fresh_db();
    let m = mock();
    let (wa, wb, empty) = (workspace(), workspace(), workspace());
    let ask = |w, prompt: &str, extra: &[&str]| {
        let mut args = vec!["--store", url.as_str()];
        args.extend_from_slice(extra);
        run(agent(w, Some(&m.mock.openai_base_url()), prompt, &args).env_remove("DSH_STORE"))
    };
    push_reads_then_answer(&m.mock, &[], "A noted.");
    let first = ask(&wa, "Remember the word apple.", &["--session", "sess-a"]);
    assert_eq!(first.code, 0, "{}", first.both());
    // The store's newest session is another workspace's.
    push_reads_then_answer(&m.mock, &[], "B noted.");
    let other = ask(&wb, "Remember the word banana.", &["--session", "sess-b"]);
    assert_eq!(other.code, 0, "{}", other.both());

    push_reads_then_answer(&m.mock, &[], "Apple.");
    let resumed = ask(&wa, "Which word?", &["--resume"]);
    assert_eq!(resumed.code, 0, "{}", resumed.both());
    let bodies = m.mock.requests();
    let last = history(&bodies.last().unwrap().body);
    assert!(
        last.iter().any(|m| m.contains("apple")),
        "the workspace's own session was resumed: {last:?}"
    );
    assert!(
        !last.iter().any(|m| m.contains("banana")),
        "not the other workspace's: {last:?}"
    );
    let export = dsh_run(&["export", "--store", &url, "sess-a"]);
    assert!(export.stdout.contains("Which word?"), "{}", export.both());

    // A workspace with no session in the store: nothing to resume.
    let none = ask(&empty, "Anyone?", &["--resume"]);
    assert_eq!(none.code, 2, "{}", none.both());
    assert!(
        none.stderr.contains("has no session yet"),
        "{}",
        none.both()
    );
}
