//! Containment under the two contained modes, each attempt checked against the world outside:
//! writes outside the roots, a file under /etc, a TCP connection to 127.0.0.1, a symlink out of
//! the workspace, metadata changes, leaving the process group. `danger-full-access` is the
//! control: the same attempts succeed there, so the checks can fail.

use std::io::ErrorKind;
use std::net::TcpListener;

use super::support::*;
use dsh_tool_bash::{SandboxMode, SandboxSettings};

fn settings(mode: SandboxMode) -> SandboxSettings {
    SandboxSettings {
        mode,
        ..SandboxSettings::default()
    }
}

async fn contained(mode: SandboxMode) -> Fixture {
    let f = fixture_with(settings(mode), |_| {});
    let probe = f.tool.probe().await;
    assert!(
        probe.is_available(),
        "this kernel must contain commands for these tests: {probe:?}"
    );
    f
}

#[tokio::test]
async fn writing_outside_the_workspace_is_denied_and_named() {
    let f = contained(SandboxMode::WorkspaceWrite).await;
    let target = f.outside().join("f");
    let r = f.sh(&format!("echo x > {}", target.display())).await;
    assert!(!target.exists());
    let t = text(&r);
    assert!(t.contains("Permission denied"), "{t}");
    assert!(
        t.ends_with(&format!(
            "[sandbox: file access denied under workspace-write mode]\n{}\n[exit code: 1]",
            dsh_tool_bash::ESCALATION_HINT
        )),
        "{t}"
    );
}

#[tokio::test]
async fn writing_inside_the_workspace_works_in_workspace_write() {
    let f = contained(SandboxMode::WorkspaceWrite).await;
    let r = f
        .sh("mkdir -p d && echo hi > d/f && cat d/f && rm d/f")
        .await;
    assert_eq!(text(&r), "hi\n");
    assert!(f.workspace().join("d").is_dir());
}

#[tokio::test]
async fn read_only_mode_reads_the_workspace_but_cannot_write_it() {
    let f = contained(SandboxMode::ReadOnly).await;
    std::fs::write(f.workspace().join("notes.txt"), "keep\n").unwrap();
    let r = f.sh("cat notes.txt; echo changed > notes.txt").await;
    let t = text(&r);
    assert!(t.starts_with("keep\n[stderr]\n"), "{t}");
    assert!(
        t.contains("[sandbox: file access denied under read-only mode]"),
        "{t}"
    );
    assert_eq!(
        std::fs::read_to_string(f.workspace().join("notes.txt")).unwrap(),
        "keep\n"
    );
    // The private temp dir stays writable.
    let r = f.sh("echo t > $TMPDIR/x && cat $TMPDIR/x").await;
    assert_eq!(text(&r), "t\n");
}

#[tokio::test]
async fn a_file_under_etc_can_be_read_but_not_written() {
    let f = contained(SandboxMode::WorkspaceWrite).await;
    let name = format!("/etc/dsh-bash-test-{}.conf", std::process::id());
    // Created from outside the sandbox when we may (as root); otherwise /etc/hostname is read.
    let ours = std::fs::write(&name, "original\n").is_ok();
    let target = if ours {
        name.clone()
    } else {
        "/etc/hostname".to_owned()
    };
    let before = std::fs::read(&target).unwrap();
    let created = format!("{name}.new");
    // Only our own file is ever a write target: a broken sandbox must not damage the machine.
    let append = if ours {
        format!("echo pwned >> {name}; rm -f {name}; ")
    } else {
        String::new()
    };
    let r = f
        .sh(&format!(
            "cat {target} >/dev/null && echo read-ok; {append}echo pwned > {created}"
        ))
        .await;
    let t = text(&r);
    let after = std::fs::read(&target).unwrap();
    if ours {
        let _ = std::fs::remove_file(&name);
    }
    assert!(t.starts_with("read-ok\n"), "{t}");
    assert_eq!(before, after, "the file under /etc changed");
    assert!(!std::path::Path::new(&created).exists());
    assert!(
        t.contains("[sandbox: file access denied under workspace-write mode]"),
        "{t}"
    );
}

#[tokio::test]
async fn a_tcp_connection_to_localhost_is_refused_in_contained_modes() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let cmd = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected");
    for mode in [SandboxMode::ReadOnly, SandboxMode::WorkspaceWrite] {
        let f = contained(mode).await;
        let t = text(&f.sh(&cmd).await);
        assert!(!t.contains("connected"), "{mode}: {t}");
        assert!(
            t.contains(&format!(
                "[sandbox: network access denied under {mode} mode]"
            )),
            "{mode}: {t}"
        );
        assert_eq!(
            listener.accept().map(|_| ()).map_err(|e| e.kind()),
            Err(ErrorKind::WouldBlock),
            "{mode}: a connection got through"
        );
    }
    // Control: uncontained, the same command connects.
    let f = fixture_with(settings(SandboxMode::DangerFullAccess), |_| {});
    let t = text(&f.sh(&cmd).await);
    assert!(t.contains("connected"), "{t}");
    assert!(listener.accept().is_ok());
}

