//! `--state FILE`: what a `tether req` or `tether sse` run keeps across restarts.
//!
//! The file is one JSON object: `{"tether":"state","version":1,"command":"req"|"sse",
//! "targets":[URL...],"subscriptions":[{"filter":JSON,"id":N}...],"checkpoint":{...}}`, the
//! checkpoint being the core's (a relay session's, a pool's or an SSE session's). It is
//! replaced atomically (written beside it, fsynced, renamed, the directory fsynced), so a
//! kill at any instant leaves the previous state or the next, never a torn one.
//!
//! A file that is not a tether state file, does not parse, was written for another command
//! or other relays, or comes from a newer version is refused with exit 2 and left as it is.

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::Failure;

/// The state file format this build writes and the newest it reads.
const VERSION: u32 = 1;

/// A state file on disk.
#[derive(Debug)]
pub(crate) struct StateFile {
    path: PathBuf,
    command: &'static str,
    targets: Vec<String>,
}

/// What a state file held.
#[derive(Debug)]
pub(crate) struct Loaded {
    /// Each remembered subscription: its filter (canonical JSON) and its id in the
    /// checkpoint.
    pub(crate) subscriptions: Vec<(String, u64)>,
    /// The core's checkpoint, as JSON bytes for its `from_json`.
    pub(crate) checkpoint: Vec<u8>,
}

#[derive(Serialize, Deserialize)]
struct Document {
    tether: String,
    version: u32,
    command: String,
    targets: Vec<String>,
    subscriptions: Vec<SavedSub>,
    checkpoint: Box<RawValue>,
}

#[derive(Serialize, Deserialize)]
struct SavedSub {
    filter: String,
    id: u64,
}

/// The header alone, read first so that a newer version is named as such.
#[derive(Deserialize)]
struct Header {
    tether: String,
    version: u32,
}

impl StateFile {
    /// The state file at `path` for `command` (`req` or `sse`) on `targets` (relay URLs, or
    /// the SSE URL).
    pub(crate) fn new(path: PathBuf, command: &'static str, targets: Vec<String>) -> Self {
        StateFile {
            path,
            command,
            targets,
        }
    }

    /// What the file holds, or `None` when there is no file yet.
    ///
    /// # Errors
    /// [`Failure::Usage`] (exit 2) with a one-line reason when the file exists and is not a
    /// state this run can resume from; the file is not touched.
    pub(crate) fn load(&self) -> Result<Option<Loaded>, Failure> {
        let bytes = match fs::read(&self.path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(self.refuse(&format!("cannot read it: {e}"))),
        };
        let header: Header =
            serde_json::from_slice(&bytes).map_err(|_| self.refuse("not a tether state file"))?;
        if header.tether != "state" {
            return Err(self.refuse("not a tether state file"));
        }
        if header.version > VERSION {
            return Err(self.refuse(&format!(
                "written by a newer tether (state version {}, this one reads {VERSION})",
                header.version
            )));
        }
        let doc: Document =
            serde_json::from_slice(&bytes).map_err(|e| self.refuse(&format!("corrupt: {e}")))?;
        if doc.command != self.command {
            return Err(self.refuse(&format!("the state of a `tether {}` run", doc.command)));
        }
        if doc.targets != self.targets {
            return Err(self.refuse(&format!(
                "the state of a run on {}, not {}",
                doc.targets.join(" "),
                self.targets.join(" ")
            )));
        }
        Ok(Some(Loaded {
            subscriptions: doc
                .subscriptions
                .into_iter()
                .map(|s| (s.filter, s.id))
                .collect(),
            checkpoint: doc.checkpoint.get().as_bytes().to_vec(),
        }))
    }

    /// Refuse the file with `why` (exit 2).
    pub(crate) fn refuse(&self, why: &str) -> Failure {
        Failure::Usage(format!("--state {}: {why}", self.path.display()))
    }

    /// [`StateFile::store`] of the subscriptions still served: `keys` (their filters),
    /// `ids` and `ended` are by the command line's filter index.
    pub(crate) fn store_live(
        &self,
        keys: &[String],
        ids: impl IntoIterator<Item = u64>,
        ended: &[bool],
        checkpoint: &[u8],
    ) -> Result<(), String> {
        let subscriptions: Vec<(String, u64)> = keys
            .iter()
            .zip(ids)
            .zip(ended)
            .filter(|(_, &ended)| !ended)
            .map(|((key, id), _)| (key.clone(), id))
            .collect();
        self.store(&subscriptions, checkpoint)
            .map_err(|e| e.to_string())
    }

    /// Replace the file with this state: the core's `checkpoint` (its JSON) and the
    /// subscriptions' filters and ids.
    ///
    /// # Errors
    /// The I/O error, when the file could not be written.
    pub(crate) fn store(
        &self,
        subscriptions: &[(String, u64)],
        checkpoint: &[u8],
    ) -> std::io::Result<()> {
        let checkpoint = std::str::from_utf8(checkpoint)
            .ok()
            .and_then(|text| RawValue::from_string(text.to_owned()).ok())
            .ok_or_else(|| std::io::Error::other("the checkpoint is not JSON"))?;
        let doc = Document {
            tether: "state".into(),
            version: VERSION,
            command: self.command.into(),
            targets: self.targets.clone(),
            subscriptions: subscriptions
                .iter()
                .map(|(filter, id)| SavedSub {
                    filter: filter.clone(),
                    id: *id,
                })
                .collect(),
            checkpoint,
        };
        let bytes = serde_json::to_vec(&doc).map_err(std::io::Error::other)?;
        replace(&self.path, &bytes)
    }
}

/// Write `bytes` beside `path`, fsync, rename over it, fsync the directory.
fn replace(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "state".into());
    let temp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    {
        let mut file = fs::File::create(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
    }
    fs::rename(&temp, path)?;
    // The rename is durable once the directory is; not every platform can open one.
    if let Ok(d) = fs::File::open(&dir) {
        let _ = d.sync_all();
    }
    Ok(())
}
