//! NIP-01 codec.
