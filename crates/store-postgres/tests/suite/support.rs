//! One cluster per test binary; a fresh database per test.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use dsh_session::{Event, OpenOptions};
use dsh_store_postgres::{Lease, Opened, PgStore};
use dsh_test_support::postgres::Cluster;

static CLUSTER: OnceLock<Cluster> = OnceLock::new();
static NEXT: AtomicUsize = AtomicUsize::new(0);

/// The shared cluster.
pub fn cluster() -> &'static Cluster {
    CLUSTER.get_or_init(Cluster::start)
}

/// A URL of a new, empty database of `cluster`.
pub async fn fresh_url_on(cluster: &Cluster) -> String {
    let name = format!(
        "t{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::SeqCst)
    );
    let (client, connection) = tokio_postgres::connect(&cluster.url(), tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| panic!("connect to the test cluster: {e}\n{}", cluster.server_log()));
    tokio::spawn(connection);
    client
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .expect("create database");
    cluster.url_for(&name)
}

/// A store on a new, empty database of the shared cluster.
pub async fn fresh_store() -> (PgStore, String) {
    let url = fresh_url_on(cluster()).await;
    let store = PgStore::connect(&url).await.expect("connect");
    (store, url)
}

/// A lease that is short and retries briefly (for tests of expiry and faults).
pub fn short_lease(owner: &str) -> Lease {
    Lease {
        ttl: Duration::from_secs(2),
        retry_for: Duration::from_secs(20),
        owner: owner.to_owned(),
        takeover_grace: Duration::from_millis(500),
    }
}

/// A TCP relay in front of the test cluster: a process whose connections go through it can be
/// cut off from the database (every connection closed, new ones closed at once) and let back.
pub struct Proxy {
    port: u16,
    cut: tokio::sync::watch::Sender<bool>,
}

impl Proxy {
    /// Relays 127.0.0.1:<a free port> to the cluster.
    pub async fn start() -> Proxy {
        let target = cluster().port();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a proxy port");
        let port = listener.local_addr().expect("its address").port();
        let (cut, _) = tokio::sync::watch::channel(false);
        let cuts = cut.clone();
        tokio::spawn(async move {
            while let Ok((mut down, _)) = listener.accept().await {
                let mut cut = cuts.subscribe();
                if *cut.borrow() {
                    continue;
                }
                tokio::spawn(async move {
                    let Ok(mut up) = tokio::net::TcpStream::connect(("127.0.0.1", target)).await
                    else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut down, &mut up) => {}
                        _ = cut.wait_for(|c| *c) => {}
                    }
                });
            }
        });
        Proxy { port, cut }
    }

    /// `url` (of the cluster) through this relay.
    pub fn url(&self, url: &str) -> String {
        url.replace(
            &format!("127.0.0.1:{}/", cluster().port()),
            &format!("127.0.0.1:{}/", self.port),
        )
    }

    /// Closes every connection through it and refuses new ones.
    pub fn cut(&self) {
        self.cut.send_replace(true);
    }

    /// Lets connections through again.
    pub fn mend(&self) {
        self.cut.send_replace(false);
    }
}

/// A direct client for inspecting or damaging tables.
pub async fn client(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(connection);
    client
}

/// Opens session `id` (workspace `/`) and appends the start of turn 1 to it.
pub async fn opened_with_a_turn(store: &PgStore, id: &str) -> Opened {
    let opened = store.open(id, "/", OpenOptions::new()).await.expect("open");
    opened
        .session
        .append(Event::turn_start(1))
        .await
        .expect("append");
    opened
}

/// Opens (or resumes) session `id` and appends whole turns `turns` (a start and an end each).
pub async fn turns(store: &PgStore, id: &str, turns: std::ops::RangeInclusive<u32>) {
    let s = store.open(id, "/", OpenOptions::new()).await.expect("open");
    for i in turns {
        s.session
            .append(Event::turn_start(i))
            .await
            .expect("append");
        let completed = serde_json::json!({"kind": "completed"});
        s.session
            .append(Event::turn_end(i, dsh_core::Json::from_shallow(completed)))
            .await
            .expect("append");
    }
    s.session.close().await.expect("close");
}
