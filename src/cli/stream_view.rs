//! The model's stream at a terminal (`dsh agent`, `dsh chat`): its text as it comes; its
//! reasoning dimmed and folded into one line (the first words and how long it was, all of it
//! kept in the log); after each turn a status line with the turn's and the session's tokens
//! and, when prices are configured, what they cost.
//!
//! Guarantees: nothing from the model reaches the terminal unsanitized; without colour
//! (`NO_COLOR`, `TERM=dumb`) the same lines are written without escape sequences; the token
//! counts are the provider's own usage reports, summed.

use std::io::Write;
use std::sync::Arc;

use dsh_agent::{Agent, AgentHooks};
use dsh_model::{Chunk, Usage};
use parking_lot::Mutex;

use super::render::sanitize;

/// What a model's tokens cost, in US dollars per million tokens.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Prices {
    /// Input tokens not read from the cache.
    pub input: f64,
    /// Output tokens (reasoning included).
    pub output: f64,
    /// Input tokens read from the cache (the input price when not given).
    pub cached_input: Option<f64>,
}

impl Prices {
    fn cost(&self, u: &Usage) -> f64 {
        let m = 1_000_000.0;
        (u.input_tokens as f64 * self.input
            + u.cache_read_tokens as f64 * self.cached_input.unwrap_or(self.input)
            + u.output_tokens as f64 * self.output)
            / m
    }
}

/// How many characters of a folded reasoning block are shown.
const FOLDED_CHARS: usize = 72;

#[derive(Default)]
struct State {
    /// The reasoning block streaming now: its index, its first characters and its length.
    reasoning: Option<(usize, String, usize)>,
    turn: Usage,
    session: Usage,
}

/// The view; cheap to clone (one shared state).
#[derive(Clone)]
pub struct StreamView {
    state: Arc<Mutex<State>>,
    colour: bool,
    prices: Option<Prices>,
}

fn add(to: &mut Usage, u: &Usage) {
    to.input_tokens += u.input_tokens;
    to.output_tokens += u.output_tokens;
    to.cache_read_tokens += u.cache_read_tokens;
    to.cache_write_tokens += u.cache_write_tokens;
    to.reasoning_tokens += u.reasoning_tokens;
}

/// `1234567` as `1,234,567`.
fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

impl StreamView {
    /// A view for this terminal (colour unless `NO_COLOR` or `TERM=dumb`).
    pub fn new(prices: Option<Prices>) -> StreamView {
        let colour = std::env::var_os("NO_COLOR").is_none()
            && std::env::var("TERM").map_or(true, |t| t != "dumb");
        StreamView {
            state: Arc::default(),
            colour,
            prices,
        }
    }

    fn dim(&self, text: &str) -> String {
        if self.colour {
            format!("\x1b[2m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }

    /// The folded line of a reasoning block that has ended.
    fn folded(&self, head: &str, chars: usize) -> String {
        let head: String = head
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .chars()
            .take(FOLDED_CHARS)
            .collect();
        let more = if chars > head.chars().count() {
            "…"
        } else {
            ""
        };
        self.dim(&format!(
            "⋯ thought: {}{more} ({} characters, folded; all of it is in the log)",
            sanitize(&head),
            grouped(chars as u64)
        ))
    }

    /// Ends the reasoning block streaming now, if any, with its folded line.
    fn fold(&self, state: &mut State, out: &mut impl Write) {
        if let Some((_, head, chars)) = state.reasoning.take() {
            let clear = if self.colour { "\r\x1b[2K" } else { "\n" };
            let _ = writeln!(out, "{clear}{}", self.folded(&head, chars));
        }
    }

    /// The status line of the turn that just ended (and starts the next turn's count).
    pub fn end_turn(&self) -> String {
        let mut state = self.state.lock();
        let mut out = std::io::stdout().lock();
        self.fold(&mut state, &mut out);
        let _ = out.flush();
        let turn = std::mem::take(&mut state.turn);
        let mut line = format!(
            "tokens: {} in",
            grouped(turn.input_tokens + turn.cache_read_tokens)
        );
        if turn.cache_read_tokens > 0 {
            line.push_str(&format!(" ({} cached)", grouped(turn.cache_read_tokens)));
        }
        line.push_str(&format!(" · {} out", grouped(turn.output_tokens)));
        if turn.reasoning_tokens > 0 {
            line.push_str(&format!(" ({} reasoning)", grouped(turn.reasoning_tokens)));
        }
        let session = state.session;
        line.push_str(&format!(
            " · session {}",
            grouped(session.input_tokens + session.cache_read_tokens + session.output_tokens)
        ));
        if let Some(p) = &self.prices {
            line.push_str(&format!(
                " · ${:.4} (session ${:.4})",
                p.cost(&turn),
                p.cost(&session)
            ));
        }
        self.dim(&line)
    }
}

impl AgentHooks for StreamView {
    fn on_chunk(&self, _agent: &Agent, _turn: u32, _step: u32, chunk: &Chunk) {
        let mut state = self.state.lock();
        let mut out = std::io::stdout().lock();
        match chunk {
            Chunk::ReasoningDelta { index, text } => {
                let fresh = !matches!(&state.reasoning, Some((i, _, _)) if i == index);
                if fresh {
                    self.fold(&mut state, &mut out);
                    let _ = write!(out, "{}", self.dim("⋯ thinking"));
                    state.reasoning = Some((*index, String::new(), 0));
                }
                if let Some((_, head, chars)) = &mut state.reasoning {
                    if head.chars().count() < FOLDED_CHARS * 2 {
                        head.push_str(text);
                    }
                    *chars += text.chars().count();
                }
            }
            Chunk::BlockEnd { index } => {
                if matches!(&state.reasoning, Some((i, _, _)) if i == index) {
                    self.fold(&mut state, &mut out);
                }
            }
            Chunk::TextDelta { text, .. } => {
                self.fold(&mut state, &mut out);
                let _ = out.write_all(sanitize(text).as_bytes());
            }
            Chunk::ToolCallDelta { .. } | Chunk::Finish(_) => self.fold(&mut state, &mut out),
            Chunk::Usage(u) => {
                add(&mut state.turn, u);
                add(&mut state.session, u);
            }
            _ => {}
        }
        let _ = out.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_grouped_and_costs_use_the_cached_price_for_cached_input() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1_234_567), "1,234,567");
        let p = Prices {
            input: 1.0,
            output: 2.0,
            cached_input: Some(0.5),
        };
        let u = Usage {
            input_tokens: 1_000_000,
            output_tokens: 500_000,
            cache_read_tokens: 2_000_000,
            ..Usage::default()
        };
        assert!((p.cost(&u) - 3.0).abs() < 1e-9);
    }

    #[test]
    fn a_folded_block_shows_its_first_words_and_its_length_without_colour() {
        let view = StreamView {
            state: Arc::default(),
            colour: false,
            prices: None,
        };
        let long = "word ".repeat(40);
        let line = view.folded(&long, long.chars().count());
        assert!(line.starts_with("⋯ thought: word word"), "{line}");
        assert!(line.contains("… (200 characters, folded"), "{line}");
        assert!(!line.contains('\x1b'));
        let short = view.folded("a\u{1b}[2Jb", 5);
        assert!(!short.contains('\x1b') && !short.contains('…'), "{short:?}");
    }
}
