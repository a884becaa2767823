//! The fleet as the web UI shows it: one [`AppView`] per app the agent has planned, kept up to
//! date by the agent loop (deploys, drift checks, previews) and read by the UI's handlers.
//!
//! It holds plain data only, already fit to show: plan diffs are masked where they are made
//! (`agent::redact`), and nothing else here carries object values. It reads no clock and no
//! cluster: callers pass times in. Memory is bounded: a few kilobytes of plan text and
//! [`HISTORY_LEN`] deploys per app.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use analyzer::AppRef;
use tokio::sync::watch;

use crate::forge::StatusState;
use crate::health::HealthStatus;
use crate::plan::{Action, AppPlan, ObjectRef};
use crate::workflow::WorkflowState;

/// Deploys remembered per app.
pub const HISTORY_LEN: usize = 20;
/// Bytes of plan text (diffs) kept per app; longer plans are cut with a note.
pub const PLAN_TEXT_LIMIT: usize = 24 << 10;

/// Whether the cluster matches Git for an app, as the UI names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SyncState {
    /// Planned, nothing applied yet.
    Pending,
    InSync,
    /// A drift check found the live objects differ from the deployed revision.
    Drifted,
    /// The app's render or analysis has an error: nothing of it is applied.
    Blocked,
    /// Waiting for a person: a held plan or prune, a suspended workflow step or a rollout
    /// batch waiting for approval.
    Held,
    /// The apply (or a workflow step) failed.
    Failed,
}

impl SyncState {
    pub const ALL: [SyncState; 6] = [
        SyncState::Pending,
        SyncState::InSync,
        SyncState::Drifted,
        SyncState::Blocked,
        SyncState::Held,
        SyncState::Failed,
    ];

    /// The word the UI shows and filters by.
    pub fn as_str(self) -> &'static str {
        match self {
            SyncState::Pending => "pending",
            SyncState::InSync => "in sync",
            SyncState::Drifted => "drifted",
            SyncState::Blocked => "blocked",
            SyncState::Held => "held",
            SyncState::Failed => "failed",
        }
    }

    /// A CSS class and URL value: the word without spaces.
    pub fn slug(self) -> &'static str {
        match self {
            SyncState::InSync => "in-sync",
            other => other.as_str(),
        }
    }

    pub fn from_slug(slug: &str) -> Option<SyncState> {
        SyncState::ALL
            .into_iter()
            .find(|state| state.slug() == slug)
    }
}

/// One object of an app as its render made it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeObject {
    pub component: String,
    /// `None` for the component's workload.
    pub trait_type: Option<String>,
    pub cluster: String,
    pub object: ObjectRef,
}

/// One change of the last plan, with its masked diff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedChange {
    pub action: Action,
    pub cluster: String,
    pub object: ObjectRef,
    pub diff: String,
    pub reason: Option<String>,
}

/// The last plan made for an app.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanView {
    pub commit: String,
    /// `deploy`, `drift check`.
    pub purpose: &'static str,
    pub changes: Vec<PlannedChange>,
    /// Errors and warnings of the render and the plan, `warning[rule]: message`.
    pub diagnostics: Vec<String>,
    /// The diffs were cut at [`PLAN_TEXT_LIMIT`].
    pub truncated: bool,
}

/// A commit as the UI names it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CommitInfo {
    pub id: String,
    pub author: String,
    /// The first line of the message.
    pub summary: String,
}

/// One deploy of an app.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeployRecord {
    pub commit: CommitInfo,
    pub finished_at: SystemTime,
    pub duration: Duration,
    pub result: StatusState,
    pub message: String,
}

/// An open pull request whose preview changes an app.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullPreview {
    pub number: u64,
    pub commit: String,
    pub summary: String,
}

/// Everything the UI shows of one app.
#[derive(Debug, Clone, PartialEq)]
pub struct AppView {
    pub app: AppRef,
    pub source: String,
    pub clusters: Vec<String>,
    pub health: Option<HealthStatus>,
    pub health_message: String,
    pub sync: SyncState,
    /// Why the app is in its state (the status description).
    pub message: String,
    pub commit: Option<CommitInfo>,
    /// When the last apply finished, and how long its deploy took.
    pub last_apply: Option<(SystemTime, Duration)>,
    /// From the commit to its objects live, when known.
    pub commit_to_live: Option<Duration>,
    pub plan: Option<PlanView>,
    pub objects: Vec<TreeObject>,
    pub workflow: Option<WorkflowState>,
    pub history: VecDeque<DeployRecord>,
    pub previews: Vec<PullPreview>,
}

