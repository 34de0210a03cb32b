//! [`FaultProxy`]: a TCP proxy on 127.0.0.1 to put in front of any server (a relay, an SSE
//! endpoint) with four faults: cut each connection after N bytes, blackhole (stop
//! forwarding without closing), refuse new connections, and sever every connection.

use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// A fault-injecting TCP proxy. Stops when dropped.
pub struct FaultProxy {
    addr: SocketAddr,
    shared: Arc<ProxyShared>,
    accept: JoinHandle<()>,
}

/// The proxy's faults.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProxyFaults {
    /// Close each connection once this many bytes went server-to-client on it.
    pub cut_after: Option<u64>,
    /// Forward nothing (either way) while set; connections stay open.
    pub blackhole: bool,
    /// Accept and at once close new connections while set (a server that is down).
    pub refuse: bool,
}

struct ProxyShared {
    upstream: SocketAddr,
    faults: Mutex<ProxyFaults>,
    /// Bumped to sever every connection, and to wake pumps when the faults change.
    generation: watch::Sender<u64>,
    connections: Mutex<u64>,
}

impl FaultProxy {
    /// Listen on 127.0.0.1 (random port) and forward to `upstream`.
    ///
    /// # Errors
    /// When the listener cannot be bound.
    pub async fn start(upstream: SocketAddr) -> io::Result<FaultProxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(ProxyShared {
            upstream,
            faults: Mutex::new(ProxyFaults::default()),
            generation: watch::channel(0).0,
            connections: Mutex::new(0),
        });
        let accept = tokio::spawn(accept_loop(listener, Arc::clone(&shared)));
        Ok(FaultProxy {
            addr,
            shared,
            accept,
        })
    }

    /// The proxy's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Set the faults (they apply to open connections too).
    pub fn set(&self, faults: ProxyFaults) {
        *self.shared.faults.lock().unwrap_or_else(|e| e.into_inner()) = faults;
    }

    /// Close every open connection now.
    pub fn sever_all(&self) {
        self.shared.generation.send_modify(|g| *g += 1);
    }

    /// Connections accepted and forwarded so far (refused ones are not counted).
    pub fn connections(&self) -> u64 {
        *self
            .shared
            .connections
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.sever_all();
    }
}

impl std::fmt::Debug for FaultProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultProxy")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl ProxyShared {
    fn faults(&self) -> ProxyFaults {
        *self.faults.lock().unwrap_or_else(|e| e.into_inner())
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<ProxyShared>) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            continue;
        };
        if shared.faults().refuse {
            drop(client);
            continue;
        }
        *shared.connections.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        tokio::spawn(relay_connection(client, Arc::clone(&shared)));
    }
}

async fn relay_connection(client: TcpStream, shared: Arc<ProxyShared>) {
    let Ok(server) = TcpStream::connect(shared.upstream).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let mut severed = shared.generation.subscribe();
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let up = pump(client_read, server_write, &shared, false);
    let down = pump(server_read, client_write, &shared, true);
    tokio::select! {
        _ = up => {}
        _ = down => {}
        _ = severed.changed() => {}
    }
}

/// Copy `from` to `to` until either ends or a fault says stop. Counts bytes for `cut_after`
/// when `downstream`.
async fn pump<R, W>(mut from: R, mut to: W, shared: &ProxyShared, downstream: bool)
where
    R: AsyncReadExt + Unpin,
    W: AsyncWriteExt + Unpin,
{
    let mut buf = vec![0u8; 16 * 1024];
    let mut total = 0u64;
    loop {
        let Ok(n) = from.read(&mut buf).await else {
            return;
        };
        if n == 0 {
            return;
        }
        let faults = shared.faults();
        if faults.blackhole {
            continue;
        }
        let mut chunk = &buf[..n];
        if downstream {
            if let Some(limit) = faults.cut_after {
                let room = limit.saturating_sub(total);
                chunk = &chunk[..chunk.len().min(room as usize)];
            }
            total += chunk.len() as u64;
        }
        if to.write_all(chunk).await.is_err() {
            return;
        }
        if downstream && faults.cut_after.is_some_and(|limit| total >= limit) {
            return;
        }
    }
}
