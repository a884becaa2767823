//! Which apps of a render a deploy or a preview plans: those whose render differs from the
//! deployed revision's, or whose last deploy did not settle, in time proportional to what
//! changed.

use std::sync::Arc;

use analyzer::{PackedApp, SharedOutput};

use super::SourceWorker;
use crate::forge::StatusState;
use crate::sync::{Orphans, SharedApps};

/// What one deploy plans: the apps to plan (a subset of the render) and the orphans to look for.
pub(super) struct Selection {
    pub(super) output: Arc<SharedApps>,
    pub(super) orphans: Orphans,
    /// Apps of the render left out: unchanged since their last successful deploy.
    pub(super) n_unchanged: usize,
    /// Some app of the deployed revision is not in the render (removed from Git).
    pub(super) removed: bool,
}

impl SourceWorker {
    /// The apps of `output` to plan, and whether to look for apps removed from Git. Planned:
    /// apps never deployed by this process, apps whose last result was not a success, apps
    /// with a workflow, and apps whose render (objects, blocking diagnostics, input hash)
    /// differs from the deployed revision's. For a deploy, every app when nothing was deployed
    /// yet; for a preview (`deploy` false), every app that differs from the deployed revision.
    ///
    /// O(changed apps): when both renders hold the same apps, the chunks the render
    /// shares with the deployed one ([`analyzer::Chunked::same_chunk`]) are skipped whole, and
    /// only the apps of other chunks and the apps whose last deploy did not settle are
    /// looked at; otherwise one merge walk over both renders (both sorted by app; an app the
    /// analysis cache reused is the deployed one by pointer). The apps to plan are shared
    /// (`Arc`), not copied: a first deploy plans every app.
    pub(super) fn select(&self, output: &SharedOutput, deploy: bool) -> Selection {
        let empty = analyzer::Chunked::default();
        let previous = self
            .deployed
            .as_ref()
            .map_or(&empty, |deployed| &deployed.output.apps);
        // Whether the app at `index` (in both renders) is left out: deployed as it is now.
        let unchanged = |previous: &PackedApp, app: &Arc<PackedApp>| {
            let kept = !deploy
                || self.records.get(&app.app).is_some_and(|record| {
                    record.state == StatusState::Success && !record.uses_workflow
                });
            kept && (std::ptr::eq(previous, Arc::as_ptr(app)) || !render_changed(previous, app))
        };
        let mut wanted: Vec<Arc<PackedApp>> = Vec::new();
        let mut n_unchanged = 0;
        let mut removed = false;
        let candidates = self.candidates(previous, output, deploy);
        if let Some(candidates) = candidates {
            for index in candidates {
                let (Some(previous), Some(app)) = (previous.get(index), output.apps.get(index))
                else {
                    continue;
                };
                if !unchanged(previous, app) {
                    wanted.push(Arc::clone(app));
                }
            }
            n_unchanged = output.apps.len() - wanted.len();
        } else {
            // Merge walk: `next_previous` is the first deployed app not yet passed.
            let mut next_previous = 0;
            for app in output.apps.iter() {
                while let Some(passed) = previous
                    .get(next_previous)
                    .filter(|passed| passed.app < app.app)
                {
                    tracing::trace!(app = %passed.app, "app left the render");
                    removed = true;
                    next_previous += 1;
                }
                let same_app = previous
                    .get(next_previous)
                    .filter(|previous| previous.app == app.app);
                if same_app.is_some() {
                    next_previous += 1;
                }
                if same_app.is_some_and(|previous| unchanged(previous, app)) {
                    n_unchanged += 1;
                } else {
                    wanted.push(Arc::clone(app));
                }
            }
            removed |= next_previous < previous.len();
        }
        let look_for_orphans = removed || (deploy && (self.gc_pending || self.deployed.is_none()));
        let orphans = if look_for_orphans {
            Orphans::NotIn(output.apps.iter().map(|app| app.app.clone()).collect())
        } else {
            Orphans::Skip
        };
        Selection {
            output: Arc::new(SharedApps {
                apps: wanted,
                diagnostics: output.diagnostics.clone(),
            }),
            orphans,
            n_unchanged,
            removed,
        }
    }

    /// When `output` holds the apps of `previous` at the same indices: the indices of the
    /// apps [`SourceWorker::select`] must look at (sorted), those of chunks the two do not
    /// share and, for a deploy, those whose last deploy did not settle. `None` when the apps
    /// differ (or nothing was deployed).
    fn candidates(
        &self,
        previous: &analyzer::Chunked<Arc<PackedApp>>,
        output: &SharedOutput,
        deploy: bool,
    ) -> Option<Vec<usize>> {
        let len = output.apps.len();
        if previous.len() != len || len == 0 {
            return None;
        }
        let chunk = analyzer::Chunked::<Arc<PackedApp>>::CHUNK;
        let mut candidates = Vec::new();
        for first in (0..len).step_by(chunk) {
            if output.apps.same_chunk(previous, first / chunk) {
                continue;
            }
            for index in first..(first + chunk).min(len) {
                if previous.get(index)?.app != output.apps.get(index)?.app {
                    return None;
                }
                candidates.push(index);
            }
        }
        if deploy {
            for app in &self.unsettled {
                // Not in the render: then it left it, and the apps differ.
                let index = output
                    .apps
                    .binary_search_by(|rendered| rendered.app.cmp(app))
                    .ok()?;
                candidates.push(index);
            }
        }
        candidates.sort_unstable();
        candidates.dedup();
        Some(candidates)
    }
}

/// True when an app's render differs from an earlier one in anything a deploy acts on.
fn render_changed(previous: &PackedApp, new: &PackedApp) -> bool {
    previous.input_hash != new.input_hash
        || previous.is_blocked() != new.is_blocked()
        || previous.objects != new.objects
}
