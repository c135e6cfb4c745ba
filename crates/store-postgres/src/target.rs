//! Where a store connects, as its connection errors name it: each host and port the URL (or
//! `PGHOST`/`PGPORT`, or the local default) leads to, a Unix socket by the path of its socket
//! file (`/var/run/postgresql/.s.PGSQL.5432`, what a person can look for), and which of
//! several was tried last (its error is the one reported).

use tokio_postgres::Config;
use tokio_postgres::config::Host;

/// PostgreSQL's port when none is given.
const DEFAULT_PORT: u16 = 5432;

/// The places `config` connects to, as one phrase.
pub(crate) fn described(config: &Config) -> String {
    let ports = config.get_ports();
    // libpq's rule: one port for every host, or one per host.
    let port = |i: usize| {
        ports
            .get(i)
            .or_else(|| ports.first())
            .copied()
            .unwrap_or(DEFAULT_PORT)
    };
    let mut places: Vec<String> = config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, host)| match host {
            Host::Tcp(name) => format!("{name} port {}", port(i)),
            Host::Unix(dir) => format!(
                "the Unix socket {}",
                dir.join(format!(".s.PGSQL.{}", port(i))).display()
            ),
        })
        .collect();
    if places.is_empty() {
        places = config
            .get_hostaddrs()
            .iter()
            .enumerate()
            .map(|(i, addr)| format!("{addr} port {}", port(i)))
            .collect();
    }
    match places.as_slice() {
        [] => "no host".to_owned(),
        [one] => one.clone(),
        [first @ .., last] => format!(
            "{} and {last} (tried in this order; the error is the last one's)",
            first.join(", ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use std::str::FromStr as _;

    use super::*;

    fn of(url: &str) -> String {
        described(&Config::from_str(url).unwrap_or_else(|e| panic!("{url}: {e}")))
    }

    #[test]
    fn each_place_is_named_as_a_person_looks_for_it() {
        assert_eq!(of("postgres://u@db.example/x"), "db.example port 5432");
        assert_eq!(of("postgres://u@db:6543/x"), "db port 6543");
        assert_eq!(
            of("host=/var/run/postgresql dbname=x"),
            "the Unix socket /var/run/postgresql/.s.PGSQL.5432"
        );
        assert_eq!(
            of("postgres://u@a:1,b:2/x"),
            "a port 1 and b port 2 (tried in this order; the error is the last one's)"
        );
        assert_eq!(
            of("host=a,b,c port=7 dbname=x"),
            "a port 7, b port 7 and c port 7 (tried in this order; the error is the last one's)"
        );
        assert_eq!(of("hostaddr=127.0.0.1 dbname=x"), "127.0.0.1 port 5432");
    }
}
