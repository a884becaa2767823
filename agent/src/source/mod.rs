//! Sources: where snapshots come from. A work tree on disk ([`worktree`]) for the CLI, and git
//! repositories polled by the agent ([`git`]), fetched over HTTPS, SSH or a local path
//! ([`fetch`]) within a network budget ([`relay`]), trusting SSH hosts by [`known_hosts`].

pub mod fetch;
pub mod git;
pub mod github_app;
pub mod known_hosts;
pub mod relay;
pub mod worktree;
