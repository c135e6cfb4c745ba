//! Sessions in PostgreSQL from the command line: `--store URL` (or `DSH_STORE`) for `run`,
//! `agent`, `chat`, `check`, `transcript`, `repair`, `sessions` and `view`, and `dsh export`,
//! `dsh import`, `dsh tail`.
//!
//! With a store, a session is named by its id (`--session ID`: created when absent, resumed and
//! repaired when present, as a file is); a second process writing a session whose lease a live
//! process holds is refused in one sentence (exit 1).

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use dsh::session::{OpenOptions, RepairReport, Session};
use dsh_store_postgres::{PgStore, StoreError};

use super::{Exit, Format};

/// `--store`: where sessions are kept instead of files.
#[derive(Args, Debug, Clone, Default)]
pub struct StoreArg {
    /// Keep sessions in PostgreSQL (`postgres://user@host:port/db`) instead of files; session
    /// names are then ids in the store. Default: `DSH_STORE` when it is set and not empty.
    /// What the URL leaves out comes from PGHOST, PGPORT, PGUSER, PGPASSWORD and PGDATABASE,
    /// as psql takes it (`postgres:///db`: the local server's socket).
    #[arg(long, value_name = "URL")]
    store: Option<String>,
}

/// The variable that names a store when `--store` is not given.
const STORE_VAR: &str = "DSH_STORE";

impl StoreArg {
    /// The store's URL: `--store`, else `DSH_STORE`; `None` (sessions are files) when neither
    /// is given or `DSH_STORE` is empty, as an unset variable is. An empty `--store` is a
    /// usage error: it was given on purpose, and cannot name a store.
    pub fn url(&self) -> Result<Option<String>, Exit> {
        match &self.store {
            Some(url) if url.trim().is_empty() => Err(Exit::usage(
                "--store: the URL is empty (give postgres://user@host:port/db, or leave --store \
                 out to keep sessions in files)",
            )),
            Some(url) => Ok(Some(url.clone())),
            None => match std::env::var(STORE_VAR) {
                Ok(url) if url.trim().is_empty() => Ok(None),
                Ok(url) => Ok(Some(url)),
                Err(std::env::VarError::NotPresent) => Ok(None),
                Err(std::env::VarError::NotUnicode(_)) => Err(Exit::usage(format!(
                    "{STORE_VAR} is not valid UTF-8: it should be a URL such as \
                     postgres://user@host:port/db"
                ))),
            },
        }
    }
}

impl StoreArg {
    /// [`StoreArg::url`] for a reader given `logs`: with the store named by `DSH_STORE` (not
    /// `--store`), logs that are all existing files are read as those files, so a file log
    /// (a demo's, a copy) can be checked, read and repaired by its path while the variable is
    /// set. `--store` always means the store.
    pub fn url_for_logs(&self, logs: &[&Path]) -> Result<Option<String>, Exit> {
        let url = self.url()?;
        if self.store.is_none() && !logs.is_empty() && logs.iter().all(|l| l.is_file()) {
            return Ok(None);
        }
        Ok(url)
    }

    /// Whether the store was named by `DSH_STORE` rather than `--store` (then an operand that
    /// is an existing file is read as that file).
    pub fn named_by_environment(&self) -> bool {
        self.store.is_none()
    }
}

pub use super::store_url::shown;

/// A session id given where a file name may be (`--session`, `dsh check`'s and `dsh view`'s
/// operands), as the store's text: one that is not UTF-8 is refused rather than changed.
pub fn id_of(given: &Path) -> Result<String, Exit> {
    let id = given.to_str().ok_or_else(|| {
        Exit::usage(format!(
            "session id {:?} is not valid UTF-8: a session id in a store is text",
            given.to_string_lossy()
        ))
    })?;
    checked(id).map(str::to_owned)
}

/// `id` when it can name a stored session; otherwise a usage error saying why, before the
/// database is asked (an id with a control character would drive the terminal when echoed).
pub fn checked(id: &str) -> Result<&str, Exit> {
    dsh_store_postgres::check_id(id).map_err(|e| Exit::usage(e.to_string()))?;
    Ok(id)
}

