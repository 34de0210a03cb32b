//! [`Wire`]: one relay's WebSocket as a driver holds it — the connect in flight, the open
//! socket, frames waiting to be written, a socket finishing its close — turned into the
//! core's socket inputs ([`WireInput`]). Every relay of a driver is held this way (see
//! `relays.rs`); what to do with each input is the core's business.

use std::collections::VecDeque;
use std::task::{Context, Poll};

use tether_core::link::{Epoch, SocketLoss};
use tracing::{info, warn};
use tungstenite::Message;

use crate::io_error::out_of_files;
use crate::runtime::{Addresses, BoxFuture, BoxSocket, WsConnect, WsError};

/// Frames queued for the socket before the driver stops taking commands (the socket is not
/// keeping up with writes; callers wait on the command channel instead).
pub(crate) const OUTGOING_HIGH: usize = 1024;

/// What the socket did, for the core's `handle_*` inputs of the same name.
#[derive(Debug)]
pub(crate) enum WireInput {
    Open,
    Close(SocketLoss),
    Text(String),
    Binary(usize),
    Pong,
}

#[derive(Default)]
pub(crate) struct Wire {
    connecting: Option<BoxFuture<Result<BoxSocket, WsError>>>,
    socket: Option<BoxSocket>,
    /// A socket the core told us to close, finishing its close handshake.
    closing: Option<BoxSocket>,
    outgoing: VecDeque<Message>,
    unflushed: bool,
    /// The socket the core handed out last: every input is tagged with it.
    epoch: Epoch,
}

impl Wire {
    /// Whether writes are so far behind that the caller should stop taking commands.
    pub(crate) fn backed_up(&self) -> bool {
        self.outgoing.len() >= OUTGOING_HIGH
    }

    /// Frames waiting to be written.
    pub(crate) fn outgoing_len(&self) -> usize {
        self.outgoing.len()
    }

    /// Open a new socket for `epoch` at the `addresses` allowed, abandoning any previous one.
    pub(crate) fn open(
        &mut self,
        ws: &dyn WsConnect,
        url: &str,
        max_frame: usize,
        addresses: Addresses,
        epoch: Epoch,
    ) {
        self.drop_socket();
        self.epoch = epoch;
        self.connecting = Some(ws.connect(url, max_frame, addresses));
    }

    /// Queue a frame for the socket.
    pub(crate) fn send(&mut self, message: Message) {
        self.outgoing.push_back(message);
    }

    /// Start closing the socket; frames not yet written are dropped.
    pub(crate) fn close(&mut self) {
        let socket = self.socket.take();
        self.drop_socket();
        self.closing = socket;
    }

    /// Make progress on the connect, the writes and a closing socket, and read one message
    /// when `read`; every socket input goes to `input` with its epoch. Returns whether
    /// anything happened.
    pub(crate) fn poll(
        &mut self,
        cx: &mut Context<'_>,
        read: bool,
        input: &mut dyn FnMut(Epoch, WireInput),
    ) -> bool {
        let mut worked = self.poll_connecting(cx, input);
        worked |= self.poll_write(cx, input);
        self.poll_closing(cx);
        if read {
            worked |= self.poll_read(cx, input);
        }
        worked
    }

    /// Best effort at shutdown: one attempt at the close handshake, then the socket drops.
    pub(crate) fn shut_down(&mut self) {
        if let Some(socket) = self.closing.as_mut() {
            let _ = socket.as_mut().start_send(Message::Close(None));
        }
    }

    fn drop_socket(&mut self) {
        self.connecting = None;
        self.socket = None;
        self.outgoing.clear();
        self.unflushed = false;
    }

    fn poll_connecting(
        &mut self,
        cx: &mut Context<'_>,
        input: &mut dyn FnMut(Epoch, WireInput),
    ) -> bool {
        let Some(connecting) = self.connecting.as_mut() else {
            return false;
        };
        let Poll::Ready(result) = connecting.as_mut().poll(cx) else {
            return false;
        };
        self.connecting = None;
        match result {
            Ok(socket) => {
                info!("socket open");
                self.socket = Some(socket);
                input(self.epoch, WireInput::Open);
            }
            Err(error) => {
                warn!(%error, "connect failed");
                input(self.epoch, WireInput::Close(socket_loss(&error)));
            }
        }
        true
    }

    fn poll_write(
        &mut self,
        cx: &mut Context<'_>,
        input: &mut dyn FnMut(Epoch, WireInput),
    ) -> bool {
        let Some(socket) = self.socket.as_mut() else {
            return false;
        };
        let mut worked = false;
        let mut failed = None;
        while !self.outgoing.is_empty() {
            match socket.as_mut().poll_ready(cx) {
                Poll::Ready(Ok(())) => {}
                Poll::Ready(Err(e)) => {
                    failed = Some(e);
                    break;
                }
                Poll::Pending => break,
            }
            let Some(message) = self.outgoing.pop_front() else {
                break;
            };
            if let Err(e) = socket.as_mut().start_send(message) {
                failed = Some(e);
                break;
            }
            self.unflushed = true;
            worked = true;
        }
        if failed.is_none() && self.unflushed {
            match socket.as_mut().poll_flush(cx) {
                Poll::Ready(Ok(())) => self.unflushed = false,
                Poll::Ready(Err(e)) => failed = Some(e),
                Poll::Pending => {}
            }
        }
        if let Some(error) = failed {
            warn!(%error, "socket failed");
            self.end(input, socket_loss(&error));
            return true;
        }
        worked
    }

