//! What a store user is told: a connection that fails says why (the server's own reason, or the
//! network's), never the password; an empty `DSH_STORE` is no store at all, an empty `--store`
//! a usage error; a session id with a control character is refused; a torn log is imported
//! once `dsh repair` cut its tail. The tests that need a server use the cluster `store_cli.rs`
//! starts.

use serde_json::json;

use super::store_cli::{cluster, echo_script, fresh_db, sql, store_run_args, stored_echo_session};
use super::support::*;

/// A script of one `echo` call, in `dir`.
/// A file log `name` in `dir`, written by a run of [`echo_script`].
fn file_log(dir: &std::path::Path, name: &str) -> std::path::PathBuf {
    let log = dir.join(name);
    let out = run_script(&echo_script(dir), dir, &log, &["--demo-tools"]);
    assert_eq!(out.code, 0, "{}", out.both());
    log
}

/// The URL with `user:password` put in.
fn with_credentials(url: &str, user: &str, password: &str) -> String {
    url.replacen(
        "postgres://dsh@",
        &format!("postgres://{user}:{password}@"),
        1,
    )
}

#[test]
fn a_failed_connection_says_why_and_never_the_password() {
    let base = fresh_db();
    // A database that does not exist: the server's reason.
    let nodb = with_credentials(&cluster().url_for("nodb"), "dsh", "s3cret-pw");
    // Nothing listens on a port just freed: the network's reason.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let refused = format!("postgres://dsh:s3cret-pw@127.0.0.1:{port}/dsh");
    // A wrong password for a user who needs one.
    password_role(&base);
    let wrong = with_credentials(&base, "dsh_pw", "s3cret-pw");
    let right = with_credentials(&base, "dsh_pw", "right-pw");
    // The password that works works: the refusal below is the password's.
    let ok = dsh_run(&["sessions", "--store", &right]);
    assert_eq!(ok.code, 0, "{}", ok.both());

    for (url, reason) in [
        (&nodb, r#"database "nodb" does not exist"#),
        (&refused, "Connection refused"),
        (
            &wrong,
            r#"password authentication failed for user "dsh_pw""#,
        ),
    ] {
        for args in [
            vec!["sessions", "--store", url.as_str()],
            vec!["check", "--store", url.as_str(), "some-id"],
        ] {
            let out = dsh_run(&args);
            assert_eq!(out.code, 1, "{}", out.both());
            assert!(out.stderr.contains(reason), "{reason}: {}", out.both());
            assert!(
                out.stderr.contains("PostgreSQL: connect to "),
                "{}",
                out.both()
            );
            assert!(!out.stderr.contains("s3cret-pw"), "{}", out.both());
            assert!(!out.stdout.contains("s3cret-pw"), "{}", out.both());
        }
    }
}

/// Makes role `dsh_pw` (password `right-pw`) and requires its password from now on.
fn password_role(base: &str) {
    // Tests running at once would race to create it (a role is the cluster's, not a
    // database's): one at a time.
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = ONE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    sql(
        base,
        "DO $$ BEGIN
           IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'dsh_pw') THEN
             CREATE ROLE dsh_pw LOGIN SUPERUSER PASSWORD 'right-pw';
           END IF;
         END $$",
    );
    cluster().require_password("dsh_pw");
}

/// `base` (`postgres://dsh@HOST:PORT/DB`) as `(HOST:PORT/DB, HOST, PORT, DB)`.
fn parts(base: &str) -> (&str, &str, &str, &str) {
    let rest = base.strip_prefix("postgres://dsh@").unwrap();
    let (host_port, db) = rest.split_once('/').unwrap();
    let (host, port) = host_port.split_once(':').unwrap();
    (rest, host, port, db)
}

/// `base` (`postgres://dsh@HOST:PORT/DB`) for user `dsh_pw` with `password`, in the three
/// spellings the client takes: in the URL's credentials, in its query, and as key-value text.
fn spellings(base: &str, password: &str) -> [String; 3] {
    let (rest, host, port, db) = parts(base);
    [
        format!("postgres://dsh_pw:{password}@{rest}"),
        format!("postgres://dsh_pw@{rest}?sslmode=disable&password={password}"),
        format!("host={host} port={port} user=dsh_pw password='{password}' dbname={db}"),
    ]
}

