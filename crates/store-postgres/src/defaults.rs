//! What a store URL leaves out, filled in as libpq (`psql`) fills it in: `PGHOST`, `PGPORT`,
//! `PGUSER`, `PGPASSWORD` and `PGDATABASE` from the environment, and with no host at all the
//! local server's Unix socket (`/var/run/postgresql`, then `/tmp`); with no password at all,
//! the password file (`PGPASSFILE` or `~/.pgpass`, see `pgpass.rs`). What the URL says always
//! wins; the user name otherwise defaults to the operating system's, as both clients do.
//!
//! So `postgres:///dsh` reaches a local server over its socket, as `psql postgres:///dsh`
//! does, instead of failing with "both host and hostaddr are missing".

use tokio_postgres::Config;
use tokio_postgres::config::Host;

/// Where libpq looks for a local server's socket when no host is given (Debian's directory
/// first, then the upstream default).
const SOCKET_DIRS: [&str; 2] = ["/var/run/postgresql", "/tmp"];

/// Fills what `config` leaves out from `env` (a lookup of the process's environment).
pub(crate) fn fill(config: &mut Config, env: impl Fn(&str) -> Option<String>) {
    let var = |name: &str| env(name).filter(|v| !v.is_empty());
    if config.get_hosts().is_empty() && config.get_hostaddrs().is_empty() {
        match var("PGHOST") {
            Some(hosts) => {
                for host in hosts.split(',').map(str::trim).filter(|h| !h.is_empty()) {
                    if host.starts_with('/') {
                        config.host_path(host);
                    } else {
                        config.host(host);
                    }
                }
            }
            None => {
                for dir in SOCKET_DIRS {
                    config.host_path(dir);
                }
            }
        }
    }
    if config.get_ports().is_empty()
        && let Some(port) = var("PGPORT").and_then(|p| p.trim().parse::<u16>().ok())
    {
        config.port(port);
    }
    if config.get_user().is_none()
        && let Some(user) = var("PGUSER")
    {
        config.user(user);
    }
    if config.get_password().is_none()
        && let Some(password) = var("PGPASSWORD")
    {
        config.password(password);
    }
    if config.get_dbname().is_none()
        && let Some(db) = var("PGDATABASE")
    {
        config.dbname(db);
    }
    if config.get_password().is_none()
        && let Some(password) = from_password_file(config, &var)
    {
        config.password(password);
    }
}

/// The password the password file holds for `config`'s first host, port, database and user.
fn from_password_file(config: &Config, env: &impl Fn(&str) -> Option<String>) -> Option<String> {
    let path = crate::pgpass::file(env)?;
    let text = read_private(&path)?;
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(name)) => name.clone(),
        // A socket in a default directory is `localhost` to the file, as to libpq.
        Some(Host::Unix(dir)) if SOCKET_DIRS.iter().any(|d| dir.as_os_str() == *d) => {
            "localhost".to_owned()
        }
        Some(Host::Unix(dir)) => dir.display().to_string(),
        None => config
            .get_hostaddrs()
            .first()
            .map_or_else(|| "localhost".to_owned(), ToString::to_string),
    };
    let port = config
        .get_ports()
        .first()
        .copied()
        .unwrap_or(5432)
        .to_string();
    let user = config
        .get_user()
        .map(str::to_owned)
        .or_else(|| env("USER"))
        .or_else(|| env("LOGNAME"))?;
    let database = config.get_dbname().unwrap_or(&user).to_owned();
    crate::pgpass::lookup(
        &text,
        &crate::pgpass::Wanted {
            host: &host,
            port: &port,
            database: &database,
            user: &user,
        },
    )
}

/// The text of the password file at `path`, unless it is missing, unreadable, or may be read
/// or written by others than its owner (then it is not read, as libpq does not read it).
fn read_private(path: &std::path::Path) -> Option<String> {
    let meta = std::fs::metadata(path).ok()?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        if !crate::pgpass::private(meta.permissions().mode()) {
            tracing::warn!(
                file = %path.display(),
                "the password file is not read: others may read or write it (permissions should be u=rw, 0600, or less)"
            );
            return None;
        }
    }
    if !meta.is_file() {
        return None;
    }
    std::fs::read_to_string(path).ok()
}

#[cfg(test)]
mod tests {
    use std::str::FromStr as _;

    use super::*;

    fn filled(url: &str, vars: &[(&str, &str)]) -> Config {
        let mut config = Config::from_str(url).unwrap_or_else(|e| panic!("{url}: {e}"));
        fill(&mut config, |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        });
        config
    }

    #[test]
    fn no_host_means_the_local_socket_or_pghost() {
        let c = filled("postgres:///dsh", &[]);
        let dirs: Vec<_> = c
            .get_hosts()
            .iter()
            .map(|h| match h {
                Host::Unix(p) => p.display().to_string(),
                Host::Tcp(t) => t.clone(),
            })
            .collect();
        assert_eq!(dirs, ["/var/run/postgresql", "/tmp"]);
        let c = filled(
            "postgres:///dsh",
            &[("PGHOST", "/run/pg,db.example"), ("PGPORT", "6543")],
        );
        assert!(matches!(&c.get_hosts()[0], Host::Unix(p) if p.as_os_str() == "/run/pg"));
        assert!(matches!(&c.get_hosts()[1], Host::Tcp(h) if h == "db.example"));
        assert_eq!(c.get_ports(), [6543]);
    }

    #[test]
    fn what_the_url_says_wins_over_the_environment() {
        let vars = [
            ("PGHOST", "elsewhere"),
            ("PGPORT", "1"),
            ("PGUSER", "env-user"),
            ("PGPASSWORD", "env-pw"),
            ("PGDATABASE", "env-db"),
        ];
        let c = filled("postgres://u:pw@db:5433/mine", &vars);
        assert!(matches!(c.get_hosts(), [Host::Tcp(h)] if h == "db"));
        assert_eq!(c.get_ports(), [5433]);
        assert_eq!(c.get_user(), Some("u"));
        assert_eq!(c.get_password(), Some(&b"pw"[..]));
        assert_eq!(c.get_dbname(), Some("mine"));
        let c = filled("postgres:///", &vars);
        assert!(matches!(c.get_hosts(), [Host::Tcp(h)] if h == "elsewhere"));
        assert_eq!(c.get_ports(), [1]);
        assert_eq!(c.get_user(), Some("env-user"));
        assert_eq!(c.get_password(), Some(&b"env-pw"[..]));
        assert_eq!(c.get_dbname(), Some("env-db"));
    }

    #[test]
    fn an_empty_variable_is_as_if_unset() {
        let c = filled("postgres:///dsh", &[("PGHOST", ""), ("PGUSER", "")]);
        assert_eq!(c.get_hosts().len(), 2);
        assert_eq!(c.get_user(), None);
    }
}
