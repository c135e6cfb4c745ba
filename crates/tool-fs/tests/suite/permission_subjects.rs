//! Permission rules over canonical subjects: a rule naming a file holds for every spelling of
//! the file and every symlink to it inside the workspace, because a file tool's subject is the
//! path it will open (normalized, symlinks followed), relative to the root and absolute.

use std::os::unix::fs::symlink;
use std::path::Path;

use dsh_core::{Arguments, ToolExecution, ToolExecutionInput, ToolRegistry};
use dsh_guard::{PermissionAction, PermissionRules};
use proptest::prelude::*;
use serde_json::json;

use super::common::Env;

fn registry(env: &Env) -> ToolRegistry {
    let registry = ToolRegistry::new();
    for def in env.tools.definitions().unwrap() {
        registry.register(def).unwrap().keep();
    }
    registry
}

fn action(rules: &PermissionRules, tool: &str, path: &str) -> PermissionAction {
    let args = Arguments::from_value(
        json!({"file_path": path, "content": "x", "old_string": "a", "new_string": "b"}),
    )
    .unwrap();
    let exec = ToolExecution::new(ToolExecutionInput::new("c1", tool, args));
    rules.decide(&exec).action()
}

#[test]
fn p1_a_deny_holds_for_every_spelling_and_link_of_the_file() {
    let env = Env::new();
    env.put("secrets.env", "KEY=1\n");
    env.put("d/other.txt", "x\n");
    symlink(env.path("secrets.env"), env.path("d/innocent.txt")).unwrap();
    symlink("../secrets.env", env.path("d/relative-link")).unwrap();
    let rules = PermissionRules::new(registry(&env))
        .deny("read(secrets.env)")
        .unwrap()
        .deny("Edit(*secrets*)")
        .unwrap();
    let absolute = env.path("secrets.env").to_string_lossy().into_owned();
    for spelling in [
        "secrets.env",
        "./secrets.env",
        "d/../secrets.env",
        "d/./../secrets.env",
        absolute.as_str(),
        "d/innocent.txt",
        "d/relative-link",
    ] {
        assert_eq!(
            action(&rules, "read", spelling),
            PermissionAction::Deny,
            "read {spelling}"
        );
        // Claude Code's `Edit` names our `edit`, and the glob sees the canonical path too.
        assert_eq!(
            action(&rules, "edit", spelling),
            PermissionAction::Deny,
            "edit {spelling}"
        );
    }
    assert_eq!(
        action(&rules, "read", "d/other.txt"),
        PermissionAction::Allow
    );
    // A rule may also name the absolute path.
    let by_absolute = PermissionRules::new(registry(&env))
        .deny(&format!("read({absolute})"))
        .unwrap();
    assert_eq!(
        action(&by_absolute, "read", "d/innocent.txt"),
        PermissionAction::Deny
    );
    // A path outside the roots is matched by its absolute canonical form.
    std::fs::write(env.outside.join("out.txt"), "o").unwrap();
    let outside = env.outside.join("out.txt").to_string_lossy().into_owned();
    let by_outside = PermissionRules::new(registry(&env))
        .deny(&format!("read({outside})"))
        .unwrap();
    assert_eq!(
        action(&by_outside, "read", "../outside/out.txt"),
        PermissionAction::Deny
    );
}

fn name() -> impl Strategy<Value = String> {
    "[a-z]{1,6}(\\.[a-z]{1,3})?"
}

/// A way to spell `target` (a path relative to the root) from the root.
#[derive(Clone, Debug)]
enum Spelling {
    Plain,
    Dot,
    Detour(String),
    Absolute,
    Link(String),
    LinkToDir(String),
}

fn spelling() -> impl Strategy<Value = Spelling> {
    prop_oneof![
        Just(Spelling::Plain),
        Just(Spelling::Dot),
        name().prop_map(Spelling::Detour),
        Just(Spelling::Absolute),
        name().prop_map(Spelling::Link),
        name().prop_map(Spelling::LinkToDir),
    ]
}

/// Writes what the spelling needs and returns it.
fn spell(root: &Path, target: &str, how: &Spelling) -> String {
    match how {
        Spelling::Plain => target.to_owned(),
        Spelling::Dot => format!("./{target}"),
        Spelling::Detour(dir) => {
            let d = format!("zz-{dir}");
            std::fs::create_dir_all(root.join(&d)).unwrap();
            format!("{d}/../{target}")
        }
        Spelling::Absolute => root.join(target).to_string_lossy().into_owned(),
        Spelling::Link(l) => {
            let link = format!("link-{l}");
            let _ = std::fs::remove_file(root.join(&link));
            symlink(root.join(target), root.join(&link)).unwrap();
            link
        }
        Spelling::LinkToDir(l) => {
            let (dir, file) = target.rsplit_once('/').unwrap_or((".", target));
            let link = format!("dirlink-{l}");
            let _ = std::fs::remove_file(root.join(&link));
            symlink(root.join(dir), root.join(&link)).unwrap();
            format!("{link}/{file}")
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// For random files, links and spellings, a deny on the file holds for read, write and edit.
    #[test]
    fn p1_for_random_files_links_and_spellings_a_deny_holds(
        dirs in prop::collection::vec(name(), 0..3),
        file in name(),
        how in prop::collection::vec(spelling(), 1..4),
    ) {
        let env = Env::new();
        let target = if dirs.is_empty() { file.clone() } else { format!("{}/{file}", dirs.join("/")) };
        env.put(&target, "secret\n");
        let rules = PermissionRules::new(registry(&env)).deny(&format!("read({target})")).unwrap()
            .deny(&format!("write({target})")).unwrap().deny(&format!("edit({target})")).unwrap();
        for h in &how {
            let spelled = spell(&env.root, &target, h);
            for tool in ["read", "write", "edit"] {
                prop_assert_eq!(action(&rules, tool, &spelled), PermissionAction::Deny, "{} {} ({:?})", tool, spelled, h);
            }
        }
    }
}

/// A link swapped after the rules decided still does not lead past a read deny: `read` checks
/// the file it is about to open against the same rules (the read gate the host installs).
#[tokio::test]
async fn p1_read_checks_the_file_it_opens_against_the_read_gate() {
    let env = Env::new();
    env.put("secrets.env", "KEY=1\n");
    env.put("plain.txt", "plain\n");
    symlink(env.path("plain.txt"), env.path("link")).unwrap();
    let rules = PermissionRules::new(registry(&env))
        .deny("read(secrets.env)")
        .unwrap();
    // Decided while the link still pointed at a plain file.
    assert_eq!(action(&rules, "read", "link"), PermissionAction::Allow);
    env.tools
        .hooks()
        .set_read_gate(std::sync::Arc::new(move |subject, _approved| {
            match rules.decide_subject("read", Some(subject)).action() {
                PermissionAction::Allow => None,
                other => Some(format!("{other}")),
            }
        }));
    std::fs::remove_file(env.path("link")).unwrap();
    symlink(env.path("secrets.env"), env.path("link")).unwrap();
    let out = env.call("read", json!({"file_path": "link"})).await;
    assert!(out.is_error(), "{}", out.text());
    assert!(
        out.text().contains("denied by permission rule"),
        "{}",
        out.text()
    );
    assert!(!out.text().contains("KEY=1"));
    let plain = env.call("read", json!({"file_path": "plain.txt"})).await;
    assert!(!plain.is_error(), "{}", plain.text());
}
