//! What an analysis outputs: [`SharedOutput`], whose apps are shared with the cache that made
//! them (opaque: read through [`CachedApp`] and the output's accessors), and the crate's
//! [`Analysis`], in either form of objects.

use std::sync::Arc;

use super::Chunked;
use crate::packed::ConvertForm;
use crate::{
    AppRef, CachedApp, Diagnostic, ObjectsForm, PackedApp, PackedObjects, RenderOutput, RenderedApp,
};

/// A [`RenderOutput`] whose apps are shared with an [`AnalysisCache`] ([`CachedApp`]: their
/// objects are compact JSON text, as the cache keeps them). Consecutive outputs of one cache
/// share what did not change: [`SharedOutput::unshared`] finds what may have, in O(change).
#[derive(Debug, Clone, Default)]
pub struct SharedOutput {
    /// One entry per Application found, sorted by [`AppRef`]; in chunks, so that an output
    /// differing from the last in one app shares the others' chunks with it.
    pub(crate) apps: Chunked<Arc<PackedApp>>,
    /// Diagnostics not tied to one app.
    pub diagnostics: Vec<Diagnostic>,
}

impl SharedOutput {
    /// The number of apps.
    pub fn len(&self) -> usize {
        self.apps.len()
    }

    /// True when the output holds no app.
    pub fn is_empty(&self) -> bool {
        self.apps.is_empty()
    }

    /// The app at `index` (in [`AppRef`] order).
    pub fn get(&self, index: usize) -> Option<CachedApp> {
        self.apps.get(index).map(CachedApp::shared)
    }

    /// Every app, in [`AppRef`] order.
    pub fn apps(&self) -> impl DoubleEndedIterator<Item = CachedApp> + '_ {
        self.apps.iter().map(CachedApp::shared)
    }

    /// Every app's identity, in order.
    pub fn app_refs(&self) -> impl DoubleEndedIterator<Item = &AppRef> + '_ {
        self.apps.iter().map(|app| &app.app)
    }

    /// The index of `app`, when the output holds it (a binary search).
    pub fn position(&self, app: &AppRef) -> Option<usize> {
        self.apps
            .binary_search_by(|rendered| rendered.app.cmp(app))
            .ok()
    }

    /// The number of objects every app renders.
    pub fn object_count(&self) -> usize {
        self.apps.iter().map(|app| app.objects.len()).sum()
    }

    /// Every app's diagnostics, in app order.
    pub fn app_diagnostics(&self) -> impl Iterator<Item = &Diagnostic> + '_ {
        self.apps.iter().flat_map(|app| &app.diagnostics)
    }

    /// When this output holds the apps of `previous` at the same indices: the indices (sorted)
    /// of the apps whose render may differ, those of the chunks the two outputs do not share
    /// (an app the cache reused is shared without being looked at). `None` when the apps
    /// differ, or when either output is empty.
    pub fn unshared(&self, previous: &SharedOutput) -> Option<Vec<usize>> {
        let len = self.apps.len();
        if previous.apps.len() != len || len == 0 {
            return None;
        }
        let chunk = Chunked::<Arc<PackedApp>>::CHUNK;
        let mut unshared = Vec::new();
        for first in (0..len).step_by(chunk) {
            if self.apps.same_chunk(&previous.apps, first / chunk) {
                continue;
            }
            for index in first..(first + chunk).min(len) {
                if previous.apps.get(index)?.app != self.apps.get(index)?.app {
                    return None;
                }
                unshared.push(index);
            }
        }
        Some(unshared)
    }

    /// The output as a [`RenderOutput`] (objects as values), copying only the apps still
    /// shared.
    pub fn into_output(self) -> RenderOutput {
        Analysis {
            apps: self.apps,
            diagnostics: self.diagnostics,
        }
        .into_output()
    }
}

/// What an analysis outputs, its objects in the form `O` ([`Form`]).
#[derive(Debug)]
pub(crate) struct Analysis<O> {
    pub(crate) apps: Chunked<Arc<RenderedApp<O>>>,
    pub(crate) diagnostics: Vec<Diagnostic>,
}

impl<O: ObjectsForm> Analysis<O> {
    /// The output as a [`RenderOutput`] (objects as values), copying only the apps still
    /// shared.
    pub(crate) fn into_output(self) -> RenderOutput {
        RenderOutput {
            apps: self
                .apps
                .into_vec()
                .into_iter()
                .map(|app| Arc::unwrap_or_clone(app).into_form())
                .collect(),
            diagnostics: self.diagnostics,
        }
    }
}

impl From<Analysis<PackedObjects>> for SharedOutput {
    fn from(analysis: Analysis<PackedObjects>) -> SharedOutput {
        SharedOutput {
            apps: analysis.apps,
            diagnostics: analysis.diagnostics,
        }
    }
}
