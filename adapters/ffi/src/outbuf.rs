//! One encoded output waiting for a host buffer large enough for it.

/// The encoding of the item most recently taken from a session's queue, kept until the host
/// polls with a buffer that fits (a too-small buffer must not consume the item).
#[derive(Debug, Default)]
pub(crate) struct Pending {
    buf: Vec<u8>,
    ready: bool,
}

impl Pending {
    /// The encoded item: the held one, else the next one `next` encodes into the buffer
    /// (`false`: the queue is empty).
    pub(crate) fn get(&mut self, next: impl FnOnce(&mut Vec<u8>) -> bool) -> Option<&[u8]> {
        if !self.ready {
            self.buf.clear();
            self.ready = next(&mut self.buf);
        }
        self.ready.then_some(self.buf.as_slice())
    }

    /// The host took the item.
    pub(crate) fn consume(&mut self) {
        self.ready = false;
    }

    /// Whether an item is held.
    pub(crate) fn is_ready(&self) -> bool {
        self.ready
    }

    /// Drop the held item (a disconnect drops queued transmits).
    pub(crate) fn clear(&mut self) {
        self.ready = false;
        self.buf.clear();
    }
}