    fn poll_closing(&mut self, cx: &mut Context<'_>) {
        let Some(socket) = self.closing.as_mut() else {
            return;
        };
        if socket.as_mut().poll_close(cx).is_ready() {
            self.closing = None;
        }
    }

    fn poll_read(&mut self, cx: &mut Context<'_>, input: &mut dyn FnMut(Epoch, WireInput)) -> bool {
        let Some(socket) = self.socket.as_mut() else {
            return false;
        };
        let Poll::Ready(next) = socket.as_mut().poll_next(cx) else {
            return false;
        };
        let epoch = self.epoch;
        match next {
            Some(Ok(Message::Text(text))) => {
                input(epoch, WireInput::Text(text.as_str().to_owned()))
            }
            Some(Ok(Message::Binary(bytes))) => input(epoch, WireInput::Binary(bytes.len())),
            Some(Ok(Message::Ping(_))) => {
                // tungstenite queued the pong; it goes out with the next flush.
                self.unflushed = true;
                input(epoch, WireInput::Pong);
            }
            Some(Ok(Message::Pong(_))) => input(epoch, WireInput::Pong),
            Some(Ok(Message::Close(frame))) => {
                info!(?frame, "relay closed the socket");
                let code = frame.map(|f| u16::from(f.code));
                self.end(input, SocketLoss::ClosedByPeer { code });
            }
            Some(Ok(Message::Frame(_))) => {}
            Some(Err(error)) => {
                warn!(%error, "socket failed");
                self.end(input, socket_loss(&error));
            }
            None => {
                info!("socket ended");
                self.end(input, SocketLoss::ClosedByPeer { code: None });
            }
        }
        true
    }

    fn end(&mut self, input: &mut dyn FnMut(Epoch, WireInput), why: SocketLoss) {
        self.socket = None;
        self.outgoing.clear();
        self.unflushed = false;
        input(self.epoch, WireInput::Close(why));
    }
}

/// What a WebSocket error says about why the socket is gone: for the application's report
/// only (the core reconnects the same way whatever the cause).
pub(crate) fn socket_loss(error: &WsError) -> SocketLoss {
    use std::io::ErrorKind;
    match error {
        WsError::Io(io) if out_of_files(io) => SocketLoss::OutOfFiles,
        WsError::Io(io) => match io.kind() {
            // PermissionDenied: a firewall's refusal, or a relay list's host that resolves
            // to a private address (`Addresses::admit`): nothing was reached either way.
            ErrorKind::ConnectionRefused
            | ErrorKind::AddrNotAvailable
            | ErrorKind::NotFound
            | ErrorKind::PermissionDenied => SocketLoss::ConnectionRefused,
            // rustls reports a failed handshake as invalid data wrapping its own error; the
            // driver does not link rustls, so the message is what it can go by.
            ErrorKind::InvalidData if io.to_string().contains("certificate") => {
                SocketLoss::TlsRejected
            }
            _ if io.to_string().contains("failed to lookup address") => {
                SocketLoss::ConnectionRefused
            }
            _ => SocketLoss::NetworkError,
        },
        WsError::Tls(_) => SocketLoss::TlsRejected,
        WsError::Capacity(_) => SocketLoss::FrameTooLarge,
        WsError::Url(_) | WsError::Http(_) | WsError::HttpFormat(_) => SocketLoss::HandshakeFailed,
        WsError::ConnectionClosed | WsError::AlreadyClosed => {
            SocketLoss::ClosedByPeer { code: None }
        }
        _ => SocketLoss::NetworkError,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn running_out_of_file_descriptors_is_its_own_loss() {
        for errno in [23, 24] {
            let error = WsError::Io(std::io::Error::from_raw_os_error(errno));
            assert_eq!(socket_loss(&error), SocketLoss::OutOfFiles, "errno {errno}");
        }
        let reset = WsError::Io(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert_eq!(socket_loss(&reset), SocketLoss::NetworkError);
    }

    /// A relay list's host that resolves into the network was never reached: the relay's
    /// failure to connect, which routing counts against it.
    #[test]
    fn a_private_address_refused_is_a_refused_connection() {
        let private = "127.0.0.1:7000".parse().expect("address");
        let refused = crate::runtime::Addresses::Public
            .admit("relay.example", [private])
            .expect_err("refused");
        assert_eq!(
            socket_loss(&WsError::Io(refused)),
            SocketLoss::ConnectionRefused
        );
    }
}
