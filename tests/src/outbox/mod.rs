//! A seeded synthetic outbox world and the field's relay-routing algorithms scored in it.
//!
//! [`World::generate`] builds relays, the follows' relay lists and where their events really
//! are, calibrated to the nostrability outbox benchmark (github.com/nostrability/outbox).
//! A [`Strategy`] decides which relays to ask for which authors; [`run_sessions`] plays it
//! on simulated time within a connection budget and scores each session; [`baselines`]
//! holds the algorithms clients ship; [`table`] prints them side by side. A new router is
//! scored by implementing [`Strategy`] and adding it to the rows:
//!
//! ```
//! use tether_testkit::outbox::{baselines, run_all, table, World, WorldConfig};
//!
//! let world = World::generate(&WorldConfig::new(1, 50));
//! let mut strategies = baselines::all(1);
//! let rows = run_all(&world, &mut strategies, 20, 2);
//! assert!(table(&rows).contains("greedy set cover"));
//! ```

pub mod baselines;
pub mod fixtures;
mod report;
pub mod router;
mod sample;
mod session;
pub mod shipped;
pub mod world;

pub use report::table;
pub use session::{
    run_all, run_session, run_sessions, Answer, Ask, Change, Score, Strategy, View, EARLY_MS,
    EVENT_BYTES, HORIZON_MS, REQ_AUTHOR_BYTES, REQ_BYTES,
};
pub use world::{Declared, Marker, SimAuthor, SimEvent, SimRelay, World, WorldConfig, WorldStats};
