//! The exact strings and codes of the conformance quick reference that dsh-core emits: failure
//! constructors with their `info`, the message catalogue, registration and budget errors, and the
//! `Error: <message>` content of a failed result.

use dsh_core::DeadlineError;
use dsh_core::codes::{self, messages};
use dsh_core::{CoreError, Failure, ToolResult};
use serde_json::json;

fn info(f: &Failure) -> Option<(String, String)> {
    f.info().map(|i| (i.name.to_string(), i.code.to_string()))
}

fn typed(name: &str, code: &str) -> Option<(String, String)> {
    Some((name.to_owned(), code.to_owned()))
}

#[test]
fn unknown_tool_is_tool_not_found() {
    let f = Failure::unknown_tool("nope");
    assert_eq!(f.message(), "unknown tool \"nope\"");
    assert_eq!(info(&f), typed("ToolNotFoundError", "UNKNOWN_TOOL"));
}

#[test]
fn code_mode_route_hint() {
    assert_eq!(
        messages::code_mode_only("read"),
        "unknown tool \"read\": only `run_code` is callable directly — call `read` from inside a `run_code` program instead"
    );
}

#[test]
fn invalid_arguments_join_violations_with_semicolons() {
    let f = Failure::invalid_args(&["a".into(), "b".into(), "c".into()]);
    assert_eq!(f.message(), "invalid arguments: a; b; c");
    assert_eq!(info(&f), typed("ToolArgsError", "INVALID_ARGS"));
}

#[test]
fn plain_messages_carry_no_info() {
    for m in [
        messages::ARGS_NOT_LOSSLESS,
        messages::RESULT_NOT_LOSSLESS,
        messages::POST_REPLACE_BOTH,
        messages::POST_REPLACE_FAILED_VALUE,
        messages::POST_BLOCK_EMPTY,
    ] {
        let r = ToolResult::failure(Failure::new(m));
        assert_eq!(
            serde_json::to_value(&r).expect("serializes"),
            json!({"content": [{"type": "text", "text": format!("Error: {m}")}],
                   "isError": true, "error": {"message": m}})
        );
    }
    assert_eq!(
        messages::ARGS_NOT_LOSSLESS,
        "tool execution arguments must be losslessly JSON-serializable"
    );
    assert_eq!(
        messages::RESULT_NOT_LOSSLESS,
        "tool result must be losslessly JSON-serializable"
    );
    assert_eq!(
        messages::POST_REPLACE_BOTH,
        "tools/post-execute accept decision cannot replace both value and content"
    );
    assert_eq!(
        messages::POST_REPLACE_FAILED_VALUE,
        "tools/post-execute cannot replace the value of a failed result"
    );
    assert_eq!(
        messages::POST_BLOCK_EMPTY,
        "tool result blocked by post-execute policy"
    );
}

#[test]
fn output_errors_name_the_tool() {
    let f = Failure::invalid_output("calc", "value snapshot failed: boom");
    assert_eq!(f.message(), "tool \"calc\" value snapshot failed: boom");
    assert_eq!(info(&f), typed("ToolOutputError", "INVALID_TOOL_OUTPUT"));
    assert_eq!(
        ToolResult::failure(f).first_text(),
        Some("Error: tool \"calc\" value snapshot failed: boom")
    );
}

#[test]
fn cancellation_and_timeout_failures() {
    let before = Failure::aborted_before_dispatch();
    assert_eq!(before.message(), "tool call aborted before dispatch");
    assert_eq!(
        info(&before),
        typed("AbortError", "ABORTED_BEFORE_DISPATCH")
    );
    assert!(before.is_abort());

    let during = Failure::aborted();
    assert_eq!(during.message(), "tool call aborted");
    assert_eq!(info(&during), typed("AbortError", "ABORTED"));
    assert!(during.is_abort());

    let t = Failure::tool_timeout(100);
    assert_eq!(t.message(), "tool call timed out after 100ms");
    assert_eq!(info(&t), typed("ToolTimeoutError", "TOOL_TIMEOUT"));
    assert!(!t.is_abort());
    assert_eq!(codes::TOOL_TIMEOUT, "TOOL_TIMEOUT"); // TMO-09
    assert_eq!(
        serde_json::to_value(ToolResult::failure(t)).expect("serializes"),
        json!({
            "content": [{"type": "text", "text": "Error: tool call timed out after 100ms"}],
            "isError": true,
            "error": {"message": "tool call timed out after 100ms",
                      "info": {"name": "ToolTimeoutError", "code": "TOOL_TIMEOUT"}}
        })
    );
}

#[test]
fn unprintable_panics_use_the_placeholder() {
    let payload: Box<dyn std::any::Any + Send> = Box::new(42_u8);
    let f = Failure::from_panic("tool \"x\"", &*payload);
    assert_eq!(
        f.message(),
        "tool \"x\" panicked: <unprintable thrown value>"
    );
    assert_eq!(f.info(), None);
    let payload: Box<dyn std::any::Any + Send> = Box::new(String::from("owned text"));
    assert_eq!(
        Failure::from_panic("hook", &*payload).message(),
        "hook panicked: owned text"
    );
    assert_eq!(messages::UNPRINTABLE, "<unprintable thrown value>");
}

