//! `glob` and `grep`: files only, newest first, bounded with notes; regex matches grouped by file
//! with line numbers; binary and ignored files skipped; bad patterns are clear errors.

use std::time::{Duration, SystemTime};

use dsh_tool_fs::codes::{FS_INVALID_PATTERN, FS_NOT_A_FILE, FS_NOT_FOUND};
use serde_json::json;

use super::common::{Env, aborted};

fn age(env: &Env, rel: &str, secs_ago: u64) {
    let f = std::fs::File::options()
        .write(true)
        .open(env.path(rel))
        .unwrap();
    f.set_modified(SystemTime::now() - Duration::from_secs(secs_ago))
        .unwrap();
}

#[tokio::test]
async fn glob_lists_files_only_newest_first() {
    let env = Env::new();
    env.put("old.rs", "");
    env.put("mid.rs", "");
    env.put("src/new.rs", "");
    env.put("notes.txt", "");
    std::fs::create_dir_all(env.path("dir.rs")).unwrap();
    age(&env, "old.rs", 300);
    age(&env, "mid.rs", 200);
    age(&env, "src/new.rs", 100);
    let out = env.call("glob", json!({"pattern": "*.rs"})).await.ok();
    let p = |r: &str| env.path(r).to_str().unwrap().to_owned();
    assert_eq!(
        out.value()["files"],
        json!([p("src/new.rs"), p("mid.rs"), p("old.rs")])
    );
    assert_eq!(
        out.text(),
        [p("src/new.rs"), p("mid.rs"), p("old.rs")].join("\n")
    );
}

