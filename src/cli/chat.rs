//! `dsh chat`: a conversation with a model in the terminal; each line a turn of one session, the
//! model's tool calls through the pipeline.
//!
//! Guarantees: each line typed is one turn, in order, of one session log (resumable with
//! `--resume`, checked by `dsh check`); a line is read only between turns, so a question the
//! pipeline asks during a turn reads its own answer; Ctrl-C during a turn cancels that turn (its
//! calls are answered, the log stays clean) and the chat goes on, a second Ctrl-C in the same
//! turn exits at once as `dsh run` does; Ctrl-C or Ctrl-D at the prompt, `/exit` or the end of
//! input ends the chat with the log closed. A turn that fails (a refused key, a server that
//! cannot be reached) is one sentence, and the next line is a new turn.

use std::path::PathBuf;
use std::sync::mpsc;

use clap::Args;
use dsh::scheduler::TurnEnd;
use rustyline::error::ReadlineError;

use super::Exit;
use super::agent::{ModelArgs, Started, end_code, start};

/// `dsh chat` options.
#[derive(Args, Debug)]
pub struct ChatArgs {
    #[command(flatten)]
    pub model: ModelArgs,
}

/// What the line reader hands back.
enum Line {
    /// A line (without its newline).
    Text(String),
    /// Ctrl-C at the prompt.
    Interrupted,
    /// Ctrl-D or the end of input.
    End,
}

/// The editor's helper: a line ending in `\` goes on to the next one (a multi-line prompt);
/// pasted text keeps its lines (bracketed paste).
struct Continues;

impl rustyline::completion::Completer for Continues {
    type Candidate = String;
}
impl rustyline::hint::Hinter for Continues {
    type Hint = String;
}
impl rustyline::highlight::Highlighter for Continues {}
impl rustyline::validate::Validator for Continues {
    fn validate(
        &self,
        ctx: &mut rustyline::validate::ValidationContext,
    ) -> rustyline::Result<rustyline::validate::ValidationResult> {
        Ok(if ctx.input().ends_with('\\') {
            rustyline::validate::ValidationResult::Incomplete
        } else {
            rustyline::validate::ValidationResult::Valid(None)
        })
    }
}
impl rustyline::Helper for Continues {}

/// A prompt as typed: each `\` that ended a line dropped, its newline kept.
fn joined(text: &str) -> String {
    text.replace("\\\n", "\n")
}

/// The line editor on a thread of its own (it is not `Send`): each request is a prompt, each
/// answer a line.
struct Reader {
    requests: mpsc::Sender<(String, tokio::sync::oneshot::Sender<Line>)>,
}

impl Reader {
    /// Starts the editor with the history in `history` (kept across chats).
    fn start(history: Option<PathBuf>) -> Result<Reader, Exit> {
        let mut editor = rustyline::Editor::<Continues, rustyline::history::DefaultHistory>::new()
            .map_err(|e| Exit::internal(format!("the line editor: {e}")))?;
        editor.set_helper(Some(Continues));
        if let Some(h) = &history {
            // A first chat has no history yet.
            let _ = editor.load_history(h);
        }
        let (requests, incoming) = mpsc::channel::<(String, tokio::sync::oneshot::Sender<Line>)>();
        std::thread::spawn(move || {
            for (prompt, answer) in incoming {
                // A question cancelled during the last turn left its read of the terminal under
                // way: the line typed next is that read's, so it is this prompt's line.
                if let Some(read) = super::approve::take_unclaimed() {
                    use std::io::Write;
                    let mut out = std::io::stdout();
                    let _ = out.write_all(prompt.as_bytes());
                    let _ = out.flush();
                    let line = match read.blocking_recv() {
                        Ok(Ok((n, text))) if n > 0 => {
                            Line::Text(joined(text.trim_end_matches(['\n', '\r'])))
                        }
                        _ => Line::End,
                    };
                    let _ = answer.send(line);
                    continue;
                }
                let line = match editor.readline(&prompt) {
                    Ok(text) => {
                        if !text.trim().is_empty() {
                            let _ = editor.add_history_entry(text.as_str());
                            if let Some(h) = &history {
                                if let Some(dir) = h.parent() {
                                    let _ = std::fs::create_dir_all(dir);
                                }
                                if let Err(e) = editor.save_history(h) {
                                    tracing::warn!("saving the chat history {}: {e}", h.display());
                                }
                            }
                        }
                        Line::Text(joined(&text))
                    }
                    Err(ReadlineError::Interrupted) => Line::Interrupted,
                    Err(ReadlineError::Eof) => Line::End,
                    Err(e) => {
                        err_line!("dsh: reading a line: {e}");
                        Line::End
                    }
                };
                let _ = answer.send(line);
            }
        });
        Ok(Reader { requests })
    }