#[tokio::test]
async fn unix_sockets_stay_available() {
    let f = contained(SandboxMode::WorkspaceWrite).await;
    if !text(&f.sh("command -v python3 >/dev/null && echo yes").await).contains("yes") {
        eprintln!("python3 is not installed: AF_UNIX check skipped");
        return;
    }
    let r = f
        .sh("python3 -c 'import socket; a, b = socket.socketpair(socket.AF_UNIX); a.send(b\"ok\"); print(b.recv(2).decode())'")
        .await;
    assert_eq!(text(&r), "ok\n");
    let r = f
        .sh("python3 -c 'import socket; socket.socket(socket.AF_INET6)'")
        .await;
    assert!(text(&r).contains("Operation not permitted"), "{}", text(&r));
}

#[tokio::test]
async fn a_symlink_out_of_the_workspace_does_not_escape() {
    let f = contained(SandboxMode::WorkspaceWrite).await;
    std::os::unix::fs::symlink(f.outside(), f.workspace().join("planted")).unwrap();
    let r = f
        .sh("echo x > planted/a; ln -s .. up; ln -s /etc etc; echo y > up/outside/b; echo z > etc/dsh-escape")
        .await;
    let t = text(&r);
    assert!(!f.outside().join("a").exists());
    assert!(!f.outside().join("b").exists());
    assert!(!std::path::Path::new("/etc/dsh-escape").exists());
    assert!(
        t.contains("[sandbox: file access denied under workspace-write mode]"),
        "{t}"
    );
}

#[tokio::test]
async fn dev_null_stays_reachable() {
    let f = contained(SandboxMode::ReadOnly).await;
    let r = f.sh("echo x > /dev/null && cat /dev/null && echo ok").await;
    assert_eq!(text(&r), "ok\n");
}

#[tokio::test]
async fn leaving_the_process_group_is_refused() {
    let f = contained(SandboxMode::WorkspaceWrite).await;
    let r = f.sh("setsid true && echo escaped").await;
    let t = text(&r);
    assert!(!t.contains("escaped"), "{t}");
    assert!(t.contains("Operation not permitted"), "{t}");
}

#[tokio::test]
async fn owners_and_outside_permission_bits_cannot_be_changed() {
    let f = contained(SandboxMode::WorkspaceWrite).await;
    let target = f.outside().join("perm");
    std::fs::write(&target, "x").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o644)).unwrap();
    let r = f
        .sh(&format!("chmod 777 {0}; chown 0:0 {0}", target.display()))
        .await;
    let mode = std::fs::metadata(&target).unwrap().permissions().mode() & 0o777;
    if rustix::process::geteuid().is_root() {
        assert_eq!(mode, 0o644, "{}", text(&r));
    }
    assert!(text(&r).contains("Operation not permitted"), "{}", text(&r));
}

#[tokio::test]
async fn capabilities_are_dropped_and_no_new_privs_is_set() {
    let f = contained(SandboxMode::WorkspaceWrite).await;
    let r = f
        .sh("grep -E '^(CapEff|CapPrm|NoNewPrivs|Seccomp):' /proc/self/status")
        .await;
    let t = text(&r);
    assert!(t.contains("CapEff:\t0000000000000000"), "{t}");
    assert!(t.contains("CapPrm:\t0000000000000000"), "{t}");
    assert!(t.contains("NoNewPrivs:\t1"), "{t}");
    assert!(t.contains("Seccomp:\t2"), "{t}");
}

#[tokio::test]
async fn danger_full_access_is_not_contained() {
    let f = fixture_with(settings(SandboxMode::DangerFullAccess), |_| {});
    let target = f.outside().join("f");
    let r = f
        .sh(&format!("echo x > {} && echo wrote", target.display()))
        .await;
    assert_eq!(text(&r), "wrote\n");
    assert!(target.exists());
}

#[tokio::test]
async fn without_escalation_the_denial_carries_no_hint() {
    let f = fixture_with(
        SandboxSettings {
            escalation: false,
            ..SandboxSettings::default()
        },
        |_| {},
    );
    let r = f.sh(&format!("echo x > {}/f", f.outside().display())).await;
    let t = text(&r);
    assert!(
        t.contains("[sandbox: file access denied under workspace-write mode]"),
        "{t}"
    );
    assert!(!t.contains("escalation available"), "{t}");
}

/// A Python client connecting to a Unix socket address (`@name` for an abstract one).
fn connect_cmd(addr: &str) -> String {
    let target = match addr.strip_prefix('@') {
        Some(name) => format!("'\\0{name}'"),
        None => format!("'{addr}'"),
    };
    format!(
        "python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); s.connect({target}); s.send(b'hello'); print('connected', s.recv(5))\""
    )
}

