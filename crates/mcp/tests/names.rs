//! Tool names: `mcp__<server>__<tool>`, refused when a model API would refuse them.

use dsh_mcp::{McpError, tool_name};
use proptest::prelude::*;

#[test]
fn a_tool_is_named_as_claude_code_names_it() {
    assert_eq!(
        tool_name("github", "create_issue").unwrap(),
        "mcp__github__create_issue"
    );
}

#[test]
fn a_name_with_a_dot_or_a_space_is_refused_naming_the_character() {
    let e = tool_name("fs", "read.file").unwrap_err();
    assert!(
        matches!(&e, McpError::ToolName { problem, .. } if problem.contains("'.'")),
        "{e}"
    );
    assert!(tool_name("my server", "x").is_err());
}

proptest! {
    #[test]
    fn a_name_is_accepted_exactly_when_its_characters_and_length_fit(
        server in "[a-zA-Z0-9_-]{1,40}",
        tool in "[a-zA-Z0-9_.-]{1,40}",
    ) {
        let fits = 5 + server.len() + 2 + tool.len() <= 64 && !tool.contains('.');
        let named = tool_name(&server, &tool);
        prop_assert_eq!(named.is_ok(), fits);
        if let Ok(name) = named {
            prop_assert_eq!(name, format!("mcp__{server}__{tool}"));
        }
    }
}

#[test]
fn a_server_name_that_would_make_tool_names_ambiguous_is_refused_saying_why() {
    let config = dsh_mcp::ServerConfig::command("python3", ["server.py"]);
    for name in ["x__y", "x_"] {
        let e = config.check(name).unwrap_err();
        assert!(
            matches!(&e, McpError::Config { server, problem }
                if server == name && problem.contains("mcp__<server>__<tool>")),
            "{e}"
        );
    }
    assert!(config.check("x_y").is_ok());
    assert!(config.check("_x-y").is_ok());
}
