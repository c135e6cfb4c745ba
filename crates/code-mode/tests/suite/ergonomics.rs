//! Code Mode as a model meets it (issue 17, item 5): a name that is no tool rejects with the
//! tools there are, a failure with no output has no empty `Captured output:`, and the output
//! shown is capped like `bash` output, the whole of it saved in a private file.

use std::os::unix::fs::PermissionsExt;

use dsh_code_mode::DEFAULT_MAX_SHOWN_BYTES;
use serde_json::json;

use super::support::*;

#[tokio::test]
async fn issue17_5_an_unknown_tool_rejects_naming_the_tools() {
    let h = Harness::new(vec![echo_tool(), echo_tool_named("grep")], |_| {}).await;
    let r = h.run_code("return await tools.nosuch({value: 'x'})").await;
    assert!(r.is_error());
    assert_eq!(
        text(&r),
        "Error: code run failed (exception): ToolCallError: unknown tool \"nosuch\"; tools: echo, grep"
    );
    let r = h
        .run_code(
            "try { await tools.nosuch() } catch (e) { \
               return [e.name, e.toolName, e instanceof ToolCallError] }",
        )
        .await;
    assert_eq!(
        value_of(&r)["result"],
        json!(["ToolCallError", "nosuch", true])
    );
    // Nothing was dispatched for it.
    assert!(
        h.dispatch_records().is_empty(),
        "{:?}",
        h.dispatch_records()
    );
}

#[tokio::test]
async fn issue17_5_tools_is_still_a_plain_table_of_the_tools() {
    let h = Harness::new(vec![echo_tool()], |_| {}).await;
    let r = h
        .run_code(
            "return [typeof tools.then, typeof tools.toJSON, 'nosuch' in tools, \
             Object.keys(tools), JSON.stringify(tools), typeof tools.echo, \
             await tools.echo({value: 'v'}), typeof tools[Symbol.iterator], \
             await tools['0']({}).catch(e => e.message)]",
        )
        .await;
    assert!(!r.is_error(), "{r:?}");
    assert_eq!(
        value_of(&r)["result"],
        json!([
            "undefined",
            "undefined",
            false,
            ["echo"],
            "{}",
            "function",
            "echo:v",
            "undefined",
            "unknown tool \"0\"; tools: echo"
        ])
    );
    // `await tools` is not taken for a promise.
    let r = h
        .run_code("const t = await tools; return typeof t.echo")
        .await;
    assert_eq!(text(&r), "function");
}

/// A binding is a function named for its tool with one parameter. Whichever way its argument
/// is read (plain data straight from the value; a getter, a cycle or nothing through the
/// text path), it answers a promise and never throws.
#[tokio::test]
async fn code_13_60_a_binding_answers_a_promise_on_either_path_and_never_throws() {
    let h = Harness::new(vec![echo_tool()], |_| {}).await;
    let r = h
        .run_code(
            "const e = tools.echo; \
             const cyclic = {}; cyclic.self = cyclic; \
             let threw = 0; const answers = []; \
             for (const args of [[{value: 'p'}], [{get value() { return 't' }}], [], [cyclic]]) { \
               try { answers.push(e(...args)) } catch (_) { threw++ } \
             } \
             const settled = await Promise.allSettled(answers); \
             return [e.name, e.length, threw, answers.every(a => a instanceof Promise), \
                     settled.map(s => s.status === 'fulfilled' ? s.value : s.reason.name)]",
        )
        .await;
    assert_eq!(
        value_of(&r)["result"],
        json!([
            "echo",
            1,
            0,
            true,
            ["echo:p", "echo:t", "ToolCallError", "ToolCallError"]
        ]),
        "{r:?}"
    );
}

#[tokio::test]
async fn issue17_5_an_unknown_tool_with_no_tools_says_none() {
    let h = Harness::new(vec![], |_| {}).await;
    let r = h.run_code("await tools.read({file_path: 'x'})").await;
    assert!(
        text(&r).ends_with("unknown tool \"read\"; tools: (none)"),
        "{}",
        text(&r)
    );
}