/// How a stored session is named in messages: `ID in URL`.
pub fn place(url: &str, id: &str) -> PathBuf {
    PathBuf::from(format!("{id} in {}", shown(url)))
}

fn failed(url: &str, e: StoreError) -> Exit {
    match e {
        StoreError::Url(_) | StoreError::UrlShape(_) => {
            Exit::usage(format!("--store {}: {e}", shown(url)))
        }
        StoreError::NoSuchSession(_) | StoreError::Exists(_) | StoreError::BadId { .. } => {
            Exit::usage(e.to_string())
        }
        other => Exit::internal(format!("{}: {other}", shown(url))),
    }
}

/// Connects to the store (its schema brought up to date).
pub async fn connect(url: &str) -> Result<PgStore, Exit> {
    PgStore::connect(url).await.map_err(|e| failed(url, e))
}

/// Opens session `id` for writing: created when absent, otherwise taken over and repaired.
/// A lease held by a process that just died is waited for briefly (its backend goes a moment
/// after it); a lease held by a live process is refused. Returns whether it was created.
pub async fn open(
    store: &PgStore,
    url: &str,
    id: &str,
    cwd: &Path,
) -> Result<(Session, RepairReport, bool), Exit> {
    let cwd = cwd.display().to_string();
    let opened = with_lease(url, || store.open(id, &cwd, OpenOptions::new())).await?;
    Ok((opened.session, opened.repair, opened.created))
}

/// A run refused before anything ran: closes the session it created (releasing its lease)
/// and deletes it, as the log file it created is deleted then.
pub async fn discard_created(store: &PgStore, id: &str, session: &Session) {
    let _ = session.close().await;
    if let Err(e) = store.delete(id).await {
        tracing::warn!(session = %id, error = %e, "could not delete the refused run's empty session");
    }
}

/// Runs an open, retrying for 2 s while the lease is held: a process killed a moment ago keeps
/// its backend (and so its lease) until the server notices its connection is gone.
async fn with_lease<F, Fut>(url: &str, mut open: F) -> Result<dsh_store_postgres::Opened, Exit>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<dsh_store_postgres::Opened, StoreError>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
    loop {
        match open().await {
            Ok(opened) => return Ok(opened),
            Err(StoreError::Leased { .. }) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => return Err(failed(url, e)),
        }
    }
}

/// The store's sessions of `workspace` (a canonical path: those whose header's `cwd` it is,
/// as a run in it writes), most recently written first.
async fn of_workspace(
    store: &PgStore,
    url: &str,
    workspace: &Path,
) -> Result<Vec<dsh_store_postgres::SessionInfo>, Exit> {
    let cwd = workspace.display().to_string();
    let mut sessions = store.sessions().await.map_err(|e| failed(url, e))?;
    sessions.retain(|s| s.cwd.as_deref() == Some(cwd.as_str()));
    Ok(sessions)
}

/// The most recently written session of `workspace` (a canonical path) in the store
/// (`--resume` with no id).
#[cfg(feature = "agent")]
pub async fn most_recent(store: &PgStore, url: &str, workspace: &Path) -> Result<String, Exit> {
    of_workspace(store, url, workspace)
        .await?
        .into_iter()
        .next()
        .map(|s| s.id)
        .ok_or_else(|| {
            Exit::usage(format!(
                "--resume: {} has no session yet in {} (`dsh sessions --store URL --all` lists \
                 every workspace's)",
                workspace.display(),
                shown(url)
            ))
        })
}

/// `--resume ID` with a store: `id` must name a session there (a new one is never started in
/// its place, as with files: a mistyped id would drop the conversation it meant).
#[cfg(feature = "agent")]
pub async fn resumable(url: &str, id: &str) -> Result<(), Exit> {
    checked(id)?;
    let store = connect(url).await?;
    match store.is_leased(id).await {
        Ok(_) => Ok(()),
        Err(StoreError::NoSuchSession(_)) => Err(Exit::usage(format!(
            "--resume {}: no such session in {} (`dsh sessions --store URL --all` lists them)",
            super::sessions::one_line(id),
            shown(url)
        ))),
        Err(e) => Err(failed(url, e)),
    }
}

