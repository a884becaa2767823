//! Rendering a commit: the source's analysis cache, patched with the files a commit changed
//! (or the whole snapshot when it cannot be), on the blocking pool; and the per-placement
//! renders of the workflows' fleet.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use analyzer::{AnalysisCache, AnalysisOptions, AppRef, SharedOutput, SourceMap};

use super::{Shared, SourceWorker};
use crate::metrics::ErrorKind;
use crate::source::git::{CommitId, GitSource};

/// A source's analysis cache and the commit it last analysed.
#[derive(Default)]
pub(super) struct SourceCache {
    pub(super) analysis: AnalysisCache,
    pub(super) commit: Option<CommitId>,
}

/// A render of one commit.
pub(super) struct Rendered {
    pub(super) output: Arc<SharedOutput>,
    pub(super) sources: Arc<SourceMap>,
}

impl SourceWorker {
    /// Renders and analyses `commit` with the source's analysis cache, on the blocking pool: an
    /// error (the commit cannot be read, the renderer panicked) is the commit's failure.
    pub(super) async fn render(&self, commit: &CommitId) -> Result<Rendered, String> {
        let definitions = self.shared.definitions.clone();
        // Templates see the cluster's own release as `context.clusterVersion`, as in `plan
        // --kubeconfig`; an unreadable /version keeps the target release (the plan reports it).
        let mut options = AnalysisOptions::with_config(self.shared.analysis.clone());
        if let Ok(version) = crate::observe::cluster_version(&self.shared.cluster).await {
            options.render.cluster_version = version;
        }
        // The source's boundary: violations block their app, visible in previews.
        options.config.boundary = Some(self.config.boundary.clone());
        let started = Instant::now();
        let cache = self.cache.clone();
        let repo = self.git.repo().clone();
        let commit = commit.clone();
        let rendered = tokio::task::spawn_blocking(move || {
            // A panic while holding the lock leaves the cache behind; it is reset below.
            let mut cache = cache
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let cache = &mut *cache;
            // The files changed since the cache's commit; a failed diff reads the whole commit.
            let changes = cache
                .commit
                .as_ref()
                .and_then(|previous| repo.changes(previous, &commit).ok());
            // A panic in the renderer must not take the agent down: it becomes this commit's
            // failure, with a request to report it.
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                // The analysis rules run with the render (issue 8): their errors block the app.
                if let Some(changes) = &changes
                    && let Some(patched) = analyzer::analyze_changes(
                        changes,
                        &definitions,
                        &options,
                        &mut cache.analysis,
                    )
                {
                    return Ok(patched);
                }
                // With the blob ids, unchanged files are recognised without reading their
                // texts.
                let (snapshot, blob_ids) = repo
                    .snapshot_with_ids(&commit)
                    .map_err(|error| format!("reading the commit: {error}"))?;
                Ok(analyzer::analyze_snapshot_shared_with_ids(
                    &snapshot,
                    &blob_ids,
                    &definitions,
                    &options,
                    &mut cache.analysis,
                ))
            }));
            match &result {
                Ok(Ok(_)) => cache.commit = Some(commit),
                // The commit could not be read: the cache is still the last commit's.
                Ok(Err(_)) => {}
                // Interrupted half-way: trust nothing of it.
                Err(_) => *cache = SourceCache::default(),
            }
            (result, cache.analysis.last_run())
        })
        .await;
        self.shared
            .metrics
            .observe_render(&self.config.name, started.elapsed());
        match rendered {
            Ok((Ok(Ok((output, sources))), stats)) => {
                self.shared.metrics.record_render_cache(
                    &self.config.name,
                    stats.reused,
                    stats.analyzed,
                );
                tracing::debug!(
                    reused = stats.reused,
                    analyzed = stats.analyzed,
                    evicted = stats.evicted,
                    "rendered"
                );
                Ok(Rendered {
                    output: Arc::new(output),
                    sources: Arc::new(sources),
                })
            }
            Ok((Ok(Err(message)), _)) => Err(message),
            Ok((Err(_), _)) | Err(_) => {
                self.shared.metrics.record_error(ErrorKind::Render);
                Err(
                    "internal error: the renderer panicked; please report this with the repository"
                        .to_owned(),
                )
            }
        }
    }
}

/// The fleet the workflows of `workflows` deploy to at `commit`, with their renders per
/// placement when some place the app on several clusters (none needed without topology or
/// replication policies). A commit that cannot be read again leaves the placements empty: such
/// apps are refused, not misplaced.
pub(super) async fn fleet_for(
    git: &GitSource,
    shared: &Shared,
    commit: &CommitId,
    workflows: &BTreeMap<AppRef, analyzer::model::Application>,
) -> crate::workflow::Fleet {
    if !crate::workflow::needs_placements(workflows.values()) {
        return shared.fleet.with_placements(BTreeMap::new());
    }
    let snapshot = match git.snapshot(commit.clone()).await {
        Ok(snapshot) => snapshot,
        Err(error) => {
            tracing::warn!(error = %error, "reading the commit for per-placement renders failed");
            return shared.fleet.with_placements(BTreeMap::new());
        }
    };
    let mut options = AnalysisOptions::default().render;
    if let Ok(version) = crate::observe::cluster_version(&shared.cluster).await {
        options.cluster_version = version;
    }
    let definitions = shared.definitions.clone();
    let apps = workflows.clone();
    let placements = tokio::task::spawn_blocking(move || {
        crate::workflow::placements_of(&snapshot, &definitions, &options, &apps)
    })
    .await
    .unwrap_or_default();
    shared.fleet.with_placements(placements)
}