    /// Reads one line.
    async fn line(&self, prompt: &str) -> Line {
        let (answer, line) = tokio::sync::oneshot::channel();
        if self.requests.send((prompt.to_owned(), answer)).is_err() {
            return Line::End;
        }
        line.await.unwrap_or(Line::End)
    }
}

/// Runs `dsh chat`.
pub async fn chat(args: ChatArgs) -> Result<i32, Exit> {
    if args.model.json {
        return Err(Exit::usage(
            "--json is for `dsh agent`: `dsh chat` is a conversation in the terminal",
        ));
    }
    let Started {
        prepared,
        agent,
        streaming,
        view,
    } = start(&args.model, false).await?;
    let history = dsh::jsonl::state_dir().map(|d| d.join("chat_history"));
    let reader = Reader::start(history)?;
    err_line!(
        "dsh chat: one line per turn; Ctrl-C cancels a turn; /exit, Ctrl-D or Ctrl-C at the \
         prompt ends (log: {})",
        prepared.log.display()
    );
    let mut code = 0;
    // The terminal as the chat found it: a signal that ends the chat at its prompt leaves the
    // line editor's raw mode behind, which is undone before exiting.
    let terminal = rustix::termios::tcgetattr(std::io::stdin()).ok();
    // Listening for the whole chat, so no signal is lost between turns: SIGTERM and SIGHUP end
    // the chat (at its prompt, or once the turn they cancelled has ended); SIGINT at the prompt
    // too when stdin is not a terminal (on one, Ctrl-C is a key the line editor reads).
    let mut stops = super::signals::Stops::install().ok();
    loop {
        let read = reader.line("> ");
        let line = match stops.as_mut() {
            Some(stops) => match stops.take_ending() {
                Some(name) => Err(name),
                None => tokio::select! {
                    line = read => Ok(line),
                    name = stops.next() => Err(name),
                },
            },
            None => Ok(read.await),
        };
        let text = match line {
            Ok(Line::Text(t)) => t,
            Ok(Line::Interrupted | Line::End) => break,
            Err(name) => {
                if let Some(saved) = &terminal {
                    let _ = rustix::termios::tcsetattr(
                        std::io::stdin(),
                        rustix::termios::OptionalActions::Now,
                        saved,
                    );
                }
                err_line!("\ndsh: {name}: ending the chat");
                code = 130;
                break;
            }
        };
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        if text == "/exit" || text == "/quit" {
            break;
        }
        let mut interrupts = super::run::on_interrupts({
            let agent = agent.clone();
            move || agent.cancel(dsh_agent::Cancel::user())
        })
        .await;
        let outcome = tokio::select! {
            outcome = agent.prompt(text) => outcome,
            Ok(()) = &mut interrupts.hard_stop => return Err(Exit { code: 130, message: None }),
        };
        drop(interrupts);
        let outcome = match outcome {
            Ok(Some(o)) => o,
            Ok(None) => continue,
            Err(e) => {
                code = 1;
                err_line!("dsh: the turn failed: {e}");
                break;
            }
        };
        if streaming {
            super::out("");
        } else if !outcome.text.is_empty() {
            super::out(&super::render::sanitize(&outcome.text));
        }
        match (&outcome.end, end_code(&outcome.end, &prepared.log)) {
            (TurnEnd::Aborted(_), _) => err_line!("dsh: turn {} cancelled", outcome.turn),
            (_, Err(e)) => {
                if let Some(m) = e.message {
                    err_line!("dsh: {}", super::render::sanitize(&m));
                }
            }
            _ => {}
        }
        if let Some(view) = &view {
            err_line!("{}", view.end_turn());
        }
        err_line!("{}", prepared.renderer.summary());
    }
    super::close_servers(&prepared.harness).await;
    if let Err(e) = prepared.harness.session().close().await {
        return Err(Exit::internal(format!(
            "closing {}: {e}",
            prepared.log.display()
        )));
    }
    err_line!("log: {}", prepared.log.display());
    Ok(code)
}