impl AppView {
    fn new(app: AppRef, source: &str) -> AppView {
        AppView {
            app,
            source: source.to_owned(),
            clusters: Vec::new(),
            health: None,
            health_message: String::new(),
            sync: SyncState::Pending,
            message: String::new(),
            commit: None,
            last_apply: None,
            commit_to_live: None,
            plan: None,
            objects: Vec::new(),
            workflow: None,
            history: VecDeque::new(),
            previews: Vec::new(),
        }
    }
}

/// How a source's commits and pull requests are linked on its forge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForgeLinks {
    /// The repository's web page, `https://gitea.example.com/team/gitops`.
    pub repository: String,
    pub kind: crate::config::ForgeKind,
}

impl ForgeLinks {
    pub fn commit(&self, commit: &str) -> String {
        match self.kind {
            crate::config::ForgeKind::Gitlab => format!("{}/-/commit/{commit}", self.repository),
            _ => format!("{}/commit/{commit}", self.repository),
        }
    }

    pub fn pull(&self, number: u64) -> String {
        match self.kind {
            crate::config::ForgeKind::Gitlab => {
                format!("{}/-/merge_requests/{number}", self.repository)
            }
            crate::config::ForgeKind::Github => format!("{}/pull/{number}", self.repository),
            crate::config::ForgeKind::Gitea => format!("{}/pulls/{number}", self.repository),
        }
    }
}

/// A filter of the apps list; empty fields match everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AppFilter {
    pub source: String,
    pub namespace: String,
    /// `healthy`, `progressing`, `degraded`, `unknown`, or `none` (nothing rates the app).
    pub health: String,
    pub sync: Option<SyncState>,
    /// A substring of `namespace/name`, any case.
    pub search: String,
}

impl AppFilter {
    fn matches(&self, view: &AppView) -> bool {
        (self.source.is_empty() || view.source == self.source)
            && (self.namespace.is_empty() || view.app.namespace == self.namespace)
            && (self.health.is_empty()
                || view.health.map_or("none", HealthStatus::as_str) == self.health)
            && self.sync.is_none_or(|sync| view.sync == sync)
            && (self.search.is_empty() || contains_ignoring_case(&view.app, &self.search))
    }
}

fn contains_ignoring_case(app: &AppRef, needle: &str) -> bool {
    let needle = needle.to_ascii_lowercase();
    let (namespace, name) = match needle.split_once('/') {
        Some((namespace, name)) => (Some(namespace), name),
        None => (None, needle.as_str()),
    };
    let name_matches = app.name.to_ascii_lowercase().contains(name);
    match namespace {
        Some(namespace) => app.namespace.to_ascii_lowercase().ends_with(namespace) && name_matches,
        None => name_matches || app.namespace.to_ascii_lowercase().contains(&needle),
    }
}

/// One page of the filtered apps, and what the filters can choose from.
#[derive(Debug, Clone)]
pub struct AppPage {
    pub rows: Vec<Arc<AppView>>,
    /// Apps matching the filter, all pages.
    pub matching: usize,
    pub total: usize,
    pub sources: Vec<String>,
    pub namespaces: Vec<String>,
    /// Apps per sync state, of all apps.
    pub by_state: BTreeMap<SyncState, usize>,
}

#[derive(Default)]
struct Inner {
    apps: BTreeMap<AppRef, Arc<AppView>>,
    links: BTreeMap<String, ForgeLinks>,
    /// Apps per namespace and per source, for the filters' choices.
    namespaces: BTreeMap<String, usize>,
    sources: BTreeMap<String, usize>,
}

/// The fleet state, shared by the loop (writer) and the server (reader). Cheap to clone.
#[derive(Clone)]
pub struct FleetState {
    inner: Arc<RwLock<Inner>>,
    /// Bumped on every change: the UI's event stream waits on it.
    version: watch::Sender<u64>,
}

impl Default for FleetState {
    fn default() -> FleetState {
        FleetState {
            inner: Arc::default(),
            version: watch::channel(0).0,
        }
    }
}

impl std::fmt::Debug for FleetState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FleetState")
            .field("version", &*self.version.borrow())
            .finish_non_exhaustive()
    }
}

