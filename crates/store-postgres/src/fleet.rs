//! What one store handle shares between all its sessions: a background thread with its own
//! runtime that drives every connection, ONE writer connection that group-commits the appends
//! of every open session and holds their leases, and a small pool of connections for opens,
//! reads and imports.
//!
//! So a process opens `1 + pool size` connections however many sessions it has open (plus one
//! per live tail), not one per session. The thread ends once the store handle and every session
//! opened from it are gone.

use std::sync::Mutex;
use std::sync::mpsc as std_mpsc;

use tokio::runtime::Handle;
use tokio::sync::{Semaphore, SemaphorePermit, mpsc, oneshot};
use tokio_postgres::{Client, Config};

use crate::error::StoreError;
use crate::lease::Lease;
use crate::writer::{Msg, Writer};

/// The store handle's shared connections (see the module docs).
pub(crate) struct Fleet {
    writer: mpsc::UnboundedSender<Msg>,
    pool: Pool,
}

impl Fleet {
    /// Starts the background thread and its writer (which connects when first needed).
    pub(crate) async fn start(
        config: Config,
        lease: Lease,
        pool_size: usize,
    ) -> Result<Fleet, StoreError> {
        let (tx, rx) = mpsc::unbounded_channel();
        let (handle_tx, handle_rx) = oneshot::channel();
        let writer = Writer::new(config.clone(), lease);
        std::thread::Builder::new()
            .name("dsh-store-postgres".to_owned())
            .spawn(move || {
                let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                else {
                    return;
                };
                if handle_tx.send(rt.handle().clone()).is_err() {
                    return;
                }
                rt.block_on(writer.run(rx));
            })
            .map_err(|_| StoreError::Stopped)?;
        let handle = handle_rx.await.map_err(|_| StoreError::Stopped)?;
        Ok(Fleet {
            writer: tx,
            pool: Pool {
                config,
                handle,
                idle: Mutex::new(Vec::new()),
                permits: Semaphore::new(pool_size.max(1)),
            },
        })
    }

    /// A sender to the writer (each session's sink keeps one).
    pub(crate) fn writer(&self) -> mpsc::UnboundedSender<Msg> {
        self.writer.clone()
    }

    /// The backend process id of the writer connection (connecting it if needed): what a lease
    /// taken for this store records, so that it can be taken over at once when that backend is
    /// gone (the process died).
    pub(crate) async fn writer_backend(&self) -> Result<i32, StoreError> {
        let (tx, rx) = oneshot::channel();
        self.writer
            .send(Msg::Backend(tx))
            .map_err(|_| StoreError::Stopped)?;
        rx.await.map_err(|_| StoreError::Stopped)?
    }

    /// Tells the writer that `(id, token)` is held, so that it renews that lease.
    pub(crate) fn hold(&self, id: &str, token: i64) -> Result<(), StoreError> {
        self.writer
            .send(Msg::Hold {
                id: id.to_owned(),
                token,
            })
            .map_err(|_| StoreError::Stopped)
    }

    /// Releases `(id, token)` and waits until that is done (a few seconds at most).
    pub(crate) fn release_blocking(writer: &mpsc::UnboundedSender<Msg>, id: String, token: i64) {
        let (done, wait) = std_mpsc::sync_channel(1);
        if writer.send(Msg::Release { id, token, done }).is_ok() {
            let _ = wait.recv_timeout(std::time::Duration::from_secs(5));
        }
    }

    /// A pooled connection (waits while every one is in use).
    pub(crate) async fn client(&self) -> Result<Pooled<'_>, StoreError> {
        self.pool.get().await
    }
}

/// The pooled connections, driven on the background runtime.
struct Pool {
    config: Config,
    handle: Handle,
    idle: Mutex<Vec<Client>>,
    permits: Semaphore,
}

impl Pool {
    async fn get(&self) -> Result<Pooled<'_>, StoreError> {
        let permit = self
            .permits
            .acquire()
            .await
            .map_err(|_| StoreError::Stopped)?;
        let idle = loop {
            let next = self.idle.lock().map_or(None, |mut idle| idle.pop());
            match next {
                Some(c) if c.is_closed() => continue,
                other => break other,
            }
        };
        let client = match idle {
            Some(c) => c,
            None => connect_on(&self.handle, &self.config).await?,
        };
        Ok(Pooled {
            client: Some(client),
            pool: self,
            _permit: permit,
        })
    }
}

/// A connection lent by the pool; it goes back when dropped (unless it is closed).
pub(crate) struct Pooled<'a> {
    client: Option<Client>,
    pool: &'a Pool,
    _permit: SemaphorePermit<'a>,
}

impl Pooled<'_> {
    /// The connection.
    pub(crate) fn get(&mut self) -> Result<&mut Client, StoreError> {
        self.client.as_mut().ok_or(StoreError::Stopped)
    }
}

impl Drop for Pooled<'_> {
    fn drop(&mut self) {
        if let Some(c) = self.client.take()
            && !c.is_closed()
            && let Ok(mut idle) = self.pool.idle.lock()
        {
            idle.push(c);
        }
    }
}

/// Connects on `handle`'s runtime (which then drives the connection).
async fn connect_on(handle: &Handle, config: &Config) -> Result<Client, StoreError> {
    let config = config.clone();
    handle
        .spawn(async move { crate::writer::connect(&config).await })
        .await
        .map_err(|_| StoreError::Stopped)?
}
