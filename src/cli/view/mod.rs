//! `dsh view [LOG | WORKSPACE | --store URL]`: a local session viewer in the browser. An `axum`
//! server on 127.0.0.1 (a random port) serves the page embedded in the binary (`page/`, plain
//! HTML, CSS and JavaScript, no build step), two JSON endpoints and a live stream of a session's
//! events (Server-Sent Events), all under a random token that is part of every URL: a request
//! without it gets 403. The URL is printed on stdout and opened with the system browser unless
//! `--no-open` (or there is none). Ctrl-C stops it.

mod api;
mod assets;
mod stream;

use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use clap::Args;

use super::Exit;

/// `dsh view` options.
#[derive(Args, Debug)]
pub struct ViewArgs {
    /// A session log (`.jsonl`) or a workspace whose sessions to list (default: the current
    /// directory); with `--store`, the id of the session to open first.
    pub target: Option<PathBuf>,
    #[command(flatten)]
    pub store: super::store::StoreArg,
    /// Print the URL only; do not open a browser.
    #[arg(long)]
    pub no_open: bool,
    /// The port to listen on (default: any free port).
    #[arg(long, default_value_t = 0)]
    pub port: u16,
}

/// What the server shows and the token every request must carry.
pub(super) struct App {
    source: api::Source,
    token: String,
}

/// A random token: 16 bytes from the system's random source, in hex.
fn token() -> Result<String, Exit> {
    use std::io::Read;
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| Exit::internal(format!("cannot read /dev/urandom for a token: {e}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Whether `given` is the token, comparing every byte (no early exit on the first mismatch).
fn same_token(given: &str, token: &str) -> bool {
    given.len() == token.len()
        && given
            .bytes()
            .zip(token.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

/// Every request: `/<token>/<what>`; anything else is refused.
async fn handle(State(app): State<Arc<App>>, uri: Uri, headers: HeaderMap) -> Response {
    let path = uri.path();
    let Some((given, rest)) = path
        .strip_prefix('/')
        .map(|p| p.split_once('/').unwrap_or((p, "")))
    else {
        return forbidden();
    };
    if !same_token(given, &app.token) {
        return forbidden();
    }
    if rest.is_empty() && !path.ends_with('/') {
        // `/<token>`: the page's relative links need the trailing slash.
        return (
            StatusCode::MOVED_PERMANENTLY,
            [(header::LOCATION, format!("/{given}/"))],
        )
            .into_response();
    }
    if rest == "api/stream" {
        return stream::handle(app.clone(), uri.query().unwrap_or(""), &headers).await;
    }
    if let Some(api) = rest.strip_prefix("api/") {
        return api::handle(&app.source, api, uri.query().unwrap_or("")).await;
    }
    match assets::get(rest) {
        Some((mime, body)) => (
            [
                (header::CONTENT_TYPE, mime),
                (header::CACHE_CONTROL, "no-store"),
                // The page's own files only: nothing inline, nothing from elsewhere.
                (header::CONTENT_SECURITY_POLICY, "default-src 'self'"),
                (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            ],
            body,
        )
            .into_response(),
        None => (StatusCode::NOT_FOUND, "not found").into_response(),
    }
}

fn forbidden() -> Response {
    (
        StatusCode::FORBIDDEN,
        "forbidden: open the URL `dsh view` printed (it carries the token)",
    )
        .into_response()
}

/// `text` with every byte but letters, digits and `-._~` percent-encoded.
fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// Opens `url` with the system browser, if there is one; says so when there is not.
fn open_browser(url: &str) {
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    let headless = cfg!(target_os = "linux")
        && std::env::var_os("DISPLAY").is_none()
        && std::env::var_os("WAYLAND_DISPLAY").is_none();
    if headless {
        err_line!("dsh view: no display to open a browser on; open the URL above");
        return;
    }
    match std::process::Command::new(opener)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
    {
        // Reaped on a thread of its own: the opener may outlive this call.
        Ok(mut child) => {
            std::thread::spawn(move || child.wait());
        }
        Err(_) => err_line!("dsh view: no browser opener ({opener}); open the URL above"),
    }
}

/// Runs `dsh view`.
pub async fn view(args: ViewArgs) -> Result<i32, Exit> {
    let given: Vec<&std::path::Path> = args.target.iter().map(PathBuf::as_path).collect();
    let (source, first) = match &args.store.url_for_logs(&given)? {
        Some(url) => {
            // The session to open first, in the URL's fragment (the page reads it).
            let first = match &args.target {
                Some(id) => Some(format!("#{}", percent_encode(&super::store::id_of(id)?))),
                None => None,
            };
            (api::Source::from_store(url).await?, first)
        }
        None => (api::Source::from_target(args.target.as_ref())?, None),
    };
    let app = Arc::new(App {
        source,
        token: token()?,
    });
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", args.port))
        .await
        .map_err(|e| Exit::usage(format!("cannot listen on 127.0.0.1:{}: {e}", args.port)))?;
    let addr = listener
        .local_addr()
        .map_err(|e| Exit::internal(format!("cannot read the listening address: {e}")))?;
    let url = format!("http://{addr}/{}/{}", app.token, first.unwrap_or_default());
    super::out(&format!("dsh view: {url}"));
    super::out(&format!("showing {}; Ctrl-C stops", app.source.describe()));
    if !args.no_open {
        open_browser(&url);
    }
    let router = Router::new().fallback(handle).with_state(app);
    axum::serve(listener, router)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .map_err(|e| Exit::internal(format!("the viewer's server stopped: {e}")))?;
    Ok(0)
}
