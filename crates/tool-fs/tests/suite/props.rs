//! Property tests for the invariants with a shape: version text round trips, diff hunks that
//! splice the old text into the new, confinement that never yields a path outside the roots and
//! agrees with the OS, read pages that tile the file, and edits that match `str::replace`.

use std::os::unix::fs::symlink;

use dsh_tool_fs::codes::{FS_AMBIGUOUS_EDIT, FS_EDIT_NOT_FOUND};
use dsh_tool_fs::diff::{Span, for_replacements};
use dsh_tool_fs::{FileVersion, text};
use proptest::prelude::*;
use serde_json::json;

use super::common::Env;

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Lines of a hunk text ("" is ambiguous: no line or one empty line).
fn hunk_lines(s: &str) -> Vec<Vec<&str>> {
    if s.is_empty() {
        vec![vec![], vec![""]]
    } else {
        vec![s.split('\n').collect()]
    }
}

/// Whether replacing `old` by `new` at one common position turns `a` into `b`.
fn splices(a: &[&str], b: &[&str], old: &[&str], new: &[&str]) -> bool {
    (0..=a.len()).any(|i| {
        a.len() >= i + old.len()
            && b.len() >= i + new.len()
            && a[i..i + old.len()] == *old
            && b[i..i + new.len()] == *new
            && a[..i] == b[..i]
            && a[i + old.len()..] == b[i + new.len()..]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn version_text_round_trips(
        dev in any::<u64>(), ino in any::<u64>(), size in any::<u64>(),
        mtime in any::<i64>(), ctime in any::<i64>(), hash in any::<u64>(),
    ) {
        let s = format!("1:{dev}:{ino}:{size}:{mtime}:{ctime}:{hash:016x}");
        let v: FileVersion = s.parse().unwrap();
        prop_assert_eq!(v.to_string(), s);
        let json = serde_json::to_value(v).unwrap();
        prop_assert_eq!(serde_json::from_value::<FileVersion>(json).unwrap(), v);
    }

    #[test]
    fn a_single_replacement_hunk_splices_old_into_new(
        before in "[ab\n]{1,40}",
        old in "[ab\n]{1,4}",
        new in "[abc\n]{0,4}",
        pick in any::<prop::sample::Index>(),
    ) {
        let found: Vec<usize> = before.match_indices(old.as_str()).map(|(i, _)| i).collect();
        prop_assume!(!found.is_empty());
        let at = found[pick.index(found.len())];
        let mut after = before.clone();
        after.replace_range(at..at + old.len(), &new);
        let spans = [Span { old_start: at, old_len: old.len(), new_len: new.len() }];
        let diffs = for_replacements("f", &before, &after, &spans);
        prop_assert_eq!(diffs.len(), 1);
        let a = text::lines(&before);
        let b = text::lines(&after);
        let ok = hunk_lines(&diffs[0].old_text).iter().any(|o| {
            hunk_lines(&diffs[0].new_text).iter().any(|n| splices(&a, &b, o, n))
        });
        prop_assert!(ok, "{:?} does not splice {:?} into {:?}", diffs[0], before, after);
    }

    #[test]
    fn confinement_never_leaves_the_root_and_agrees_with_the_os(
        parts in prop::collection::vec(
            prop::sample::select(vec!["a", "b", "..", ".", "out", "in", "missing", "f.txt", "loop"]),
            1..7,
        ),
    ) {
        let env = Env::new();
        std::fs::create_dir_all(env.path("a/b")).unwrap();
        std::fs::write(env.path("a/f.txt"), "x").unwrap();
        let _ = symlink(&env.outside, env.path("out"));
        let _ = symlink(&env.outside, env.path("a/out"));
        let _ = symlink("a", env.path("in"));
        let _ = symlink("../b", env.path("a/b/in"));
        let _ = symlink("loop", env.path("loop"));
        let raw = parts.join("/");
        let resolved = rt().block_on(env.ws().resolve(&env.root, &raw));
        if let Ok(p) = resolved {
            prop_assert!(p.starts_with(&env.root), "{raw} -> {}", p.display());
            if let Ok(os) = std::fs::canonicalize(env.root.join(&raw)) {
                prop_assert_eq!(os, p);
            }
        }
    }

    #[test]
    fn read_pages_tile_the_file(
        body in prop::collection::vec("[a-z ]{0,8}", 0..30),
        trailing in any::<bool>(),
        page in 1u64..7,
    ) {
        let env = Env::new();
        let mut content = body.join("\n");
        if trailing && !content.is_empty() { content.push('\n'); }
        env.put("f.txt", &content);
        let rt = rt();
        let mut got: Vec<String> = Vec::new();
        let mut offset = 1u64;
        loop {
            let out = rt.block_on(env.call(
                "read",
                json!({"file_path": "f.txt", "offset": offset, "limit": page}),
            ));
            prop_assert!(!out.is_error(), "{}", out.text());
            let lines = out.meta()["lines"].as_array().unwrap().clone();
            for (k, l) in lines.iter().enumerate() {
                prop_assert_eq!(l["number"].as_u64().unwrap(), offset + k as u64);
                got.push(l["text"].as_str().unwrap().to_owned());
            }
            let total = out.meta()["totalLines"].as_u64().unwrap();
            if offset + lines.len() as u64 > total { break; }
            let note = format!("Use offset={} to continue.", offset + lines.len() as u64);
            prop_assert!(out.text().contains(&note), "{}", out.text());
            offset += lines.len() as u64;
        }
        prop_assert_eq!(got, text::lines(&content));
    }

    #[test]
    fn edits_match_str_replace(
        content in "[ab\n]{0,30}",
        old in "[ab]{1,3}",
        new in "[abc]{0,3}",
        all in any::<bool>(),
    ) {
        prop_assume!(old != new);
        let env = Env::new();
        env.put("f.txt", &content);
        let out = rt().block_on(env.call(
            "edit",
            json!({"file_path": "f.txt", "old_string": old, "new_string": new, "replace_all": all}),
        ));
        let count = content.matches(old.as_str()).count();
        let code = out.code();
        let disk = env.get("f.txt");
        match count {
            0 => {
                prop_assert_eq!(code.as_deref(), Some(FS_EDIT_NOT_FOUND));
                prop_assert_eq!(disk, content);
            }
            1 => prop_assert_eq!(disk, content.replace(old.as_str(), &new)),
            _ if all => prop_assert_eq!(disk, content.replace(old.as_str(), &new)),
            _ => {
                prop_assert_eq!(code.as_deref(), Some(FS_AMBIGUOUS_EDIT));
                prop_assert_eq!(disk, content);
            }
        }
    }
}