#[tokio::test]
async fn no_unix_socket_outside_the_workspace_is_reachable_by_path_or_abstract_name() {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::net::{SocketAddr, UnixListener};
    // The client needs python3: its absence is a failure, not a skip.
    let probe = std::process::Command::new("python3")
        .arg("--version")
        .output();
    assert!(
        probe.is_ok_and(|o| o.status.success()),
        "python3 is required for this test"
    );
    let f0 = fixture_with(settings(SandboxMode::DangerFullAccess), |_| {});
    let path = f0.outside().join("daemon.sock");
    let by_path = UnixListener::bind(&path).unwrap();
    by_path.set_nonblocking(true).unwrap();
    let name = format!("dsh-test-{}", std::process::id());
    let abstract_addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let by_name = UnixListener::bind_addr(&abstract_addr).unwrap();
    by_name.set_nonblocking(true).unwrap();
    let targets = [path.to_string_lossy().into_owned(), format!("@{name}")];
    for mode in [SandboxMode::ReadOnly, SandboxMode::WorkspaceWrite] {
        let f = contained(mode).await;
        for target in &targets {
            let t = text(&f.sh(&connect_cmd(target)).await);
            assert!(!t.contains("connected"), "{mode} {target}: {t}");
            assert!(
                t.contains("Operation not permitted") || t.contains("Permission denied"),
                "{mode} {target}: {t}"
            );
        }
        for (what, l) in [("path", &by_path), ("abstract", &by_name)] {
            assert_eq!(
                l.accept().map(|_| ()).map_err(|e| e.kind()),
                Err(ErrorKind::WouldBlock),
                "{mode}: a connection to the {what} socket got through"
            );
        }
    }
    // Control: uncontained, both listeners are reached (so the checks above can fail).
    for (target, l) in targets.iter().zip([&by_path, &by_name]) {
        let server = {
            let l = l.try_clone().unwrap();
            std::thread::spawn(move || {
                l.set_nonblocking(false).unwrap();
                let (mut s, _) = l.accept().unwrap();
                use std::io::{Read, Write};
                let mut buf = [0u8; 5];
                s.read_exact(&mut buf).unwrap();
                s.write_all(&buf).unwrap();
            })
        };
        let t = text(&f0.sh(&connect_cmd(target)).await);
        assert!(t.contains("connected b'hello'"), "{target}: {t}");
        server.join().unwrap();
    }
}

/// A Python client that makes an unbound datagram pair and sends from one end to the socket file
/// `path`, by `sendto` and by re-`connect`ing.
fn datagram_pair_cmd(path: &str) -> String {
    format!(
        "python3 -c \"import socket; a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM); a.sendto(b'hello', '{path}'); a.connect('{path}'); a.send(b'again'); print('sent')\""
    )
}

#[tokio::test]
async fn item4_a_datagram_pair_reaches_no_socket_file_outside_the_workspace() {
    use std::os::unix::net::UnixDatagram;
    let probe = std::process::Command::new("python3")
        .arg("--version")
        .output();
    assert!(
        probe.is_ok_and(|o| o.status.success()),
        "python3 is required for this test"
    );
    let f0 = fixture_with(settings(SandboxMode::DangerFullAccess), |_| {});
    let path = f0.outside().join("log.sock");
    let daemon = UnixDatagram::bind(&path).unwrap();
    daemon.set_nonblocking(true).unwrap();
    let cmd = datagram_pair_cmd(&path.to_string_lossy());
    let mut buf = [0_u8; 16];
    for mode in [SandboxMode::ReadOnly, SandboxMode::WorkspaceWrite] {
        let f = contained(mode).await;
        let t = text(&f.sh(&cmd).await);
        assert!(!t.contains("sent"), "{mode}: {t}");
        assert!(
            t.contains("Operation not permitted") || t.contains("Permission denied"),
            "{mode}: {t}"
        );
        assert_eq!(
            daemon.recv(&mut buf).map_err(|e| e.kind()),
            Err(ErrorKind::WouldBlock),
            "{mode}: a datagram reached the socket file outside"
        );
    }
    // A stream pair, connected to itself for good, stays available.
    let f = contained(SandboxMode::WorkspaceWrite).await;
    let r = f
        .sh("python3 -c 'import socket; a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC); a.send(b\"ok\"); print(b.recv(2).decode())'")
        .await;
    assert_eq!(text(&r), "ok\n");
    // Control: uncontained, both datagrams arrive (so the checks above can fail).
    let t = text(&f0.sh(&cmd).await);
    assert_eq!(t, "sent\n");
    let n = daemon.recv(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"hello");
    let n = daemon.recv(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"again");
}