/// `dsh check --store URL ID...`.
pub async fn check(url: &str, ids: &[PathBuf]) -> Result<i32, Exit> {
    let ids = ids
        .iter()
        .map(|id| id_of(id))
        .collect::<Result<Vec<_>, _>>()?;
    let store = connect(url).await?;
    let mut clean = true;
    for id in ids {
        let status = async {
            store.verify(&id).await?;
            let bytes = store.export(&id).await?;
            let live = store.is_leased(&id).await?;
            let names = super::logs::LineNames::of_session(&bytes);
            let check = dsh::session::FileCheck {
                problems: dsh::session::check_bytes(&bytes),
                live,
            };
            Ok::<_, StoreError>((check, names))
        }
        .await
        .map_err(|e| e.to_string());
        let (status, names) = match status {
            Ok((check, names)) => (Ok(check), names),
            Err(e) => (Err(e), super::logs::LineNames::Numbers),
        };
        let repair = format!("dsh repair --store URL {id}");
        clean &= super::logs::report_check(&id, status, &repair, "holds its lease", &names);
    }
    Ok(if clean { 0 } else { 1 })
}

/// `dsh transcript --store URL ID`.
pub async fn transcript(url: &str, id: &str, format: Format) -> Result<i32, Exit> {
    let store = connect(url).await?;
    // A row that is not an event is named by its session and seq, as `dsh check` names it.
    store.verify(id).await.map_err(|e| failed(url, e))?;
    let bytes = store.export(id).await.map_err(|e| failed(url, e))?;
    let names = super::logs::LineNames::of_session(&bytes);
    let live = store.is_leased(id).await.map_err(|e| failed(url, e))?;
    let writer = super::logs::Writer {
        live: live.then_some("holds its lease"),
        repair: format!("dsh repair --store URL {id}"),
    };
    super::logs::transcript_bytes(id, &bytes, format, &names, &writer)
}

/// `dsh repair --store URL ID`: takes the lease, repairs, releases.
pub async fn repair(url: &str, id: &str) -> Result<i32, Exit> {
    let store = connect(url).await?;
    let opened = with_lease(url, || store.resume(id, OpenOptions::new().strict(false))).await?;
    opened
        .session
        .close()
        .await
        .map_err(|e| Exit::internal(format!("{id}: {e}")))?;
    if opened.repair.is_clean() {
        super::out(&format!("{id}: nothing to repair"));
    } else {
        super::logs::print_repair(id, &opened.repair);
    }
    Ok(0)
}

/// `dsh sessions --store URL`: the sessions of `workspace` (a canonical path), or with `all`
/// every session of the store (each with its workspace), one per line starting with its id,
/// most recent first.
pub async fn sessions(url: &str, workspace: &Path, all: bool) -> Result<i32, Exit> {
    let store = connect(url).await?;
    let listed = if all {
        store.sessions().await.map_err(|e| failed(url, e))?
    } else {
        of_workspace(&store, url, workspace).await?
    };
    for s in listed {
        let when = httpdate::fmt_http_date(s.updated_at);
        let live = if s.leased { "  (being written)" } else { "" };
        let place = match (all, &s.cwd) {
            (true, Some(cwd)) => format!("  {}", super::sessions::one_line(cwd)),
            (true, None) => "  (no workspace)".to_owned(),
            (false, _) => String::new(),
        };
        super::out(&format!(
            "{}  {when}  {:>6} events{live}{place}",
            super::sessions::one_line(&s.id),
            s.lines
        ));
    }
    Ok(0)
}

/// `dsh export`, `dsh import` and `dsh tail` options.
#[derive(Args, Debug)]
pub struct ExportArgs {
    /// The session id.
    pub id: String,
    #[command(flatten)]
    pub store: StoreArg,
}

/// `dsh import` options.
#[derive(Args, Debug)]
pub struct ImportArgs {
    /// The JSON Lines log to load.
    pub file: PathBuf,
    /// The session id in the store (default: the log header's id).
    #[arg(long)]
    pub id: Option<String>,
    #[command(flatten)]
    pub store: StoreArg,
}

/// `dsh tail` options.
#[derive(Args, Debug)]
pub struct TailArgs {
    /// The session id.
    pub id: String,
    /// The first seq to print.
    #[arg(long, default_value_t = 0)]
    pub from: u64,
    #[command(flatten)]
    pub store: StoreArg,
}

