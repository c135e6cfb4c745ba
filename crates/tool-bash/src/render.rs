//! The model-facing text of one call, in the reference's shape: stdout, then `[stderr]` and
//! stderr, then one bracketed line per note (`[sandbox: ...]`, `[exit code: N]`); `(no output)`
//! when there is nothing. Long output keeps its tail, under a first line naming the full file.
//!
//! Guarantees: at most the configured number of output bytes is shown (invalid UTF-8 replaced),
//! plus the notes; a cut never splits a UTF-8 character; pure functions, no I/O.

use crate::mode::SandboxMode;

/// The escalation hint shown after a sandbox denial when a fresh approval may widen the mode.
pub const ESCALATION_HINT: &str = "[sandbox: escalation available \u{2014} retry this exact command once with sandbox_permissions (the narrowest wider mode that suffices) + justification; the approval prompt asks the user]";

/// What the sandbox blocked, as read from a contained run's stderr.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Denials {
    /// A file operation was refused.
    pub file: bool,
    /// A network operation was refused.
    pub network: bool,
}

const DENIED: [&str; 3] = [
    "Permission denied",
    "Operation not permitted",
    "Read-only file system",
];
const NETWORK_WORDS: [&str; 6] = [
    "socket",
    "connect",
    "/dev/tcp/",
    "/dev/udp/",
    "network",
    "Network",
];

/// Classifies the denial lines of a contained run's stderr: a line saying `Permission denied`,
/// `Operation not permitted` or `Read-only file system` is a network denial when it mentions a
/// socket, a connection or `/dev/tcp`, and a file denial otherwise.
pub fn denials(stderr: &str) -> Denials {
    let mut d = Denials::default();
    for line in stderr.lines() {
        if !DENIED.iter().any(|p| line.contains(p)) {
            continue;
        }
        if NETWORK_WORDS.iter().any(|w| line.contains(w)) {
            d.network = true;
        } else {
            d.file = true;
        }
    }
    d
}

/// The notes for a contained run's denials under `mode`.
pub fn denial_notes(d: Denials, mode: SandboxMode, escalation: bool) -> Vec<String> {
    let mut notes = Vec::new();
    if d.file {
        notes.push(format!("[sandbox: file access denied under {mode} mode]"));
    }
    if d.network {
        notes.push(format!(
            "[sandbox: network access denied under {mode} mode]"
        ));
    }
    if escalation && !notes.is_empty() {
        notes.push(ESCALATION_HINT.to_owned());
    }
    notes
}

/// `[exit code: N]` for a non-zero exit, `[killed by signal N (NAME)]` for a signal death.
pub fn exit_note(code: Option<i32>, signal: Option<i32>) -> Option<String> {
    match (code, signal) {
        (Some(0), _) => None,
        (Some(c), _) => Some(format!("[exit code: {c}]")),
        (None, Some(s)) => Some(format!("[killed by signal {s} ({})]", signal_name(s))),
        (None, None) => None,
    }
}

/// The usual name of a signal number.
pub fn signal_name(s: i32) -> &'static str {
    match s {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        libc::SIGSYS => "SIGSYS",
        _ => "signal",
    }
}

/// One stream as captured: its kept tail and how many bytes it produced in all.
#[derive(Clone, Copy, Debug)]
pub struct Stream<'a> {
    /// The last bytes produced (all of them when `total` equals their length).
    pub tail: &'a [u8],
    /// Every byte produced.
    pub total: u64,
}

/// What [`assemble`] produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Assembled {
    /// The text.
    pub text: String,
    /// Whether output was left out.
    pub truncated: bool,
}

/// Builds the text from both streams, the notes, and (when output is left out) where the full
/// output is. At most `cap` bytes of output are shown; when both streams do not fit, stderr gets
/// up to half of `cap` (more if stdout needs less) and stdout the rest, each as its tail.
pub fn assemble(
    stdout: Stream<'_>,
    stderr: Stream<'_>,
    notes: &[String],
    cap: usize,
    full_output: Option<&str>,
) -> Assembled {
    let total = stdout.total.saturating_add(stderr.total);
    let truncated = total > cap as u64;
    let (out_budget, err_budget) = if truncated {
        let err_len = usize::try_from(stderr.total).unwrap_or(usize::MAX);
        let out_len = usize::try_from(stdout.total).unwrap_or(usize::MAX);
        let err = err_len.min((cap / 2).max(cap.saturating_sub(out_len)));
        (cap - err, err)
    } else {
        (cap, cap)
    };
    let out_raw = tail_slice(stdout.tail, out_budget);
    let err_raw = tail_slice(stderr.tail, err_budget);
    let out = String::from_utf8_lossy(out_raw);
    let err = String::from_utf8_lossy(err_raw);
    let mut text = String::new();
    if truncated {
        let shown = out_raw.len() + err_raw.len();
        let place = full_output.unwrap_or("unavailable");
        text.push_str(&format!(
            "[output truncated: showing the last {shown} of {total} bytes; full output: {place}]\n"
        ));
    }
    text.push_str(&out);
    if !err.is_empty() || stderr.total > 0 {
        line_break(&mut text);
        text.push_str("[stderr]\n");
        text.push_str(&err);
    }
    for note in notes {
        line_break(&mut text);
        text.push_str(note);
    }
    if text.is_empty() {
        text.push_str("(no output)");
    }
    Assembled { text, truncated }
}

fn line_break(text: &mut String) {
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
}

/// The last `budget` bytes of `bytes`, starting on a character boundary (up to three leading
/// continuation bytes of a cut character are dropped).
pub fn tail_slice(bytes: &[u8], budget: usize) -> &[u8] {
    let start = bytes.len().saturating_sub(budget);
    let slice = &bytes[start..];
    if start == 0 {
        return slice;
    }
    let skip = slice
        .iter()
        .take(3)
        .take_while(|b| (**b & 0xC0) == 0x80)
        .count();
    &slice[skip..]
}

/// [`tail_slice`] as text (invalid UTF-8 replaced).
#[cfg(test)]
pub fn tail_text(bytes: &[u8], budget: usize) -> String {
    String::from_utf8_lossy(tail_slice(bytes, budget)).into_owned()
}
