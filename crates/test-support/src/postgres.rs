//! A throwaway PostgreSQL cluster for tests: `initdb` into a temporary directory, `postgres`
//! listening on loopback at a free port (and a Unix socket in that directory), `fsync=on`.
//!
//! The server binaries are found on `PATH`, else under `/usr/lib/postgresql/<version>/bin`
//! (Debian's `postgresql` package; the newest version wins). When none is found,
//! [`Cluster::start`] panics naming what is missing: a test that needs PostgreSQL fails, it
//! never skips.
//!
//! `initdb` and `postgres` refuse to run as root: when the tests run as root, both are run as
//! the unprivileged user `postgres` (Debian's package creates it), else `nobody`, through
//! `runuser -u USER --`, and the cluster's directory is handed to that user.
//!
//! The cluster is stopped (`pg_ctl stop -m immediate`) and its directory removed when the
//! [`Cluster`] is dropped, and also by a watchdog shell started beside it when the test process
//! is gone (a cluster kept in a `static` is never dropped).

use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A running throwaway cluster. Connect as user `dsh` (trust authentication) to
/// [`Cluster::url`].
pub struct Cluster {
    dir: tempfile::TempDir,
    bin: PathBuf,
    port: u16,
    user: Option<String>,
}

/// Where the PostgreSQL server binaries are: the directory holding `initdb`, `pg_ctl` and
/// `postgres`, or `None`.
pub fn find_binaries() -> Option<PathBuf> {
    let has_all = |dir: &Path| {
        ["initdb", "pg_ctl", "postgres"]
            .iter()
            .all(|b| dir.join(b).is_file())
    };
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            if has_all(&dir) {
                return Some(dir);
            }
        }
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .filter_map(|e| {
            let v: u32 = e.file_name().to_str()?.parse().ok()?;
            Some((v, e.path().join("bin")))
        })
        .filter(|(_, dir)| has_all(dir))
        .collect();
    versions.sort();
    versions.pop().map(|(_, dir)| dir)
}

fn running_as_root() -> bool {
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

fn unprivileged_user() -> String {
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let has = |name: &str| passwd.lines().any(|l| l.starts_with(&format!("{name}:")));
    if has("postgres") {
        "postgres".to_owned()
    } else {
        "nobody".to_owned()
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("PostgreSQL test cluster: no free loopback port: {e}"))
}

impl Cluster {
    /// Initializes and starts a cluster. Panics, naming what is missing or what failed, when
    /// PostgreSQL cannot be started.
    pub fn start() -> Cluster {
        let Some(bin) = find_binaries() else {
            panic!(
                "PostgreSQL server binaries (initdb, pg_ctl, postgres) not found on PATH nor under /usr/lib/postgresql/*/bin: install Debian's `postgresql` package (`apt-get install -y postgresql`)"
            );
        };
        let dir = tempfile::Builder::new()
            .prefix("dsh-pg-")
            .tempdir()
            .unwrap_or_else(|e| panic!("PostgreSQL test cluster: no temporary directory: {e}"));
        let user = running_as_root().then(unprivileged_user);
        if let Some(user) = &user {
            let chown = Command::new("chown")
                .arg("-R")
                .arg(user)
                .arg(dir.path())
                .status();
            assert!(
                chown.is_ok_and(|s| s.success()),
                "PostgreSQL test cluster: cannot hand {} to user {user}",
                dir.path().display()
            );
        }
        let cluster = Cluster {
            dir,
            bin,
            port: free_port(),
            user,
        };
        let data = cluster.data_dir();
        cluster.run(
            "initdb",
            &[
                "-D",
                &data.display().to_string(),
                "-U",
                "dsh",
                "--auth=trust",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ],
        );
        cluster.start_server();
        cluster.watch();
        cluster
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// A command running `program` of the cluster's binaries as the cluster's user.
    fn command(&self, program: &str) -> Command {
        let exe = self.bin.join(program);
        match &self.user {
            Some(user) => {
                let mut c = Command::new("runuser");
                c.arg("-u").arg(user).arg("--").arg(exe);
                c
            }
            None => Command::new(exe),
        }
    }

    fn run(&self, program: &str, args: &[&str]) {
        let out = self
            .command(program)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("PostgreSQL test cluster: cannot run {program}: {e}"));
        assert!(
            out.status.success(),
            "PostgreSQL test cluster: {program} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn start_server(&self) {
        let options = format!(
            "-c fsync=on -c synchronous_commit=on -c listen_addresses=127.0.0.1 -p {} -k {} -c max_connections=300",
            self.port,
            self.dir.path().display()
        );
        let data = self.data_dir().display().to_string();
        let log = self.dir.path().join("server.log").display().to_string();
        self.run(
            "pg_ctl",
            &[
                "-D", &data, "-l", &log, "-w", "-t", "60", "-o", &options, "start",
            ],
        );
    }

    /// A watchdog that stops the cluster and removes its directory once this process is gone.
    fn watch(&self) {
        let pg_ctl = self.bin.join("pg_ctl");
        let stop = match &self.user {
            Some(user) => format!(
                "runuser -u {user} -- {} -D {} stop -m immediate",
                pg_ctl.display(),
                self.data_dir().display()
            ),
            None => format!(
                "{} -D {} stop -m immediate",
                pg_ctl.display(),
                self.data_dir().display()
            ),
        };
        let script = format!(
            "while kill -0 {pid} 2>/dev/null; do sleep 1; done; {stop} >/dev/null 2>&1; rm -rf {dir}",
            pid = std::process::id(),
            dir = self.dir.path().display()
        );
        let _ = Command::new("sh")
            .arg("-c")
            .arg(script)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
    }

    /// The loopback port the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The directory of the server's Unix socket.
    pub fn socket_dir(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// A connection URL for `database` (`postgres` always exists), as user `dsh`.
    pub fn url_for(&self, database: &str) -> String {
        format!("postgres://dsh@127.0.0.1:{}/{database}", self.port)
    }

    /// The connection URL of the `postgres` database.
    pub fn url(&self) -> String {
        self.url_for("postgres")
    }

    /// Stops the server at once (as a crash would: `-m immediate`).
    pub fn stop_immediately(&self) {
        let data = self.data_dir().display().to_string();
        self.run("pg_ctl", &["-D", &data, "-m", "immediate", "stop"]);
    }

    /// Starts the server again after [`Cluster::stop_immediately`] (crash recovery runs).
    pub fn restart(&self) {
        self.start_server();
    }

    /// Makes `user` sign in with a password over TCP (`scram-sha-256`; every other user keeps
    /// trust authentication), and reloads the server's configuration. Create the role with its
    /// password first (`CREATE ROLE user LOGIN PASSWORD '...'`).
    pub fn require_password(&self, user: &str) {
        let hba = self.data_dir().join("pg_hba.conf");
        let old = std::fs::read_to_string(&hba)
            .unwrap_or_else(|e| panic!("PostgreSQL test cluster: {}: {e}", hba.display()));
        // The first matching line wins: this one goes before the trust lines.
        let line = format!("host all {user} 127.0.0.1/32 scram-sha-256\n");
        std::fs::write(&hba, format!("{line}{old}"))
            .unwrap_or_else(|e| panic!("PostgreSQL test cluster: {}: {e}", hba.display()));
        let data = self.data_dir().display().to_string();
        self.run("pg_ctl", &["-D", &data, "reload"]);
    }

    /// The server's log so far (for a failing test's message).
    pub fn server_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let data = self.data_dir().display().to_string();
        let _ = self
            .command("pg_ctl")
            .args(["-D", &data, "-m", "immediate", "stop"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}