fn required(arg: &StoreArg, command: &str) -> Result<String, Exit> {
    arg.url()?.ok_or_else(|| {
        Exit::usage(format!(
            "dsh {command} needs a store: --store postgres://... (or DSH_STORE)"
        ))
    })
}

/// `dsh export --store URL ID`: the session's JSON Lines on stdout.
pub async fn export(args: ExportArgs) -> Result<i32, Exit> {
    use std::io::Write as _;
    let url = required(&args.store, "export")?;
    checked(&args.id)?;
    let store = connect(&url).await?;
    let bytes = store.export(&args.id).await.map_err(|e| failed(&url, e))?;
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(&bytes)
        .and_then(|()| stdout.flush())
        .map_err(|e| Exit::internal(format!("cannot write the export: {e}")))?;
    // The rows are exported as stored, damaged or not (what is there is what a person needs
    // to mend it); a damaged session is said, and fails the command.
    match store.verify(&args.id).await {
        Ok(()) => {
            // A session being written goes on after its export: say so, or the file would
            // pass for the whole session.
            if store
                .is_leased(&args.id)
                .await
                .map_err(|e| failed(&url, e))?
            {
                err_line!(
                    "dsh: note: {} is still being written (a running dsh holds its lease): this export holds its events as of now, and its calls in flight have no result yet",
                    super::sessions::one_line(&args.id)
                );
            }
            Ok(0)
        }
        Err(e @ (StoreError::BadRow { .. } | StoreError::Session { .. })) => {
            Err(Exit::internal(format!(
                "{e}; the rows were exported as they are stored, and are not a log that reads \
                 back (`dsh check --store URL {}` checks the session)",
                super::sessions::one_line(&args.id)
            )))
        }
        Err(other) => Err(failed(&url, other)),
    }
}

/// `dsh import --store URL FILE`: loads a log as a new session and prints its id.
pub async fn import(args: ImportArgs) -> Result<i32, Exit> {
    let url = required(&args.store, "import")?;
    let bytes = std::fs::read(&args.file)
        .map_err(|e| Exit::usage(format!("cannot read {}: {e}", args.file.display())))?;
    // A failure that is not the file's (the connection, the role's rights) still names the
    // file and the session it was to be.
    let named = args.id.clone().or_else(|| {
        let first = bytes.split(|&b| b == b'\n').next()?;
        let header = dsh::session::Header::from_json_line(std::str::from_utf8(first).ok()?);
        header.ok().map(|h| h.id().to_owned())
    });
    let importing = |exit: Exit| Exit {
        code: exit.code,
        message: exit.message.map(|m| match &named {
            Some(id) => format!(
                "importing {} as session {}: {m}",
                args.file.display(),
                super::render::sanitize(id)
            ),
            None => format!("importing {}: {m}", args.file.display()),
        }),
    };
    let store = connect(&url).await.map_err(importing)?;
    let done = store
        .import_as(&bytes, args.id.as_deref())
        .await
        .map_err(|e| match e {
            StoreError::Session { ref source, .. } => {
                let hint = torn_tail_hint(&bytes, source.line(), &args.file);
                Exit::usage(format!("{}: {e}{hint}", args.file.display()))
            }
            other => importing(failed(&url, other)),
        })?;
    super::out(&format!(
        "{}  {} events imported",
        super::render::sanitize(&done.id),
        done.lines
    ));
    Ok(0)
}

/// What to do about a log refused at `line` when that is its last line and it has no newline
/// (empty otherwise): a crash mid-write left it torn, which `dsh repair FILE` cuts; a whole
/// line that only lacks its newline, `dsh repair FILE` ends.
fn torn_tail_hint(bytes: &[u8], line: Option<usize>, file: &Path) -> String {
    let Some(last) = bytes.split(|&b| b == b'\n').next_back() else {
        return String::new();
    };
    let lines = bytes.split(|&b| b == b'\n').count();
    if last.is_empty() || line != Some(lines) {
        return String::new();
    }
    let whole = serde_json::from_slice::<serde::de::IgnoredAny>(last).is_ok();
    let what = if whole {
        "ends it with its newline"
    } else {
        "cuts a torn tail (the unfinished last line a crash mid-write leaves)"
    };
    format!(
        "; `dsh repair {}` {what}, then import again",
        file.display()
    )
}

