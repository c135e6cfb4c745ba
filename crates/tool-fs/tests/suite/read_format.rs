//! The read envelope in the reference's format, and its bounds.

use serde_json::json;

use super::common::Env;

#[tokio::test]
async fn envelope_matches_the_reference_exactly() {
    let env = Env::new();
    let p = env.put("a.txt", "alpha\n");
    let out = env.call("read", json!({"file_path": "a.txt"})).await.ok();
    assert_eq!(
        out.text(),
        format!(
            "<path>{}</path>\n<type>file</type>\n<content>\n1: alpha\n\n(End of file - total 1 lines)\n</content>",
            p.display()
        )
    );
    let meta = out.meta();
    assert_eq!(meta["path"], json!(p.to_str().unwrap()));
    assert_eq!(meta["offset"], json!(1));
    assert_eq!(meta["lines"], json!([{"number": 1, "text": "alpha"}]));
    assert_eq!(meta["totalLines"], json!(1));
    assert_eq!(meta["observed"]["path"], json!(p.to_str().unwrap()));
}

#[tokio::test]
async fn empty_file_and_crlf_lines() {
    let env = Env::new();
    env.put("empty.txt", "");
    let t = env
        .call("read", json!({"file_path": "empty.txt"}))
        .await
        .ok()
        .text();
    assert!(
        t.ends_with("<content>\n(End of file - total 0 lines)\n</content>"),
        "{t}"
    );
    env.put("dos.txt", "one\r\ntwo\r\n");
    let t = env
        .call("read", json!({"file_path": "dos.txt"}))
        .await
        .ok()
        .text();
    assert!(t.contains("1: one\n2: two\n"), "{t:?}");
}

#[tokio::test]
async fn long_files_are_cut_with_a_note_on_how_to_continue() {
    let env = Env::new();
    let body: String = (1..=2500).map(|i| format!("{i}\n")).collect();
    env.put("long.txt", &body);
    let out = env
        .call("read", json!({"file_path": "long.txt"}))
        .await
        .ok();
    assert_eq!(out.meta()["lines"].as_array().unwrap().len(), 2000);
    assert!(
        out.text()
            .contains("(Showing lines 1-2000 of 2500. Use offset=2001 to continue.)")
    );
    let rest = env
        .call("read", json!({"file_path": "long.txt", "offset": 2001}))
        .await
        .ok();
    assert!(
        rest.text()
            .contains("2500: 2500\n\n(End of file - total 2500 lines)")
    );
}

#[tokio::test]
async fn output_bytes_and_line_lengths_are_bounded() {
    let env = Env::new();
    let line = "x".repeat(1000);
    let body: String = (0..200).map(|_| format!("{line}\n")).collect();
    env.put("wide.txt", &body);
    let out = env
        .call("read", json!({"file_path": "wide.txt"}))
        .await
        .ok();
    let shown = out.meta()["lines"].as_array().unwrap().len();
    assert!(shown < 200 && shown > 10, "{shown}");
    assert!(
        out.text()
            .contains(&format!("Use offset={} to continue.", shown + 1))
    );
    env.put("one-line.txt", &"y".repeat(10_000));
    let t = env
        .call("read", json!({"file_path": "one-line.txt"}))
        .await
        .ok()
        .text();
    assert!(t.contains("... (line truncated to 2000 characters)"));
    assert!(t.len() < 3000);
}

#[tokio::test]
async fn edit_of_a_crlf_file_with_lf_old_string() {
    let (env, _p) = Env::with_policy();
    env.put("dos.txt", "one\r\ntwo\r\nthree\r\n");
    env.call("read", json!({"file_path": "dos.txt"})).await.ok();
    env.call(
        "edit",
        json!({"file_path": "dos.txt", "old_string": "one\ntwo", "new_string": "1\n2"}),
    )
    .await
    .ok();
    assert_eq!(env.get("dos.txt"), "1\r\n2\r\nthree\r\n");
}

#[tokio::test]
async fn write_meta_diff_of_an_overwrite() {
    let (env, _p) = Env::with_policy();
    env.put("f.txt", "a\nb\nc\nd\ne\nf\ng\nh\ni\n");
    env.call("read", json!({"file_path": "f.txt"})).await.ok();
    let out = env
        .call(
            "write",
            json!({"file_path": "f.txt", "content": "a\nb\nc\nd\nE\nf\ng\nh\ni\n"}),
        )
        .await
        .ok();
    assert_eq!(
        out.meta()["diffs"],
        json!([{"path": "f.txt", "oldText": "b\nc\nd\ne\nf\ng\nh", "newText": "b\nc\nd\nE\nf\ng\nh"}])
    );
}