#[tokio::test]
async fn issue17_5_a_failure_with_no_output_has_no_captured_output_label() {
    let h = Harness::new(vec![], |_| {}).await;
    let r = h.run_code("throw new Error('boom')").await;
    assert_eq!(text(&r), "Error: code run failed (exception): Error: boom");
    let r = h
        .run_code("console.log('before'); throw new Error('boom')")
        .await;
    assert_eq!(
        text(&r),
        "Error: code run failed (exception): Error: boom\nCaptured output:\nbefore"
    );
}

#[tokio::test]
async fn issue17_5_long_output_shows_its_tail_and_saves_the_whole() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("code-output");
    let target = out.clone();
    let h = Harness::new(vec![], move |c| c.shown.dir = Some(target)).await;
    let r = h
        .run_code(
            "for (let i = 0; i < 2000; i++) console.log('line ' + i + ' ' + 'x'.repeat(40)); \
             return 'the end'",
        )
        .await;
    assert!(!r.is_error(), "{r:?}");
    let shown = text(&r);
    let (note, kept) = shown.split_once('\n').unwrap();
    assert!(kept.len() <= DEFAULT_MAX_SHOWN_BYTES, "{}", kept.len());
    assert!(kept.len() > DEFAULT_MAX_SHOWN_BYTES - 100);
    assert!(kept.ends_with(&format!("line 1999 {}\nthe end", "x".repeat(40))));
    let file = value_of(&r)["outputFile"].as_str().unwrap().to_owned();
    assert!(file.starts_with(out.to_str().unwrap()), "{file}");
    assert_eq!(
        note,
        format!(
            "[output truncated: showing the last {} of {} bytes; full output: {file}]",
            kept.len(),
            std::fs::metadata(&file).unwrap().len()
        )
    );
    let whole = std::fs::read_to_string(&file).unwrap();
    assert!(whole.starts_with("line 0 xxxx"));
    assert!(whole.ends_with(kept));
    assert_eq!(whole.lines().count(), 2001);
    let mode = |p: &str| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&file), 0o600);
    assert_eq!(mode(out.to_str().unwrap()), 0o700);
    // The program's own value is untouched.
    assert_eq!(value_of(&r)["logs"].as_array().unwrap().len(), 2000);
}

#[tokio::test]
async fn issue17_5_short_output_is_not_saved() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("code-output");
    let h = Harness::new(vec![], move |c| c.shown.dir = Some(target)).await;
    let r = h.run_code("console.log('x'.repeat(29000)); return 1").await;
    assert_eq!(text(&r).len(), 29002);
    assert!(value_of(&r).get("outputFile").is_none());
    assert!(!dir.path().join("code-output").exists());
}

#[tokio::test]
async fn issue17_5_a_long_failure_keeps_its_first_line_and_its_tail() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().to_path_buf();
    let h = Harness::new(vec![], move |c| {
        c.shown.dir = Some(target);
        c.shown.max_bytes = 500;
    })
    .await;
    let r = h
        .run_code("for (let i = 0; i < 100; i++) console.log('step ' + i); throw new Error('boom')")
        .await;
    assert!(r.is_error());
    let t = text(&r);
    assert!(
        t.starts_with(
            "Error: code run failed (exception): Error: boom\nCaptured output:\n[output truncated: showing the last "
        ),
        "{t}"
    );
    assert!(t.ends_with("step 98\nstep 99"), "{t}");
    assert!(t.len() < 500 + 200, "{}", t.len());
    let file = t
        .split("full output: ")
        .nth(1)
        .and_then(|s| s.split(']').next())
        .unwrap();
    let whole = std::fs::read_to_string(file).unwrap();
    assert!(
        whole.starts_with("code run failed (exception): Error: boom\nCaptured output:\nstep 0\n")
    );
}
