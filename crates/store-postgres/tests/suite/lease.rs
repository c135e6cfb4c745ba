//! One writer per session (the lease and its fencing token) and takeover with crash repair
//! (spec I4).

use dsh_session::{Event, OpenOptions, check_bytes};
use dsh_store_postgres::{Lease, PgStore, StoreError};

use super::support::{Proxy, client, fresh_store, opened_with_a_turn, short_lease};

async fn started_call(session: &dsh_session::Session) {
    for e in [
        Event::turn_start(1),
        Event::step_start(1, 1),
        Event::tool_call(1, 1, "c1", "echo", r#"{"text":"hi"}"#),
    ] {
        session.append(e).await.expect("append");
    }
}

#[tokio::test]
async fn a_second_writer_of_a_leased_session_is_refused_with_a_clear_error() {
    let (store, _) = fresh_store().await;
    let first = store
        .open("held", "/", OpenOptions::new())
        .await
        .expect("open");
    let second = store.open("held", "/", OpenOptions::new()).await;
    let Err(e @ StoreError::Leased { .. }) = second else {
        panic!("expected a lease refusal, got {second:?}");
    };
    let text = e.to_string();
    assert!(
        text.contains("session held is being written by another process"),
        "{text}"
    );
    assert!(store.is_leased("held").await.expect("lease"));
    first.session.close().await.expect("close");
    assert!(!store.is_leased("held").await.expect("lease"));
    let third = store
        .open("held", "/", OpenOptions::new())
        .await
        .expect("free once closed");
    third.session.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i4_a_takeover_after_the_holder_died_repairs_the_session_and_fences_the_old_writer() {
    let (store, url) = fresh_store().await;
    // The holder reaches the database through a relay: cut, it is gone for the database as a
    // dead process is (its backend ends, and it never comes back on its own).
    let proxy = Proxy::start().await;
    let a = PgStore::connect(&proxy.url(&url))
        .await
        .expect("connect through the relay")
        .with_lease(short_lease("a"))
        .open("t", "/", OpenOptions::new())
        .await
        .expect("open");
    started_call(&a.session).await;
    proxy.cut();
    let b = loop {
        match store
            .clone()
            .with_lease(short_lease("b"))
            .open("t", "/", OpenOptions::new())
            .await
        {
            Ok(b) => break b,
            // The backend may take a moment to go.
            Err(StoreError::Leased { .. }) => {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            Err(e) => panic!("takeover: {e}"),
        }
    };
    // The old writer reaches the database again.
    proxy.mend();
    assert_eq!(b.repair.interrupted_calls.len(), 1);
    assert_eq!(b.repair.closed_step, Some((1, 1)));
    assert_eq!(b.repair.closed_turn, Some(1));
    // The old writer wakes up: its append is refused by the fencing token, nothing written.
    let late = a.session.append(Event::turn_start(9)).await;
    let err = late.expect_err("fenced");
    assert!(err.to_string().contains("lease"), "{err}");
    assert_eq!(
        b.session
            .append(Event::turn_start(2))
            .await
            .expect("append"),
        6
    );
    b.session.close().await.expect("close");
    let log = store.export("t").await.expect("export");
    assert!(
        check_bytes(&log).is_empty(),
        "{}",
        String::from_utf8_lossy(&log)
    );
    let text = String::from_utf8(log).expect("utf-8");
    assert!(text.contains("INTERRUPTED"));
    assert!(
        !text.contains("\"turn\":9"),
        "the fenced append never landed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_whose_lease_expired_and_was_taken_over_cannot_append() {
    let (store, url) = fresh_store().await;
    let a = opened_with_a_turn(&store, "x").await;
    // The holder stalls past its lease (a long pause): the lease shows expired.
    let c = client(&url).await;
    c.execute(
        "UPDATE dsh_sessions SET lease_until = now() - interval '1 second' WHERE id = 'x'",
        &[],
    )
    .await
    .expect("expire");
    let b = store
        .open("x", "/", OpenOptions::new())
        .await
        .expect("takes over an expired lease");
    assert_eq!(b.repair.closed_turn, Some(1));
    let late = a
        .session
        .append(Event::turn_end(
            1,
            dsh_core::Json::from_shallow(serde_json::json!({"kind": "completed"})),
        ))
        .await;
    assert!(late.expect_err("fenced").to_string().contains("taken over"));
    // Refused for good: the session is poisoned.
    assert!(a.session.append(Event::turn_start(3)).await.is_err());
    b.session.close().await.expect("close");
    let tokens: i64 = c
        .query_one("SELECT lease_token FROM dsh_sessions WHERE id = 'x'", &[])
        .await
        .expect("token")
        .get(0);
    assert_eq!(tokens, 2, "each holder got its own token");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i4_a_live_holder_whose_connection_dropped_keeps_its_lease_and_a_second_writer_is_refused()
{
    let (store, url) = fresh_store().await;
    let a = store
        .clone()
        .with_lease(short_lease("a"))
        .open("d", "/", OpenOptions::new())
        .await
        .expect("open");
    started_call(&a.session).await;
    // A blip: the holder's connection is terminated while its process lives on.
    let c = client(&url).await;
    c.execute(
        "SELECT pg_terminate_backend(lease_backend) FROM dsh_sessions WHERE id = 'd'",
        &[],
    )
    .await
    .expect("terminate");
    // A second process comes at once, and again after the grace: refused both times.
    for _ in 0..2 {
        match store
            .clone()
            .with_lease(short_lease("b"))
            .open("d", "/", OpenOptions::new())
            .await
        {
            Err(StoreError::Leased { owner, .. }) => assert_eq!(owner, "a"),
            Ok(_) => panic!("a live holder's session was taken over after a dropped connection"),
            Err(e) => panic!("{e}"),
        }
        tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    }
    // The holder goes on, on a new connection, and its log checks clean.
    a.session
        .append(Event::tool_result(
            1,
            1,
            "c1",
            2,
            dsh_core::text_content("hi"),
            false,
            None,
            None,
        ))
        .await
        .expect("the holder appends after the blip");
    a.session.close().await.expect("close");
    let log = store.export("d").await.expect("export");
    assert!(
        check_bytes(&log).is_empty(),
        "{}",
        String::from_utf8_lossy(&log)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i4_a_holder_whose_process_died_on_this_host_is_taken_over_without_waiting_the_grace() {
    let (store, url) = fresh_store().await;
    let proxy = Proxy::start().await;
    // The owner names a process of this host that has ended.
    let mut ended = std::process::Command::new("true").spawn().expect("true");
    let pid = ended.id();
    ended.wait().expect("wait");
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").expect("hostname");
    let a = PgStore::connect(&proxy.url(&url))
        .await
        .expect("connect through the relay")
        .with_lease(short_lease(&format!("{}:{pid}", host.trim())))
        .open("k", "/", OpenOptions::new())
        .await
        .expect("open");
    started_call(&a.session).await;
    proxy.cut();
    // A taker willing to wait a minute for a holder it cannot see die: this one it can.
    let mut patient = short_lease("b");
    patient.takeover_grace = std::time::Duration::from_secs(60);
    let b = tokio::time::timeout(std::time::Duration::from_secs(20), async {
        loop {
            match store
                .clone()
                .with_lease(patient.clone())
                .open("k", "/", OpenOptions::new())
                .await
            {
                Ok(b) => break b,
                // The backend may take a moment to go.
                Err(StoreError::Leased { .. }) => {
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
                Err(e) => panic!("takeover: {e}"),
            }
        }
    })
    .await
    .expect("taken over well before the grace");
    assert_eq!(b.repair.interrupted_calls.len(), 1);
    b.session.close().await.expect("close");
    drop(a);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i4_a_writer_reconnecting_after_its_connection_dropped_is_still_seen_as_live() {
    let (store, url) = fresh_store().await;
    let proxy = Proxy::start().await;
    let holder = PgStore::connect(&proxy.url(&url))
        .await
        .expect("connect through the relay")
        .with_lease(Lease {
            takeover_grace: std::time::Duration::from_secs(20),
            ..short_lease("elsewhere:1")
        });
    let a = holder
        .open("r", "/", OpenOptions::new())
        .await
        .expect("open");
    started_call(&a.session).await;
    // The holder is cut off from the database: its backend ends while it lives on.
    proxy.cut();
    backend_gone(&url, "r").await;
    // A reader asks while the holder cannot reconnect; the holder is let back a moment later.
    let reader = store.clone().with_lease(Lease {
        takeover_grace: std::time::Duration::from_secs(20),
        ..short_lease("reader")
    });
    let asked = tokio::spawn(async move { tokio::join!(reader.is_leased("r"), reader.sessions()) });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    proxy.mend();
    let (leased, listed) = asked.await.expect("join");
    assert!(
        leased.expect("lease"),
        "a writer reconnecting was reported as gone"
    );
    let listed = listed.expect("list");
    let r = listed.iter().find(|s| s.id == "r").expect("r is listed");
    assert!(
        r.leased,
        "`dsh sessions` listed a writer reconnecting as not writing"
    );
    // `dsh check`'s other answer stays right: once the holder closes, nobody holds it.
    a.session.close().await.expect("close");
    assert!(!store.is_leased("r").await.expect("lease"));
}

/// Returns once session `id`'s recorded lease backend is no longer connected.
async fn backend_gone(url: &str, id: &str) {
    let c = client(url).await;
    loop {
        let gone: bool = c
            .query_one(
                "SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity a, dsh_sessions d
                                     WHERE d.id = $1 AND a.pid = d.lease_backend)",
                &[&id],
            )
            .await
            .expect("backend")
            .get(0);
        if gone {
            break;
        }
        tokio::task::yield_now().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i4_a_stopped_holder_running_on_this_host_keeps_its_lease_until_its_process_ends() {
    let (store, url) = fresh_store().await;
    let proxy = Proxy::start().await;
    // The owner names a process of this host that runs, but (cut off from the database, as a
    // stopped process is) cannot renew or reconnect.
    let mut running = std::process::Command::new("sleep")
        .arg("600")
        .spawn()
        .expect("sleep");
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").expect("hostname");
    let a = PgStore::connect(&proxy.url(&url))
        .await
        .expect("connect through the relay")
        .with_lease(short_lease(&format!("{}:{}", host.trim(), running.id())))
        .open("s", "/", OpenOptions::new())
        .await
        .expect("open");
    started_call(&a.session).await;
    proxy.cut();
    backend_gone(&url, "s").await;
    // A taker with a grace far shorter than the lease: the holder's process is seen running,
    // so the grace does not apply and the taker is refused at once.
    let mut quick = short_lease("b");
    quick.takeover_grace = std::time::Duration::from_millis(10);
    quick.ttl = std::time::Duration::from_secs(600);
    match store
        .clone()
        .with_lease(quick.clone())
        .open("s", "/", OpenOptions::new())
        .await
    {
        Err(StoreError::Leased { owner, .. }) => {
            assert_eq!(owner, format!("{}:{}", host.trim(), running.id()));
        }
        Ok(_) => panic!("a running holder's lease was taken over"),
        Err(e) => panic!("takeover: {e}"),
    }
    assert!(store.is_leased("s").await.expect("lease"));
    // Once its process ends, it is taken over at once: killed and not yet reaped (a zombie,
    // as a killed child of a supervisor is) counts as ended.
    running.kill().expect("kill");
    let b = tokio::time::timeout(std::time::Duration::from_secs(20), async {
        loop {
            match store
                .clone()
                .with_lease(quick.clone())
                .open("s", "/", OpenOptions::new())
                .await
            {
                Ok(b) => break b,
                // The signal may take a moment to land.
                Err(StoreError::Leased { .. }) => tokio::task::yield_now().await,
                Err(e) => panic!("takeover: {e}"),
            }
        }
    })
    .await
    .expect("taken over once the holder's process ended, before its lease expired");
    running.wait().expect("wait");
    assert_eq!(b.repair.interrupted_calls.len(), 1);
    b.session.close().await.expect("close");
    drop(a);
}