impl FleetState {
    /// Wakes on every change.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.version.subscribe()
    }

    /// How a source's commits link to its forge.
    pub fn set_links(&self, source: &str, links: ForgeLinks) {
        self.write().links.insert(source.to_owned(), links);
    }

    pub fn links(&self, source: &str) -> Option<ForgeLinks> {
        self.read().links.get(source).cloned()
    }

    /// Calls `visit` with every app's view, in namespace and name order (for the metrics).
    pub fn for_each_app(&self, mut visit: impl FnMut(&AppView)) {
        for view in self.read().apps.values() {
            visit(view);
        }
    }

    /// One app's view.
    pub fn app(&self, app: &AppRef) -> Option<Arc<AppView>> {
        self.read().apps.get(app).cloned()
    }

    /// The apps matching `filter`, sorted by namespace and name, `page_size` from `page`
    /// (0-based) on.
    pub fn page(&self, filter: &AppFilter, page: usize, page_size: usize) -> AppPage {
        let inner = self.read();
        let mut rows = Vec::with_capacity(page_size);
        let mut matching = 0;
        let mut by_state = BTreeMap::new();
        let first = page.saturating_mul(page_size);
        for view in inner.apps.values() {
            *by_state.entry(view.sync).or_insert(0) += 1;
            if filter.matches(view) {
                if matching >= first && rows.len() < page_size {
                    rows.push(Arc::clone(view));
                }
                matching += 1;
            }
        }
        AppPage {
            rows,
            matching,
            total: inner.apps.len(),
            sources: inner.sources.keys().cloned().collect(),
            namespaces: inner.namespaces.keys().cloned().collect(),
            by_state,
        }
    }

    /// Changes one app (created when new) and wakes the event stream.
    pub fn update(&self, app: &AppRef, source: &str, change: impl FnOnce(&mut AppView)) {
        {
            let mut inner = self.write();
            let inner = &mut *inner;
            let entry = match inner.apps.get_mut(app) {
                Some(entry) => entry,
                None => {
                    *inner.namespaces.entry(app.namespace.clone()).or_insert(0) += 1;
                    *inner.sources.entry(source.to_owned()).or_insert(0) += 1;
                    inner
                        .apps
                        .entry(app.clone())
                        .or_insert_with(|| Arc::new(AppView::new(app.clone(), source)))
                }
            };
            change(Arc::make_mut(entry));
        }
        self.version.send_modify(|version| *version += 1);
    }

    /// Changes every app `wanted` selects (one event for all).
    pub fn update_where(&self, wanted: impl Fn(&AppView) -> bool, change: impl Fn(&mut AppView)) {
        {
            let mut inner = self.write();
            for entry in inner.apps.values_mut() {
                if wanted(entry) {
                    change(Arc::make_mut(entry));
                }
            }
        }
        self.version.send_modify(|version| *version += 1);
    }

    /// Forgets an app (removed from Git and deleted).
    pub fn remove(&self, app: &AppRef) {
        {
            let mut inner = self.write();
            let inner = &mut *inner;
            let Some(view) = inner.apps.remove(app) else {
                return;
            };
            for (map, key) in [
                (&mut inner.namespaces, &view.app.namespace),
                (&mut inner.sources, &view.source),
            ] {
                if let Some(count) = map.get_mut(key) {
                    *count -= 1;
                    if *count == 0 {
                        map.remove(key);
                    }
                }
            }
        }
        self.version.send_modify(|version| *version += 1);
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Inner> {
        // A panic while holding the lock left plain data behind; it is still usable.
        self.inner
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Inner> {
        self.inner
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The plan of one app as the UI keeps it: masked diffs (the plan's own), cut at
/// [`PLAN_TEXT_LIMIT`].
pub fn plan_view(app_plan: &AppPlan, commit: &str, purpose: &'static str) -> PlanView {
    let mut budget = PLAN_TEXT_LIMIT;
    let mut truncated = false;
    let changes = app_plan
        .changes
        .iter()
        .filter(|change| change.action != Action::Unchanged)
        .map(|change| {
            let diff = if change.diff.len() <= budget {
                budget -= change.diff.len();
                change.diff.clone()
            } else {
                truncated = true;
                budget = 0;
                String::new()
            };
            PlannedChange {
                action: change.action,
                cluster: change.cluster.clone(),
                object: change.object.clone(),
                diff,
                reason: change.reason.clone(),
            }
        })
        .collect();
    PlanView {
        commit: commit.to_owned(),
        purpose,
        changes,
        diagnostics: app_plan
            .diagnostics
            .iter()
            .map(|diagnostic| {
                let severity = match diagnostic.severity {
                    analyzer::Severity::Error => "error",
                    _ => "warning",
                };
                format!("{severity}[{}]: {}", diagnostic.rule, diagnostic.message)
            })
            .collect(),
        truncated,
    }
}

impl AppView {
    /// Takes the health of a live plan (the plan's observation of the cluster).
    pub fn take_health(&mut self, app_plan: &AppPlan) {
        match &app_plan.health {
            Some(health) => {
                self.health = Some(health.health.status);
                self.health_message = health.health.message.clone();
            }
            None => {
                self.health = None;
                self.health_message.clear();
            }
        }
    }

    /// Records a finished deploy of the app, newest first in the history.
    pub fn push_history(&mut self, record: DeployRecord) {
        self.history.push_front(record);
        self.history.truncate(HISTORY_LEN);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app(namespace: &str, name: &str) -> AppRef {
        AppRef {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    fn fleet_of(n: usize) -> FleetState {
        let fleet = FleetState::default();
        for index in 0..n {
            let source = if index % 2 == 0 { "even" } else { "odd" };
            fleet.update(
                &app(&format!("team-{}", index % 3), &format!("app-{index:05}")),
                source,
                |view| {
                    view.sync = if index % 5 == 0 {
                        SyncState::Drifted
                    } else {
                        SyncState::InSync
                    };
                    view.health = Some(HealthStatus::Healthy);
                },
            );
        }
        fleet
    }

    #[test]
    fn filters_run_on_every_app_and_pages_cut_the_matches() {
        let fleet = fleet_of(100);
        let all = fleet.page(&AppFilter::default(), 0, 30);
        assert_eq!((all.rows.len(), all.matching, all.total), (30, 100, 100));
        assert_eq!(all.sources, ["even", "odd"]);
        assert_eq!(all.namespaces, ["team-0", "team-1", "team-2"]);
        assert_eq!(all.by_state[&SyncState::Drifted], 20);

        let drifted = AppFilter {
            sync: Some(SyncState::Drifted),
            source: "odd".into(),
            ..AppFilter::default()
        };
        let page = fleet.page(&drifted, 0, 30);
        assert_eq!(page.matching, 10);
        assert!(
            page.rows
                .iter()
                .all(|view| view.sync == SyncState::Drifted && view.source == "odd")
        );
        let last = fleet.page(&AppFilter::default(), 3, 30);
        assert_eq!(last.rows.len(), 10);
        // Sorted by namespace, then name: the last page is the end of team-2.
        assert_eq!(last.rows[0].app.to_string(), "team-2/app-00071");

        let search = AppFilter {
            search: "TEAM-1/app-0001".into(),
            ..AppFilter::default()
        };
        let found: Vec<String> = fleet
            .page(&search, 0, 30)
            .rows
            .iter()
            .map(|view| view.app.to_string())
            .collect();
        assert_eq!(
            found,
            [
                "team-1/app-00010",
                "team-1/app-00013",
                "team-1/app-00016",
                "team-1/app-00019"
            ]
        );
        let unhealthy = AppFilter {
            health: "degraded".into(),
            ..AppFilter::default()
        };
        assert_eq!(fleet.page(&unhealthy, 0, 30).matching, 0);
    }

    #[test]
    fn updates_wake_subscribers_and_removal_forgets_filter_choices() {
        let fleet = fleet_of(3);
        let mut events = fleet.subscribe();
        events.mark_unchanged();
        fleet.remove(&app("team-1", "app-00001"));
        assert!(events.has_changed().unwrap());
        let page = fleet.page(&AppFilter::default(), 0, 10);
        assert_eq!(page.namespaces, ["team-0", "team-2"]);
        assert_eq!(page.total, 2);
    }

    #[test]
    fn history_is_bounded_newest_first() {
        let mut view = AppView::new(app("a", "b"), "s");
        for n in 0..(HISTORY_LEN as u64 + 5) {
            view.push_history(DeployRecord {
                commit: CommitInfo {
                    id: format!("{n:040x}"),
                    ..CommitInfo::default()
                },
                finished_at: SystemTime::UNIX_EPOCH + Duration::from_secs(n),
                duration: Duration::from_secs(1),
                result: StatusState::Success,
                message: String::new(),
            });
        }
        assert_eq!(view.history.len(), HISTORY_LEN);
        assert_eq!(
            view.history[0].commit.id,
            format!("{:040x}", HISTORY_LEN + 4)
        );
    }
}