#[test]
fn approval_messages() {
    assert_eq!(
        messages::approval_not_supported("echo"),
        "tool \"echo\" requires approval (not yet supported)"
    );
    assert_eq!(
        messages::approval_rejected("echo"),
        "the user rejected tool \"echo\""
    );
    assert_eq!(
        messages::approval_cancelled("echo"),
        "approval for tool \"echo\" was cancelled"
    );
    assert_eq!(
        messages::approval_unavailable("echo"),
        "tool \"echo\" requires approval, but no approval channel is available"
    );
    assert_eq!(
        messages::approval_no_agent("echo"),
        "tool \"echo\" requires approval, but the call has no agent to route it through"
    );
    assert_eq!(
        messages::APPROVAL_POLICY_VALUES,
        "approval policy must be one of \"ask\" or \"never\""
    );
}

#[test]
fn registration_errors() {
    assert!(
        CoreError::MissingOutput
            .to_string()
            .contains("must declare output { schema, render, presentationMeta? }")
    );
    assert_eq!(
        CoreError::Timeout.to_string(),
        "timeoutMs must be a positive finite number"
    );
    assert_eq!(messages::TIMEOUT_POSITIVE, CoreError::Timeout.to_string());
    assert!(
        CoreError::AlreadyRegistered("x".into())
            .to_string()
            .contains("already registered")
    );
    assert!(
        CoreError::AlreadyRegisteredInScope("x".into())
            .to_string()
            .contains("already registered")
    );
    assert_eq!(
        CoreError::LossyParameters("lossy-schema".into()).to_string(),
        "tool \"lossy-schema\" parameters must be lossless JSON before schema projection"
    );
    assert_eq!(
        messages::MAX_PARALLEL_POSITIVE,
        "maxParallelToolCalls must be a positive integer"
    );
    assert_eq!(
        messages::MAX_SUB_CALLS_POSITIVE,
        "maxParallelSubCalls must be a positive integer"
    );
}

#[test]
fn budget_errors() {
    let e = DeadlineError::NotPositive {
        label: "timeoutMs".into(),
    };
    assert_eq!(e.to_string(), "timeoutMs must be a positive finite number");
    let e = DeadlineError::TooLarge {
        label: "timeoutMs".into(),
    };
    assert_eq!(
        e.to_string(),
        "timeoutMs must be no greater than 2147483647"
    );
    assert_eq!(
        dsh_core::TimeoutReason::new("WEB_TIMEOUT", 7).to_string(),
        "WEB_TIMEOUT after 7ms"
    );
}

#[test]
fn every_code_and_error_name() {
    let pairs = [
        (codes::UNKNOWN_TOOL, "UNKNOWN_TOOL"),
        (codes::INVALID_ARGS, "INVALID_ARGS"),
        (codes::INVALID_TOOL_OUTPUT, "INVALID_TOOL_OUTPUT"),
        (codes::ABORTED_BEFORE_DISPATCH, "ABORTED_BEFORE_DISPATCH"),
        (codes::ABORTED, "ABORTED"),
        (codes::TOOL_TIMEOUT, "TOOL_TIMEOUT"),
        (codes::FS_NOT_OBSERVED, "FS_NOT_OBSERVED"),
        (codes::FS_NOT_FOUND, "FS_NOT_FOUND"),
        (codes::FS_STALE_VERSION, "FS_STALE_VERSION"),
        (codes::INTERRUPTED, "INTERRUPTED"),
        (codes::TOOL_NOT_FOUND_ERROR, "ToolNotFoundError"),
        (codes::TOOL_ARGS_ERROR, "ToolArgsError"),
        (codes::TOOL_OUTPUT_ERROR, "ToolOutputError"),
        (codes::ABORT_ERROR, "AbortError"),
        (codes::TOOL_TIMEOUT_ERROR, "ToolTimeoutError"),
        (codes::FS_ERROR, "FsError"),
        (codes::HARNESS_ERROR, "HarnessError"),
        (codes::INTERRUPTED_ERROR, "InterruptedError"),
    ];
    for (got, want) in pairs {
        assert_eq!(got, want);
    }
    let h = Failure::harness("WEB_ABORTED", "web fetch aborted");
    assert_eq!(info(&h), typed("HarnessError", "WEB_ABORTED"));
    let fs = Failure::fs(codes::FS_STALE_VERSION, "stale");
    assert_eq!(info(&fs), typed("FsError", "FS_STALE_VERSION"));
}

#[test]
fn a_suffix_keeps_the_typed_info() {
    let f =
        Failure::fs(codes::FS_NOT_OBSERVED, "not read").with_suffix(" — read the file, then retry");
    assert_eq!(f.message(), "not read — read the file, then retry");
    assert_eq!(info(&f), typed("FsError", "FS_NOT_OBSERVED"));
    assert!(
        Failure::new("x")
            .retryable()
            .with_suffix("!")
            .is_retryable()
    );
}

#[test]
fn a_failure_never_carries_value_or_concludes_turn() {
    let r = ToolResult::failure(Failure::new("no")).with_concludes_turn(true);
    assert!(!r.concludes_turn());
    assert!(r.value().is_none());
    let v = serde_json::to_value(&r).expect("serializes");
    assert!(v.get("value").is_none() && v.get("concludesTurn").is_none());
    assert!(v.get("meta").is_none() && v.get("additionalContexts").is_none());
}