#[test]
fn no_spelling_of_the_password_is_shown_by_a_failure_or_a_run() {
    let base = fresh_db();
    password_role(&base);
    let t = tmp();
    let sc = echo_script(t.path());
    for (n, url) in spellings(&base, "right-pw").iter().enumerate() {
        let id = format!("pw-{n}");
        let out = dsh_run(&store_run_args(&sc, t.path(), url, &id));
        assert_eq!(out.code, 0, "{url}: {}", out.both());
        // The run names where its log is, without the password.
        assert!(out.both().contains(&format!("{id} in ")), "{}", out.both());
        assert!(!out.both().contains("right-pw"), "{url}: {}", out.both());
        for args in [
            vec!["check", "--store", url, &id],
            vec!["sessions", "--store", url],
        ] {
            let out = dsh_run(&args);
            assert_eq!(out.code, 0, "{args:?}: {}", out.both());
            assert!(!out.both().contains("right-pw"), "{args:?}: {}", out.both());
        }
    }
    for url in spellings(&base, "s3cret-pw") {
        for args in [
            vec!["sessions", "--store", url.as_str()],
            vec!["check", "--store", url.as_str(), "pw-0"],
            vec!["export", "--store", url.as_str(), "pw-0"],
        ] {
            let out = dsh_run(&args);
            assert_eq!(out.code, 1, "{args:?}: {}", out.both());
            assert!(
                out.stderr
                    .contains(r#"password authentication failed for user "dsh_pw""#),
                "{args:?}: {}",
                out.both()
            );
            assert!(
                !out.both().contains("s3cret-pw"),
                "{args:?}: {}",
                out.both()
            );
        }
    }
}

#[test]
fn an_empty_dsh_store_means_files_and_an_empty_store_option_is_refused() {
    let t = tmp();
    let sc = echo_script(t.path());
    let log = t.path().join("log.jsonl");
    let out = run(dsh()
        .args(["run", s(&sc), "--workspace", s(t.path()), "--demo-tools"])
        .args(["--session", s(&log)])
        .env("DSH_STORE", ""));
    assert_eq!(out.code, 0, "{}", out.both());
    assert!(log.is_file(), "a file log, as without DSH_STORE");
    for args in [
        vec!["check", s(&log)],
        vec!["transcript", s(&log)],
        vec!["repair", s(&log)],
        vec!["sessions", "--workspace", s(t.path())],
    ] {
        let out = run(dsh().args(&args).env("DSH_STORE", ""));
        assert_eq!(out.code, 0, "{args:?}: {}", out.both());
        assert_eq!(out.stderr, "", "{args:?}: {}", out.both());
    }
    // An empty --store was given on purpose: a usage error naming it.
    for args in [
        vec!["check", "--store", "", s(&log)],
        vec!["sessions", "--store="],
        vec!["export", "--store", "", "some-id"],
    ] {
        let out = run(dsh().args(&args).env_remove("DSH_STORE"));
        assert_eq!(out.code, 2, "{args:?}: {}", out.both());
        assert!(out.stderr.contains("--store"), "{args:?}: {}", out.both());
        assert!(
            !out.stderr.contains("PostgreSQL"),
            "{args:?}: {}",
            out.both()
        );
    }
    // A command that needs a store still says so when DSH_STORE is empty.
    let out = run(dsh().args(["export", "some-id"]).env("DSH_STORE", ""));
    assert_eq!(out.code, 2, "{}", out.both());
    assert!(out.stderr.contains("needs a store"), "{}", out.both());
}

#[test]
fn a_session_id_with_a_control_character_or_too_long_is_refused_by_the_store() {
    let url = fresh_db();
    let t = tmp();
    let sc = echo_script(t.path());
    // An id too long for a notification (8,000 bytes) is refused before anything runs too.
    let long = "x".repeat(8_000);
    for id in ["nl\nid", "tab\tid", "esc\u{1b}[31mred", &long] {
        let out = dsh_run(&store_run_args(&sc, t.path(), &url, id));
        assert_eq!(out.code, 2, "{id:?}: {}", out.both());
        assert!(
            out.stderr
                .contains("a session id is one line of printable text"),
            "{id:?}: {}",
            out.both()
        );
        assert_eq!(out.stderr.lines().count(), 1, "{id:?}: {}", out.both());
    }
    let log = t.path().join("ok.jsonl");
    let out = run_script(&sc, t.path(), &log, &["--demo-tools"]);
    assert_eq!(out.code, 0, "{}", out.both());
    let imported = dsh_run(&["import", "--store", &url, s(&log), "--id", "bad\nid"]);
    assert_eq!(imported.code, 2, "{}", imported.both());
    assert!(
        imported
            .stderr
            .contains(r#"session id "bad\nid" holds a control character"#),
        "{}",
        imported.both()
    );
    // An id that is not UTF-8 is refused, not changed into another id.
    use std::os::unix::ffi::OsStrExt as _;
    let not_utf8 = std::ffi::OsStr::from_bytes(b"a\xffb");
    let ws = ["--workspace", s(t.path())];
    for (before, after) in [
        (vec!["run", s(&sc), "--demo-tools", "--session"], &ws[..]),
        (vec!["check"], &[][..]),
        (vec!["transcript"], &[][..]),
        (vec!["repair"], &[][..]),
    ] {
        let out = run(dsh()
            .args(&before)
            .arg(not_utf8)
            .args(["--store", &url])
            .args(after));
        assert_eq!(out.code, 2, "{before:?}: {}", out.both());
        assert!(
            out.stderr.contains("is not valid UTF-8"),
            "{before:?}: {}",
            out.both()
        );
    }
    // Readers refuse such an id before asking the database, and never echo it raw.
    for id in ["esc\u{1b}[31mred", "nl\nid", &long] {
        for command in ["check", "transcript", "repair", "export", "tail"] {
            let out = dsh_run(&[command, "--store", &url, id]);
            assert_eq!(out.code, 2, "{command} {id:?}: {}", out.both());
            assert!(
                out.stderr
                    .contains("a session id is one line of printable text"),
                "{command} {id:?}: {}",
                out.both()
            );
            assert!(
                !out.both().contains('\u{1b}') && out.both().len() < 400,
                "{command} {id:?}: {}",
                out.both()
            );
        }
    }
    let listed = dsh_run(&["sessions", "--store", &url, "--all"]);
    assert_eq!(listed.stdout, "", "nothing was created: {}", listed.both());
}

#[test]
fn importing_a_torn_log_says_that_dsh_repair_cuts_the_torn_tail() {
    let url = fresh_db();
    let t = tmp();
    let log = file_log(t.path(), "torn.jsonl");
    // A crash mid-write: the last line cut short, no newline.
    let mut bytes = std::fs::read(&log).unwrap();
    bytes.extend_from_slice(br#"{"type":"turn/start","data":{"tu"#);
    std::fs::write(&log, &bytes).unwrap();
    // Refused, naming the session it was to be: the header's id, or the one given.
    let header_id = dsh::session::Header::from_json_line(
        std::str::from_utf8(&bytes).unwrap().lines().next().unwrap(),
    )
    .unwrap()
    .id()
    .to_owned();
    let unnamed = dsh_run(&["import", "--store", &url, s(&log)]);
    assert_eq!(unnamed.code, 2, "{}", unnamed.both());
    assert!(
        unnamed.stderr.contains(&format!("session {header_id}: ")),
        "{}",
        unnamed.both()
    );
    let refused = dsh_run(&["import", "--store", &url, s(&log), "--id", "torn"]);
    assert_eq!(refused.code, 2, "{}", refused.both());
    assert!(
        refused.stderr.contains("session torn: ") && !refused.stderr.contains("(import)"),
        "{}",
        refused.both()
    );
    assert!(
        refused.stderr.contains("invalid JSON"),
        "{}",
        refused.both()
    );
    assert!(
        refused
            .stderr
            .contains(&format!("`dsh repair {}` cuts a torn tail", log.display())),
        "{}",
        refused.both()
    );
    let repaired = dsh_run(&["repair", s(&log)]);
    assert_eq!(repaired.code, 0, "{}", repaired.both());
    let imported = dsh_run(&["import", "--store", &url, s(&log), "--id", "torn"]);
    assert_eq!(imported.code, 0, "{}", imported.both());
}

#[test]
fn l4_a_damaged_row_fails_export_and_transcript_naming_its_session_and_seq() {
    let url = fresh_db();
    let t = tmp();
    let sc = echo_script(t.path());
    let out = dsh_run(&store_run_args(&sc, t.path(), &url, "hurt"));
    assert_eq!(out.code, 0, "{}", out.both());
    let clean = dsh_run(&["export", "--store", &url, "hurt"]);
    assert_eq!(clean.code, 0, "{}", clean.both());
    assert_eq!(clean.stderr, "");
    // A gap in the seqs (then mended), and two lines in one row.
    for (damage, mend) in [
        (
            "UPDATE dsh_events SET seq = 40 WHERE session_id = 'hurt' AND seq = 2",
            "UPDATE dsh_events SET seq = 2 WHERE session_id = 'hurt' AND seq = 40",
        ),
        (
            "UPDATE dsh_events SET line = line || E'\\n' || line WHERE session_id = 'hurt' AND seq = 2",
            "",
        ),
    ] {
        sql(&url, damage);
        let exported = dsh_run(&["export", "--store", &url, "hurt"]);
        assert_eq!(exported.code, 1, "{damage}: {}", exported.both());
        // What is stored is still given, for whoever mends it.
        assert!(exported.stdout.len() >= clean.stdout.len(), "{damage}");
        assert!(
            exported.stderr.contains("session hurt, seq ")
                && exported.stderr.contains("exported as they are stored"),
            "{damage}: {}",
            exported.both()
        );
        let transcript = dsh_run(&["transcript", "--store", &url, "hurt"]);
        assert_eq!(transcript.code, 1, "{damage}: {}", transcript.both());
        assert!(
            transcript.stderr.contains("session hurt, seq "),
            "{damage}: {}",
            transcript.both()
        );
        assert_eq!(transcript.stdout, "", "{damage}");
        if !mend.is_empty() {
            sql(&url, mend);
            assert_eq!(
                dsh_run(&["export", "--store", &url, "hurt"]).stdout,
                clean.stdout
            );
        }
    }
}

#[test]
fn importing_a_log_with_a_blank_line_names_it_and_says_what_to_do() {
    let url = fresh_db();
    let t = tmp();
    let log = file_log(t.path(), "blank.jsonl");
    let text = std::fs::read_to_string(&log).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines.insert(3, "");
    std::fs::write(&log, lines.join("\n") + "\n").unwrap();
    // A file reads past it...
    assert_eq!(dsh_run(&["check", s(&log)]).code, 0);
    // ...the store cannot give it back, so it is refused with the line and the way out.
    let refused = dsh_run(&["import", "--store", &url, s(&log), "--id", "blank"]);
    assert_eq!(refused.code, 2, "{}", refused.both());
    assert!(
        refused.stderr.contains("line 4") && refused.stderr.contains("remove the blank lines"),
        "{}",
        refused.both()
    );
    let listed = dsh_run(&["sessions", "--store", &url, "--all"]);
    assert_eq!(listed.stdout, "", "nothing was stored: {}", listed.both());
}

#[test]
fn a_bash_command_does_not_inherit_dsh_store_and_its_password() {
    // `DSH_STORE` may hold the store's password: a command's output would carry it into the log
    // and to the model, so the commands dsh starts never inherit it.
    let base = fresh_db();
    password_role(&base);
    let [url, ..] = spellings(&base, "right-pw");
    let t = tmp();
    let sc = script(
        t.path(),
        "env.jsonl",
        &[openai(
            "",
            &[call(
                "e1",
                "bash",
                json!({"command": "printf 'store=%s' \"${DSH_STORE-withheld}\""}),
            )],
        )],
    );
    for preset in ["danger-full-access", "workspace-write"] {
        let id = format!("env-{preset}");
        let out = run(dsh()
            .args(["run", s(&sc), "--workspace", s(t.path())])
            .args(["--session", &id, "--preset", preset])
            .env("DSH_STORE", &url));
        assert_eq!(out.code, 0, "{preset}: {}", out.both());
        let log = dsh_run(&["export", "--store", &url, &id]);
        assert_eq!(log.code, 0, "{}", log.both());
        assert!(
            log.stdout.contains("store=withheld"),
            "{preset}: {}",
            log.stdout
        );
        assert!(!log.stdout.contains("right-pw"), "{preset}: {}", log.stdout);
    }
}

#[test]
fn a_url_without_host_or_user_takes_them_from_the_environment_as_psql_does() {
    // `postgres:///DB` with PGHOST (the server's socket directory), PGPORT and PGUSER: what
    // `psql postgres:///DB` reaches, dsh reaches (it failed: "both host and hostaddr are
    // missing").
    let url = fresh_db();
    let db = url.rsplit('/').next().unwrap().to_owned();
    let t = tmp();
    let sc = echo_script(t.path());
    let bare = format!("postgres:///{db}");
    let env_run = |args: &[&str]| {
        run(dsh()
            .args(args)
            .env("PGHOST", cluster().socket_dir())
            .env("PGPORT", cluster().port().to_string())
            .env("PGUSER", "dsh")
            .env_remove("PGPASSWORD")
            .env_remove("PGDATABASE"))
    };
    let ran = env_run(&store_run_args(&sc, t.path(), &bare, "local"));
    assert_eq!(ran.code, 0, "{}", ran.both());
    // The same session, seen through the loopback URL.
    let listed = dsh_run(&["sessions", "--store", &url, "--all"]);
    assert!(listed.stdout.starts_with("local  "), "{}", listed.both());
    let checked = env_run(&["check", "--store", &bare, "local"]);
    assert_eq!(checked.code, 0, "{}", checked.both());
}

#[test]
fn with_dsh_store_set_a_file_log_given_by_its_path_is_still_read_as_the_file() {
    // `export DSH_STORE=...` is how the store is meant to be used; the demo's own hint
    // (`try: dsh transcript FILE`) and `dsh check FILE` then went to the store.
    let t = tmp();
    let log = file_log(t.path(), "own.jsonl");
    // Nothing listens there: reaching for the store would fail.
    let unreachable = "postgres://dsh@127.0.0.1:1/none";
    let with_var = |args: &[&str]| run(dsh().args(args).env("DSH_STORE", unreachable));
    let checked = with_var(&["check", s(&log)]);
    assert_eq!(checked.code, 0, "{}", checked.both());
    assert!(checked.stdout.contains(": ok"), "{}", checked.both());
    let transcript = with_var(&["transcript", s(&log), "--format", "openai"]);
    assert_eq!(transcript.code, 0, "{}", transcript.both());
    assert!(
        transcript.stdout.contains("\"role\""),
        "{}",
        transcript.both()
    );
    let repaired = with_var(&["repair", s(&log)]);
    assert_eq!(repaired.code, 0, "{}", repaired.both());
    // A run given the log's path resumes the file (it started a new session in the store,
    // named after the path, and the conversation was lost).
    let before = std::fs::read_to_string(&log).unwrap().lines().count();
    let sc = script(
        t.path(),
        "more.jsonl",
        &[
            openai("", &[call("e2", "echo", json!({"text": "again"}))]),
            openai("done", &[]),
        ],
    );
    let resumed = with_var(&[
        "run",
        s(&sc),
        "--workspace",
        s(t.path()),
        "--session",
        s(&log),
        "--demo-tools",
    ]);
    assert_eq!(resumed.code, 0, "{}", resumed.both());
    assert!(
        std::fs::read_to_string(&log).unwrap().lines().count() > before,
        "the run went on in the file: {}",
        resumed.both()
    );
    // A file beside a stored session's id: each is checked as what it is (the file was taken
    // for an id, "no session").
    let url = fresh_db();
    stored_echo_session(&url, t.path(), "kept");
    let mixed = run(dsh()
        .args(["check", "kept", s(&log)])
        .env("DSH_STORE", &url));
    assert_eq!(mixed.code, 0, "{}", mixed.both());
    assert_eq!(
        mixed.stdout,
        format!("kept: ok\n{}: ok\n", log.display()),
        "{}",
        mixed.both()
    );
    // An id that is no file is the store's, and `--store` always is.
    for args in [
        vec!["check", "no-such-file"],
        vec!["check", "--store", unreachable, s(&log)],
    ] {
        let out = with_var(&args);
        assert_eq!(out.code, 1, "{args:?}: {}", out.both());
        assert!(out.stderr.contains("Connection refused"), "{}", out.both());
    }
}

#[test]
fn an_import_that_cannot_reach_the_store_names_the_file_and_the_session() {
    let t = tmp();
    let log = file_log(t.path(), "keep.jsonl");
    let out = dsh_run(&[
        "import",
        "--store",
        "postgres://dsh@127.0.0.1:1/none",
        s(&log),
        "--id",
        "kept-copy",
    ]);
    assert_eq!(out.code, 1, "{}", out.both());
    assert!(
        out.stderr.starts_with(&format!(
            "dsh: importing {} as session kept-copy: ",
            log.display()
        )) && out.stderr.contains("Connection refused"),
        "{}",
        out.both()
    );
}

#[test]
fn a_store_url_that_cannot_work_says_why_and_where_without_its_password() {
    // Another database's URL was "invalid connection string"; a password with a bare `@` had
    // its tail taken for the host and shown; a missing socket was "No such file or directory"
    // without saying which file.
    let dir = tmp();
    let socket_dir = dir.path().join("no-server-here");
    let socket_url = format!("postgres:///db?host={}", s(&socket_dir));
    for (url, code, says) in [
        (
            "mysql://dsh:zq-secret@db.example/app",
            2,
            "a store URL starts with postgres:// or postgresql://, not mysql://".to_owned(),
        ),
        (
            "postgres://dsh:p@zq-secret@127.0.0.1:9/db",
            2,
            "write an `@` of the user name or password as %40".to_owned(),
        ),
        (
            socket_url.as_str(),
            1,
            format!(
                "PostgreSQL: connect to the Unix socket {}/.s.PGSQL.5432: ",
                s(&socket_dir)
            ),
        ),
        (
            "postgres://dsh:zq-secret@127.0.0.1:9,127.0.0.1:10/db",
            1,
            "connect to 127.0.0.1 port 9 and 127.0.0.1 port 10 (tried in this order; the error is the last one's)".to_owned(),
        ),
    ] {
        let out = dsh_run(&["sessions", "--store", url]);
        assert_eq!(out.code, code, "{url}: {}", out.both());
        assert!(out.stderr.contains(&says), "{url}: {}", out.both());
        assert!(!out.both().contains("zq"), "{url}: {}", out.both());
    }
}

#[test]
fn a_url_without_a_password_takes_it_from_the_password_file_as_psql_does() {
    use std::os::unix::fs::PermissionsExt as _;
    let base = fresh_db();
    password_role(&base);
    let (rest, host, port, db) = parts(&base);
    let url = format!("postgres://dsh_pw@{rest}");
    let t = tmp();
    let file = t.path().join("pgpass");
    std::fs::write(
        &file,
        format!("# dsh test\nother:1:x:y:wrong\n{host}:{port}:{db}:dsh_pw:right-pw\n"),
    )
    .unwrap();
    let listed = |mode: u32| {
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
        dsh()
            .args(["sessions", "--store", &url])
            .env("PGPASSFILE", &file)
            .env_remove("PGPASSWORD")
            .output()
            .unwrap()
    };
    let read = listed(0o600);
    assert_eq!(
        read.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&read.stderr)
    );
    // A file others may read holds no secret anymore: libpq does not read it, nor does dsh.
    let open = listed(0o644);
    let said = String::from_utf8_lossy(&open.stderr);
    assert_eq!(open.status.code(), Some(1), "{said}");
    assert!(said.contains("password"), "{said}");
    assert!(!said.contains("right-pw"), "{said}");
}