#[tokio::test]
async fn glob_patterns_with_a_slash_are_relative_to_the_search_dir() {
    let env = Env::new();
    env.put("a.rs", "");
    env.put("src/b.rs", "");
    env.put("src/deep/c.rs", "");
    let names = |v: serde_json::Value| -> Vec<String> {
        let mut n: Vec<String> = v["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                std::path::Path::new(f.as_str().unwrap())
                    .strip_prefix(&env.root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        n.sort();
        n
    };
    let top = env.call("glob", json!({"pattern": "src/*.rs"})).await.ok();
    assert_eq!(names(top.value()), vec!["src/b.rs"]);
    let all = env
        .call("glob", json!({"pattern": "src/**/*.rs"}))
        .await
        .ok();
    assert_eq!(names(all.value()), vec!["src/b.rs", "src/deep/c.rs"]);
    let within = env
        .call("glob", json!({"pattern": "*.rs", "path": "src/deep"}))
        .await
        .ok();
    assert_eq!(names(within.value()), vec!["src/deep/c.rs"]);
    let none = env.call("glob", json!({"pattern": "*.zig"})).await.ok();
    assert_eq!(none.text(), "No files found");
}

#[tokio::test]
async fn glob_is_capped_at_100_with_a_note() {
    let env = Env::new();
    for i in 0..130 {
        env.put(&format!("f{i:03}.txt"), "");
    }
    let out = env.call("glob", json!({"pattern": "*.txt"})).await.ok();
    assert_eq!(out.value()["files"].as_array().unwrap().len(), 100);
    assert_eq!(out.value()["total"], json!(130));
    assert!(
        out.text().contains("showing the first 100 of 130 files"),
        "{}",
        out.text()
    );
    assert!(out.text().contains("more specific pattern or path"));
}

#[tokio::test]
async fn glob_errors() {
    let env = Env::new();
    env.put("f.txt", "");
    env.call("glob", json!({"pattern": "a[", "path": "."}))
        .await
        .err(FS_INVALID_PATTERN);
    env.call("glob", json!({"pattern": "*", "path": "f.txt"}))
        .await
        .err(FS_NOT_A_FILE);
}

#[tokio::test]
async fn grep_groups_matches_by_file_with_line_numbers() {
    let env = Env::new();
    env.put("a.rs", "fn main() {}\nlet x = todo();\n// TODO: later\n");
    env.put("b.txt", "nothing here\nTODO item\n");
    env.put("c.md", "no match\n");
    age(&env, "a.rs", 100);
    let out = env.call("grep", json!({"pattern": "(?i)todo"})).await.ok();
    let a = env.path("a.rs").display().to_string();
    let b = env.path("b.txt").display().to_string();
    assert_eq!(
        out.text(),
        format!(
            "Found 3 matches\n{b}:\n  Line 2: TODO item\n\n{a}:\n  Line 2: let x = todo();\n  Line 3: // TODO: later"
        )
    );
    let only_rs = env
        .call("grep", json!({"pattern": "todo", "include": "*.rs"}))
        .await
        .ok();
    assert_eq!(only_rs.value()["totalMatches"], json!(1));
    let one_file = env
        .call("grep", json!({"pattern": "item", "path": "b.txt"}))
        .await
        .ok();
    assert_eq!(one_file.value()["totalMatches"], json!(1));
}

#[tokio::test]
async fn grep_skips_binary_and_ignored_files() {
    let env = Env::new();
    std::fs::write(env.path("blob.bin"), b"needle\0\x01\x02").unwrap();
    env.put("skipped/x.txt", "needle\n");
    env.put(".ignore", "skipped/\n");
    env.put(".hidden.txt", "needle\n");
    env.put("seen.txt", "needle\n");
    let out = env.call("grep", json!({"pattern": "needle"})).await.ok();
    assert_eq!(out.value()["totalMatches"], json!(1), "{}", out.text());
    assert!(out.text().contains("seen.txt"));
}

#[tokio::test]
async fn grep_is_capped_at_250_with_a_note() {
    let env = Env::new();
    let body: String = (0..300).map(|i| format!("hit {i}\n")).collect();
    env.put("many.txt", &body);
    let out = env.call("grep", json!({"pattern": "^hit"})).await.ok();
    assert_eq!(out.value()["matches"].as_array().unwrap().len(), 250);
    assert_eq!(out.value()["totalMatches"], json!(300));
    assert!(out.text().contains("showing the first 250 of 300 matches"));
    assert!(out.text().contains("Line 250: hit 249"));
    assert!(!out.text().contains("Line 251:"));
}

#[tokio::test]
async fn grep_errors_and_cancellation() {
    let env = Env::new();
    env.put("f.txt", "x\n");
    env.call("grep", json!({"pattern": "(unclosed"}))
        .await
        .err(FS_INVALID_PATTERN);
    let none = env.call("grep", json!({"pattern": "zzz"})).await.ok();
    assert_eq!(none.text(), "No matches found");
    let cancelled = env
        .call_with("grep", json!({"pattern": "x"}), None, aborted())
        .await;
    assert!(cancelled.0.error().is_some_and(dsh_core::Failure::is_abort));
}

/// Issue 17 item 1: a search path that does not exist is `FS_NOT_FOUND` (ripgrep: "No such file
/// or directory", exit 2), never "No matches found" / "No files found"; `glob` on a file is
/// still `FS_NOT_A_FILE`.
#[tokio::test]
async fn grep_and_glob_on_a_missing_path_are_not_found() {
    let env = Env::new();
    env.put("f.txt", "x\n");
    for (tool, args) in [
        ("grep", json!({"pattern": "x", "path": "nope"})),
        ("grep", json!({"pattern": "x", "path": "nope/deeper.txt"})),
        ("glob", json!({"pattern": "*", "path": "nope"})),
        ("glob", json!({"pattern": "**/*.rs", "path": "missing/dir"})),
    ] {
        let out = env.call(tool, args).await.err(FS_NOT_FOUND);
        assert!(out.text().contains("not found"), "{tool}: {}", out.text());
    }
    env.call("glob", json!({"pattern": "*", "path": "f.txt"}))
        .await
        .err(FS_NOT_A_FILE);
}

/// Issue 17 item 1: skipped files are counted and the way to include them named. As ripgrep
/// (`rg needle` in a git repository with `target/` in `.gitignore`): the ignored directory and the
/// binary file are skipped, naming either as the path searches it (`rg needle target`,
/// `rg needle blob.bin` says "binary file matches").
#[tokio::test]
async fn grep_says_what_it_skipped_and_how_to_search_it() {
    let env = Env::new();
    std::fs::create_dir_all(env.path(".git")).unwrap();
    env.put(".gitignore", "target/\n*.log\n");
    env.put("target/out.txt", "needle\n");
    env.put("run.log", "needle\n");
    std::fs::write(env.path("blob.bin"), b"needle\0\x01\x02").unwrap();
    env.put("src/seen.txt", "needle\n");
    let out = env.call("grep", json!({"pattern": "needle"})).await.ok();
    assert_eq!(out.value()["totalMatches"], json!(1), "{}", out.text());
    let text = out.text();
    assert!(
        text.contains("Skipped 1 binary file; pass one as `path`"),
        "{text}"
    );
    assert!(
        text.contains("Skipped 1 directory and 1 matching file ignored by .gitignore or .ignore (target/, run.log); pass one as `path`"),
        "{text}"
    );
    assert_eq!(out.value()["skippedBinary"], json!(1));
    assert_eq!(out.value()["ignored"]["dirs"], json!(1));
    let none = env.call("grep", json!({"pattern": "zzz"})).await.ok();
    assert!(
        none.text().starts_with("No matches found\n\n(Skipped"),
        "{}",
        none.text()
    );
    let inside = env
        .call("grep", json!({"pattern": "needle", "path": "target"}))
        .await
        .ok();
    assert_eq!(
        inside.value()["totalMatches"],
        json!(1),
        "{}",
        inside.text()
    );
    let blob = env
        .call("grep", json!({"pattern": "needle", "path": "blob.bin"}))
        .await
        .ok();
    assert_eq!(blob.value()["totalMatches"], json!(1), "{}", blob.text());
    let clean = env
        .call("grep", json!({"pattern": "needle", "path": "src"}))
        .await
        .ok();
    assert!(!clean.text().contains("Skipped"), "{}", clean.text());
}

/// Issue 17 item 1, ripgrep's rule: `.gitignore` applies inside a git repository only (`.ignore`
/// applies everywhere), so outside one nothing is counted as ignored by it.
#[tokio::test]
async fn gitignore_applies_only_inside_a_git_repository_as_in_ripgrep() {
    let env = Env::new();
    env.put(".gitignore", "target/\n");
    env.put("target/out.rs", "");
    let out = env.call("glob", json!({"pattern": "**/*.rs"})).await.ok();
    assert_eq!(out.value()["total"], json!(1), "{}", out.text());
    std::fs::create_dir_all(env.path(".git")).unwrap();
    let out = env.call("glob", json!({"pattern": "**/*.rs"})).await.ok();
    assert_eq!(out.value()["total"], json!(0), "{}", out.text());
    assert!(
        out.text()
            .starts_with("No files found\n\n(Skipped 1 directory ignored"),
        "{}",
        out.text()
    );
}

/// Issue 17 item 1: a pattern naming a dot-folder or dot-file matches it (ripgrep would need
/// `--hidden`); `.git` itself is never listed, and other hidden files stay out of plain patterns.
#[tokio::test]
async fn glob_patterns_naming_a_dot_folder_match() {
    let env = Env::new();
    env.put(".github/workflows/ci.yml", "on: push\n");
    env.put(".git/config.yml", "");
    env.put("app.yml", "");
    env.put(".env", "K=v\n");
    let names = |v: &serde_json::Value| -> Vec<String> {
        let mut n: Vec<String> = v["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                std::path::Path::new(f.as_str().unwrap())
                    .strip_prefix(&env.root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        n.sort();
        n
    };
    let ci = env
        .call("glob", json!({"pattern": ".github/**/*.yml"}))
        .await
        .ok();
    assert_eq!(names(&ci.value()), vec![".github/workflows/ci.yml"]);
    let dot = env.call("glob", json!({"pattern": "**/.env"})).await.ok();
    assert_eq!(names(&dot.value()), vec![".env"]);
    let plain = env.call("glob", json!({"pattern": "**/*.yml"})).await.ok();
    assert_eq!(names(&plain.value()), vec!["app.yml"]);
    let grep = env
        .call("grep", json!({"pattern": "push", "include": ".github/**"}))
        .await
        .ok();
    assert_eq!(grep.value()["totalMatches"], json!(1), "{}", grep.text());
}
