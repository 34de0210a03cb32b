//! Refusal reasons.
