//! Which apps of a render a deploy or a preview plans: those whose render differs from the
//! deployed revision's, or whose last deploy did not settle, in time proportional to what
//! changed.

use std::sync::Arc;

use analyzer::{AppRender, CachedApp, SharedOutput};

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
    /// O(changed apps): when both renders hold the same apps, the apps the render shares with
    /// the deployed one ([`SharedOutput::unshared`]) are skipped whole, and only the others and
    /// the apps whose last deploy did not settle are looked at; otherwise one merge walk over
    /// both renders (both sorted by app; an app the analysis cache reused is the deployed one
    /// by pointer). The apps to plan are shared with the cache, not copied: a first deploy
    /// plans every app.
    pub(super) fn select(&self, output: &SharedOutput, deploy: bool) -> Selection {
        let empty = SharedOutput::default();
        let previous = self
            .deployed
            .as_ref()
            .map_or(&empty, |deployed| &*deployed.output);
        // Whether an app (in both renders) is left out: deployed as it is now.
        let unchanged = |previous: &CachedApp, app: &CachedApp| {
            let kept = !deploy
                || self.records.get(app.app()).is_some_and(|record| {
                    record.state == StatusState::Success && !record.uses_workflow
                });
            kept && previous.same_render(app)
        };
        let mut wanted: Vec<CachedApp> = Vec::new();
        let mut n_unchanged = 0;
        let mut removed = false;
        let candidates = self.candidates(previous, output, deploy);
        if let Some(candidates) = candidates {
            for index in candidates {
                let (Some(previous), Some(app)) = (previous.get(index), output.get(index)) else {
                    continue;
                };
                if !unchanged(&previous, &app) {
                    wanted.push(app);
                }
            }
            n_unchanged = output.len() - wanted.len();
        } else {
            // Merge walk: `previous_apps` starts at the first deployed app not yet passed.
            let mut previous_apps = previous.apps().peekable();
            for app in output.apps() {
                while let Some(passed) = previous_apps.next_if(|passed| passed.app() < app.app()) {
                    tracing::trace!(app = %passed.app(), "app left the render");
                    removed = true;
                }
                let same_app = previous_apps.next_if(|previous| previous.app() == app.app());
                if same_app.is_some_and(|previous| unchanged(&previous, &app)) {
                    n_unchanged += 1;
                } else {
                    wanted.push(app);
                }
            }
            removed |= previous_apps.next().is_some();
        }
        let look_for_orphans = removed || (deploy && (self.gc_pending || self.deployed.is_none()));
        let orphans = if look_for_orphans {
            Orphans::NotIn(output.app_refs().cloned().collect())
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
    /// apps [`SourceWorker::select`] must look at (sorted), those the two do not share and,
    /// for a deploy, those whose last deploy did not settle. `None` when the apps differ (or
    /// nothing was deployed).
    fn candidates(
        &self,
        previous: &SharedOutput,
        output: &SharedOutput,
        deploy: bool,
    ) -> Option<Vec<usize>> {
        let mut candidates = output.unshared(previous)?;
        if deploy {
            for app in &self.unsettled {
                // Not in the render: then it left it, and the apps differ.
                candidates.push(output.position(app)?);
            }
        }
        candidates.sort_unstable();
        candidates.dedup();
        Some(candidates)
    }
}
