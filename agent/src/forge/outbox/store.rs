//! The outbox's queue on disk: one JSON file in the cache directory, replaced atomically
//! (written beside it, then renamed), so a restart or a crash finds every status and comment
//! that was not delivered yet. A file that cannot be read is set aside (`.corrupt`) and the
//! outbox starts empty: losing a queue is better than never starting.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::ForgeOp;
use crate::config::RepoSlug;
use crate::forge::{CommitStatus, StatusState};
use crate::source::git::CommitId;

const VERSION: u32 = 1;

/// The outbox file.
#[derive(Debug)]
pub(super) struct Store {
    path: PathBuf,
}

#[derive(Serialize, Deserialize)]
struct WireQueue {
    version: u32,
    operations: Vec<WireOp>,
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
enum WireOp {
    #[serde(rename_all = "camelCase")]
    Status {
        repo: String,
        commit: String,
        context: String,
        state: String,
        description: String,
        target_url: Option<String>,
    },
    #[serde(rename_all = "camelCase")]
    Comment {
        repo: String,
        pull: u64,
        marker: String,
        body: String,
    },
    #[serde(rename_all = "camelCase")]
    Issue {
        repo: String,
        marker: String,
        title: String,
        body: Option<String>,
    },
}

impl Store {
    pub(super) fn new(path: PathBuf) -> Store {
        Store { path }
    }

    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// The operations saved by the last run, oldest first; none when there is no file.
    pub(super) fn load(&self) -> Vec<ForgeOp> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
            Err(error) => {
                tracing::error!(path = %self.path.display(), error = %error, "cannot read the forge outbox; starting with an empty one");
                return Vec::new();
            }
        };
        match parse(&text) {
            Ok(operations) => operations,
            Err(message) => {
                let aside = self.path.with_extension("json.corrupt");
                let _ = std::fs::rename(&self.path, &aside);
                tracing::error!(path = %self.path.display(), moved_to = %aside.display(), error = %message, "the forge outbox file is unreadable; set aside, starting with an empty one");
                Vec::new()
            }
        }
    }

    /// Replaces the file with `operations`. A failure is logged: the queue stays in memory
    /// and the next save tries again.
    pub(super) fn save<'a>(&self, operations: impl Iterator<Item = &'a ForgeOp>) {
        let queue = WireQueue {
            version: VERSION,
            operations: operations.map(wire).collect(),
        };
        if let Err(error) = self.write(&queue) {
            tracing::warn!(path = %self.path.display(), error = %error, "saving the forge outbox failed; it is kept in memory");
        }
    }

    fn write(&self, queue: &WireQueue) -> std::io::Result<()> {
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let text = serde_json::to_vec(queue).map_err(std::io::Error::other)?;
        let temporary = self.path.with_extension("json.tmp");
        std::fs::write(&temporary, text)?;
        std::fs::rename(&temporary, &self.path)
    }
}

/// Parses an outbox file; an operation with an unknown state, repository or commit is
/// skipped (with a warning), anything else wrong fails the file.
pub(super) fn parse(text: &str) -> Result<Vec<ForgeOp>, String> {
    let queue: WireQueue = serde_json::from_str(text).map_err(|error| error.to_string())?;
    if queue.version != VERSION {
        return Err(format!(
            "version {} (this agent reads {VERSION})",
            queue.version
        ));
    }
    Ok(queue
        .operations
        .into_iter()
        .filter_map(|op| {
            let parsed = from_wire(op);
            if parsed.is_none() {
                tracing::warn!("skipping an unreadable operation of the forge outbox");
            }
            parsed
        })
        .collect())
}

fn wire(op: &ForgeOp) -> WireOp {
    match op {
        ForgeOp::Status {
            repo,
            commit,
            status,
        } => WireOp::Status {
            repo: repo.to_string(),
            commit: commit.as_str().to_owned(),
            context: status.context.clone(),
            state: status.state.as_str().to_owned(),
            description: status.description.clone(),
            target_url: status.target_url.clone(),
        },
        ForgeOp::Comment {
            repo,
            pull,
            marker,
            body,
        } => WireOp::Comment {
            repo: repo.to_string(),
            pull: *pull,
            marker: marker.clone(),
            body: body.clone(),
        },
        ForgeOp::Issue {
            repo,
            marker,
            title,
            body,
        } => WireOp::Issue {
            repo: repo.to_string(),
            marker: marker.clone(),
            title: title.clone(),
            body: body.clone(),
        },
    }
}

fn from_wire(op: WireOp) -> Option<ForgeOp> {
    Some(match op {
        WireOp::Status {
            repo,
            commit,
            context,
            state,
            description,
            target_url,
        } => ForgeOp::Status {
            repo: RepoSlug::parse(&repo)?,
            commit: CommitId::parse(&commit)?,
            status: CommitStatus::new(context, state_of(&state)?, &description, target_url),
        },
        WireOp::Comment {
            repo,
            pull,
            marker,
            body,
        } => ForgeOp::Comment {
            repo: RepoSlug::parse(&repo)?,
            pull,
            marker,
            body,
        },
        WireOp::Issue {
            repo,
            marker,
            title,
            body,
        } => ForgeOp::Issue {
            repo: RepoSlug::parse(&repo)?,
            marker,
            title,
            body,
        },
    })
}

fn state_of(text: &str) -> Option<StatusState> {
    [
        StatusState::Pending,
        StatusState::Success,
        StatusState::Failure,
        StatusState::Error,
    ]
    .into_iter()
    .find(|state| state.as_str() == text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ops() -> Vec<ForgeOp> {
        vec![
            ForgeOp::Status {
                repo: RepoSlug::parse("o/r").unwrap(),
                commit: CommitId::parse(&"a".repeat(40)).unwrap(),
                status: CommitStatus::new(
                    "driftless/ns/app",
                    StatusState::Failure,
                    "1 app blocked",
                    Some("http://agent/plans/aaa".to_owned()),
                ),
            },
            ForgeOp::Comment {
                repo: RepoSlug::parse("o/r").unwrap(),
                pull: 7,
                marker: "<!-- m -->".to_owned(),
                body: "plan\nwith lines".to_owned(),
            },
        ]
    }

    #[test]
    fn saves_and_loads_every_operation() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path().join("cache/forge-outbox.json"));
        assert!(store.load().is_empty(), "no file: an empty queue");
        store.save(ops().iter());
        assert_eq!(store.load(), ops());
        store.save([].iter());
        assert!(store.load().is_empty());
    }

    #[test]
    fn an_unreadable_file_is_set_aside() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("forge-outbox.json");
        std::fs::write(&path, "{not json").unwrap();
        let store = Store::new(path.clone());
        assert!(store.load().is_empty());
        assert!(!path.exists());
        assert!(dir.path().join("forge-outbox.json.corrupt").exists());
    }

    #[test]
    fn unknown_states_are_skipped_not_guessed() {
        let text = format!(
            r#"{{"version":1,"operations":[{{"kind":"status","repo":"o/r","commit":"{}","context":"c","state":"exploded","description":"","targetUrl":null}}]}}"#,
            "b".repeat(40)
        );
        assert_eq!(parse(&text), Ok(Vec::new()));
        assert!(parse(r#"{"version":2,"operations":[]}"#).is_err());
    }
}
