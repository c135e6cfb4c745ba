//! Connecting: a server (or proxy) that accepts the connection and then says nothing fails the
//! connect within the URL's `connect_timeout` (default 10 s), naming the limit, instead of
//! hanging: the whole start-up is timed, not only the socket.

use std::time::Duration;

use dsh_store_postgres::{PgStore, StoreError};

#[tokio::test]
async fn a_server_that_accepts_and_never_answers_fails_the_connect_within_its_timeout() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let port = listener.local_addr().expect("its address").port();
    // Accepts every connection and keeps it open, answering nothing.
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    let url = format!("postgres://dsh@127.0.0.1:{port}/dsh?connect_timeout=1");
    let outcome = tokio::time::timeout(Duration::from_secs(30), PgStore::connect(&url))
        .await
        .expect("the connect ends on its own");
    match outcome {
        Err(e @ StoreError::ConnectTimeout { after, .. }) => {
            assert_eq!(after, Duration::from_secs(1));
            let said = e.to_string();
            assert!(
                said.contains(&format!(
                    "connect to 127.0.0.1 port {port}: no answer within 1s"
                )) && said.contains("connect_timeout"),
                "{said}"
            );
        }
        Err(e) => panic!("another error: {e}"),
        Ok(_) => panic!("connected to a server that says nothing"),
    }
}
