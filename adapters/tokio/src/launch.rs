//! What tokio brings to start a driver, as in tether-async-std's `spawn.rs`.

use std::sync::Arc;

use tether_driver::launch::Launch;
use tether_driver::tls::SocketTls;
use tether_driver::{BoxFuture, ConnectError, HttpConnect, WsConnect};

use crate::http::ReqwestHttp;
use crate::runtime::TokioRuntime;
use crate::ws::TokioWs;

/// What tokio brings to start a driver: [`TokioRuntime`], tokio-tungstenite sockets, reqwest
/// for NIP-11 documents, and `tokio::spawn` (so starting one panics outside a tokio runtime).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tokio;

impl Launch for Tokio {
    type Runtime = TokioRuntime;

    fn runtime(&self) -> TokioRuntime {
        TokioRuntime::new()
    }

    fn ws(&self, tls: SocketTls) -> Arc<dyn WsConnect> {
        TokioWs::new(tls)
    }

    fn http(&self) -> Result<Arc<dyn HttpConnect>, ConnectError> {
        Ok(Arc::new(ReqwestHttp::default_client()?))
    }

    fn spawn(&self, task: BoxFuture<()>) {
        tokio::spawn(task);
    }
}
