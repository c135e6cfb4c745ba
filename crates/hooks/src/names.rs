//! The Claude Code names of our tools (`read` is `Read`, `bash` is `Bash`, ...), so configurations
//! written for Claude Code match our calls unchanged.

/// Our tool name and its Claude Code name, for every tool that has one.
pub const CLAUDE_NAMES: &[(&str, &str)] = &[
    ("read", "Read"),
    ("write", "Write"),
    ("edit", "Edit"),
    ("bash", "Bash"),
    ("glob", "Glob"),
    ("grep", "Grep"),
];

/// The Claude Code name of one of our tools, if it has one.
pub fn claude_name(ours: &str) -> Option<&'static str> {
    CLAUDE_NAMES
        .iter()
        .find(|(o, _)| *o == ours)
        .map(|(_, c)| *c)
}

/// The name a hook is told in `tool_name`: the Claude Code name when there is one, else ours.
pub fn hook_tool_name(ours: &str) -> &str {
    claude_name(ours).unwrap_or(ours)
}
