//! `dsh --help` and each subcommand's help name every subcommand, flag and value of the contract.

use super::support::*;

fn help(args: &[&str]) -> String {
    let out = dsh_run(args);
    assert_eq!(out.code, 0, "{args:?}: {}", out.both());
    assert!(out.stderr.is_empty(), "{args:?}: {}", out.both());
    out.stdout
}

fn assert_mentions(text: &str, words: &[&str], what: &str) {
    for w in words {
        assert!(text.contains(w), "{what} does not mention {w}:\n{text}");
    }
}

#[test]
fn top_level_help_lists_every_subcommand_and_the_exit_codes() {
    for args in [&["--help"][..], &["help"], &["-h"]] {
        let text = help(args);
        assert_mentions(
            &text,
            &[
                "demo",
                "run",
                "tools",
                "check",
                "transcript",
                "repair",
                "Exit codes",
                "130",
            ],
            "dsh --help",
        );
    }
    let version = help(&["--version"]);
    assert!(version.starts_with("dsh "), "{version}");
}

#[test]
fn run_help_mentions_every_flag_and_value() {
    for args in [&["run", "--help"][..], &["help", "run"]] {
        let text = help(args);
        assert_mentions(
            &text,
            &[
                "SCRIPT",
                "--workspace",
                "--session",
                "XDG_STATE_HOME",
                "--policy",
                "--approve",
                "ask",
                "always",
                "never",
                "--max-parallel",
                "--mode",
                "native",
                "code",
                "both",
                "--cancel-after-ms",
                "--demo-tools",
                "echo",
                "sleep",
                "fail",
                "--json",
            ],
            "dsh run --help",
        );
    }
}

#[test]
fn each_subcommand_help_mentions_its_arguments() {
    let cases: &[(&str, &[&str])] = &[
        ("demo", &["demo"]),
        ("check", &["LOGS", "line"]),
        (
            "transcript",
            &["LOG", "--format", "openai", "anthropic", "dsh"],
        ),
        ("repair", &["LOG"]),
    ];
    for (sub, words) in cases {
        let text = help(&[sub, "--help"]);
        assert_mentions(&text, words, &format!("dsh {sub} --help"));
    }
}