/// `dsh tail --store URL ID`: prints the session's lines as they are committed, until its
/// writer is gone. Every line is printed as stored; a row that is not an event, or not at the
/// seq the one before it leads to, is also named on stderr (session and seq, as `dsh check`
/// names it), and the tail then exits 1. So does a writer gone without closing the session.
pub async fn tail(args: TailArgs) -> Result<i32, Exit> {
    let url = required(&args.store, "tail")?;
    let id = checked(&args.id)?;
    let store = connect(&url).await?;
    let mut lines = store
        .tail(id, args.from)
        .await
        .map_err(|e| failed(&url, e))?;
    let mut rows = RowCheck::new(id, args.from);
    while let Some(line) = lines.recv().await {
        let line = match line {
            Ok(line) => line,
            Err(e @ StoreError::Abandoned { .. }) => {
                err_line!(
                    "dsh: {}; `dsh check --store URL {id}` says what it left open",
                    super::render::sanitize(&e.to_string())
                );
                return Ok(1);
            }
            Err(e) => return Err(failed(&url, e)),
        };
        super::out(&line.line);
        if super::stdout_failed() {
            // Nobody reads what follows (a closed pipe, a full disk): main says which.
            return Ok(0);
        }
        if let Some(bad) = rows.next(&line) {
            err_line!("dsh: {}", super::render::sanitize(&bad.to_string()));
        }
    }
    if rows.bad > 0 {
        return Ok(1);
    }
    // The writer is gone: what `dsh check` would find in the whole session (rows missing at
    // its end, a row of two lines, calls left unanswered by an import) is said too.
    Ok(if left_clean(&store, &url, id).await? {
        0
    } else {
        1
    })
}

/// Whether stored session `id` checks clean, saying on stderr, as `dsh check` says it, what
/// does not.
async fn left_clean(store: &PgStore, url: &str, id: &str) -> Result<bool, Exit> {
    if let Err(e) = store.verify(id).await {
        return match e {
            StoreError::BadRow { .. } => {
                err_line!("dsh: {}", super::render::sanitize(&e.to_string()));
                Ok(false)
            }
            other => Err(failed(url, other)),
        };
    }
    let bytes = store.export(id).await.map_err(|e| failed(url, e))?;
    let problems = dsh::session::check_bytes(&bytes);
    let names = super::logs::LineNames::of_session(&bytes);
    for p in &problems {
        err_line!(
            "dsh: {id}{}: {}",
            names.after_label(p.line),
            super::render::sanitize(&p.message)
        );
    }
    if problems.iter().any(|p| p.in_flight) {
        err_line!("dsh: {id}: `dsh repair --store URL {id}` answers the calls left unanswered");
    }
    Ok(problems.is_empty())
}

/// Checks a tail's rows one by one as `dsh check` checks them: each an event, at the seq the
/// one before it leads to.
struct RowCheck<'a> {
    id: &'a str,
    /// The seq the next row should have (`None`: unknown, after a row that is not an event).
    expected: Option<u64>,
    /// How many rows were bad.
    bad: usize,
}

impl<'a> RowCheck<'a> {
    fn new(id: &'a str, from: u64) -> RowCheck<'a> {
        RowCheck {
            id,
            // From a later seq, the first row may lie past it (a run of chunks spans seqs).
            expected: (from == 0).then_some(0),
            bad: 0,
        }
    }

    /// What is wrong with `line`, if anything.
    fn next(&mut self, line: &dsh_store_postgres::TailLine) -> Option<StoreError> {
        let problem = match dsh::session::Event::from_json_line(&line.line) {
            Err(e) => {
                self.expected = None;
                Some(e.to_string())
            }
            Ok(event) => {
                let gap = self.expected.filter(|&want| want != line.seq).map(|want| {
                    format!("the row's seq should be {want} (rows must follow without gap)")
                });
                self.expected = Some(line.seq + event.seq_span());
                gap
            }
        };
        problem.map(|message| {
            self.bad += 1;
            StoreError::BadRow {
                session: self.id.to_owned(),
                seq: Some(line.seq),
                message,
            }
        })
    }
}
