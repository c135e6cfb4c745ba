//! What a store URL leaves out, filled in as libpq (`psql`) fills it in: `PGHOST`, `PGPORT`,
//! `PGUSER`, `PGPASSWORD` and `PGDATABASE` from the environment, and with no host at all the
//! local server's Unix socket (`/var/run/postgresql`, then `/tmp`). What the URL says always
//! wins; the user name otherwise defaults to the operating system's, as both clients do.
//!
//! So `postgres:///dsh` reaches a local server over its socket, as `psql postgres:///dsh`
//! does, instead of failing with "both host and hostaddr are missing".

use tokio_postgres::Config;

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
}

#[cfg(test)]
mod tests {
    use std::str::FromStr as _;

    use tokio_postgres::config::Host;

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
