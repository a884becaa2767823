//! The agent's Prometheus metrics (served at `/metrics`): the build, whether each source
//! fetches, apps, drift, render and plan durations, the render cache and the apps planned (what makes a commit cost what changed),
//! API calls and errors. One [`Metrics`] per process, passed around in an `Arc`;
//! never a global.

use std::fmt;
use std::time::Duration;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Who an API call went to.
#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq, EncodeLabelValue)]
pub enum ApiTarget {
    Forge,
    Git,
    Kube,
    Notification,
}

/// Which step an error happened in.
#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq, EncodeLabelValue)]
pub enum ErrorKind {
    Fetch,
    Render,
    Plan,
    Apply,
    Forge,
    Webhook,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SourceLabels {
    source: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AppLabels {
    source: String,
    namespace: String,
    app: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ApiLabels {
    target: ApiTarget,
    outcome: Outcome,
}

#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq, EncodeLabelValue)]
enum Outcome {
    Ok,
    Error,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    kind: ErrorKind,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SourceStateLabels {
    source: String,
    state: &'static str,
}

type HistogramFamily = Family<SourceLabels, Histogram, fn() -> Histogram>;

/// Every metric the agent exports.
pub struct Metrics {
    registry: Registry,
    app_in_sync: Family<AppLabels, Gauge>,
    app_healthy: Family<AppLabels, Gauge>,
    apps_by_sync: Family<SourceStateLabels, Gauge>,
    apps_by_health: Family<SourceStateLabels, Gauge>,
    kube_requests: crate::kube_requests::KubeRequests,
    apps: Family<SourceLabels, Gauge>,
    app_drifted: Family<AppLabels, Gauge>,
    render_seconds: HistogramFamily,
    plan_seconds: HistogramFamily,
    api_calls: Family<ApiLabels, Counter>,
    errors: Family<ErrorLabels, Counter>,
    polls: Family<SourceLabels, Counter>,
    apps_rendered: Family<SourceLabels, Counter>,
    apps_reused: Family<SourceLabels, Counter>,
    apps_planned: Family<SourceLabels, Counter>,
    source_fetch_ok: Family<SourceLabels, Gauge>,
    app_held: Family<AppLabels, Gauge>,
    commit_to_live_seconds: HistogramFamily,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: String,
}

impl fmt::Debug for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

fn commit_to_live_histogram() -> Histogram {
    // 1 s … ~9 h: a deploy waits on polls, CI and rollouts, not milliseconds.
    Histogram::new(exponential_buckets(1.0, 2.0, 16))
}

fn duration_histogram() -> Histogram {
    // 1 ms … ~33 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::new()
    }
}

impl Metrics {
    /// A registry with every metric registered at zero.
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("driftless");
        let apps = Family::<SourceLabels, Gauge>::default();
        registry.register(
            "apps",
            "Applications found in the source's deployed revision",
            apps.clone(),
        );
        let app_drifted = Family::<AppLabels, Gauge>::default();
        registry.register(
            "app_drifted",
            "1 when the last drift check found live objects differing from the deployed revision",
            app_drifted.clone(),
        );
        let render_seconds: HistogramFamily = Family::new_with_constructor(duration_histogram);
        registry.register(
            "render_duration_seconds",
            "Time to render a source's snapshot",
            render_seconds.clone(),
        );
        let plan_seconds: HistogramFamily = Family::new_with_constructor(duration_histogram);
        registry.register(
            "plan_duration_seconds",
            "Time to plan a source's apps against live clusters",
            plan_seconds.clone(),
        );
        let api_calls = Family::<ApiLabels, Counter>::default();
        registry.register(
            "api_calls",
            "Calls to the forge, git remotes and Kubernetes APIs",
            api_calls.clone(),
        );
        let errors = Family::<ErrorLabels, Counter>::default();
        registry.register("errors", "Errors by the step that failed", errors.clone());
        let polls = Family::<SourceLabels, Counter>::default();
        registry.register(
            "polls",
            "Fetches of a source, by poll or webhook",
            polls.clone(),
        );
        let apps_rendered = Family::<SourceLabels, Counter>::default();
        registry.register(
            "apps_rendered",
            "Apps rendered and checked (new or changed inputs)",
            apps_rendered.clone(),
        );
        let apps_reused = Family::<SourceLabels, Counter>::default();
        registry.register(
            "apps_reused",
            "Apps whose render and checks were reused from the render cache (inputs unchanged)",
            apps_reused.clone(),
        );
        let apps_planned = Family::<SourceLabels, Counter>::default();
        registry.register(
            "apps_planned",
            "Apps planned against the cluster (deploys, previews and drift checks)",
            apps_planned.clone(),
        );
        let build_info = Family::<BuildLabels, Gauge>::default();
        registry.register(
            "build_info",
            "Always 1; the agent's version is in the label",
            build_info.clone(),
        );
        build_info
            .get_or_create(&BuildLabels {
                version: env!("CARGO_PKG_VERSION").to_owned(),
            })
            .set(1);
        let source_fetch_ok = Family::<SourceLabels, Gauge>::default();
        registry.register(
            "source_fetch_ok",
            "1 when the source's last fetch succeeded, 0 when it failed (see /readyz for why)",
            source_fetch_ok.clone(),
        );
        let app_held = Family::<AppLabels, Gauge>::default();
        registry.register(
            "app_held",
            "1 while a hold pauses the app's apply and drift correction",
            app_held.clone(),
        );
        let commit_to_live_seconds: HistogramFamily =
            Family::new_with_constructor(commit_to_live_histogram);
        registry.register(
            "commit_to_live_seconds",
            "From a deployed commit's time (or its webhook's arrival, when later) to its apps applied and healthy",
            commit_to_live_seconds.clone(),
        );
        let app_in_sync = Family::<AppLabels, Gauge>::default();
        registry.register(
            "app_in_sync",
            "1 when the app's live objects match its deployed revision, 0 otherwise (pending, drifted, blocked, held, failed)",
            app_in_sync.clone(),
        );
        let app_healthy = Family::<AppLabels, Gauge>::default();
        registry.register(
            "app_healthy",
            "1 when every object of the app is healthy, 0 otherwise; absent while its health is not known",
            app_healthy.clone(),
        );
        let apps_by_sync = Family::<SourceStateLabels, Gauge>::default();
        registry.register(
            "apps_by_sync",
            "Apps per source and sync state (pending, in-sync, drifted, blocked, held, failed)",
            apps_by_sync.clone(),
        );
        let apps_by_health = Family::<SourceStateLabels, Gauge>::default();
        registry.register(
            "apps_by_health",
            "Apps per source and health (healthy, progressing, degraded, unknown)",
            apps_by_health.clone(),
        );
        let kube_requests = crate::kube_requests::KubeRequests::default();
        registry.register(
            "kube_requests",
            "Kubernetes API requests by cluster, verb and HTTP code (`error`: no response)",
            kube_requests.family(),
        );
        Metrics {
            app_in_sync,
            app_healthy,
            apps_by_sync,
            apps_by_health,
            kube_requests,
            registry,
            source_fetch_ok,
            app_held,
            commit_to_live_seconds,
            apps_rendered,
            apps_reused,
            apps_planned,
            apps,
            app_drifted,
            render_seconds,
            plan_seconds,
            api_calls,
            errors,
            polls,
        }
    }

    /// The registry, for a subsystem registering its own metrics at start-up (the shards).
    /// Sets the per-app gauges to the fleet's current state. Called before each scrape: the
    /// series are exactly the apps the agent knows now, so an app removed from Git leaves
    /// no stale series behind. Two series per app (`app_in_sync`, `app_healthy`), each with
    /// only the labels source, namespace and app; the states are values, not labels, so the
    /// series count does not grow with states (20,000 series at 10,000 apps). Counts per state
    /// are in the source-level `apps_by_sync` and `apps_by_health`.
    pub fn set_app_states(&self, fleet: &crate::server::ui::FleetState) {
        use crate::health::HealthStatus;
        use crate::server::ui::state::SyncState;
        self.app_in_sync.clear();
        self.app_healthy.clear();
        self.apps_by_sync.clear();
        self.apps_by_health.clear();
        fleet.for_each_app(|view| {
            let labels = AppLabels {
                source: view.source.clone(),
                namespace: view.app.namespace.clone(),
                app: view.app.name.clone(),
            };
            self.app_in_sync
                .get_or_create(&labels)
                .set(i64::from(view.sync == SyncState::InSync));
            let sync = SourceStateLabels {
                source: view.source.clone(),
                state: view.sync.slug(),
            };
            self.apps_by_sync.get_or_create(&sync).inc();
            if let Some(health) = view.health {
                self.app_healthy
                    .get_or_create(&labels)
                    .set(i64::from(health == HealthStatus::Healthy));
                let state = match health {
                    HealthStatus::Healthy => "healthy",
                    HealthStatus::Progressing => "progressing",
                    HealthStatus::Degraded => "degraded",
                    HealthStatus::Unknown => "unknown",
                };
                self.apps_by_health
                    .get_or_create(&SourceStateLabels {
                        source: view.source.clone(),
                        state,
                    })
                    .inc();
            }
        });
    }

    /// The counter of Kubernetes API requests, for the clients' layers.
    pub fn kube_requests(&self) -> crate::kube_requests::KubeRequests {
        self.kube_requests.clone()
    }

    pub fn registry_mut(&mut self) -> &mut Registry {
        &mut self.registry
    }

    /// The text exposition format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        if let Err(error) = prometheus_client::encoding::text::encode(&mut out, &self.registry) {
            // Writing into a String cannot fail; keep the partial output and say so.
            tracing::warn!(error = %error, "encoding metrics failed");
        }
        out
    }

    /// Whether the source's last fetch succeeded.
    pub fn set_fetch_ok(&self, source: &str, ok: bool) {
        self.source_fetch_ok
            .get_or_create(&source_labels(source))
            .set(i64::from(ok));
    }

    pub fn set_apps(&self, source: &str, n_apps: usize) {
        let n_apps = i64::try_from(n_apps).unwrap_or(i64::MAX);
        self.apps.get_or_create(&source_labels(source)).set(n_apps);
    }

    pub fn set_drifted(&self, source: &str, namespace: &str, app: &str, drifted: bool) {
        let labels = AppLabels {
            source: source.to_owned(),
            namespace: namespace.to_owned(),
            app: app.to_owned(),
        };
        self.app_drifted
            .get_or_create(&labels)
            .set(i64::from(drifted));
    }

    pub fn set_held(&self, source: &str, namespace: &str, app: &str, held: bool) {
        let labels = AppLabels {
            source: source.to_owned(),
            namespace: namespace.to_owned(),
            app: app.to_owned(),
        };
        self.app_held.get_or_create(&labels).set(i64::from(held));
    }

    pub fn observe_commit_to_live(&self, source: &str, elapsed: Duration) {
        self.commit_to_live_seconds
            .get_or_create(&source_labels(source))
            .observe(elapsed.as_secs_f64());
    }

    pub fn observe_render(&self, source: &str, elapsed: Duration) {
        self.render_seconds
            .get_or_create(&source_labels(source))
            .observe(elapsed.as_secs_f64());
    }

    pub fn observe_plan(&self, source: &str, elapsed: Duration) {
        self.plan_seconds
            .get_or_create(&source_labels(source))
            .observe(elapsed.as_secs_f64());
    }

    pub fn record_api_call(&self, target: ApiTarget, ok: bool) {
        let outcome = if ok { Outcome::Ok } else { Outcome::Error };
        self.api_calls
            .get_or_create(&ApiLabels { target, outcome })
            .inc();
    }

    pub fn record_error(&self, kind: ErrorKind) {
        self.errors.get_or_create(&ErrorLabels { kind }).inc();
    }

    /// One render of a source: `reused` apps came from the render cache, `rendered` did not.
    pub fn record_render_cache(&self, source: &str, reused: usize, rendered: usize) {
        let labels = source_labels(source);
        self.apps_reused
            .get_or_create(&labels)
            .inc_by(u64::try_from(reused).unwrap_or(u64::MAX));
        self.apps_rendered
            .get_or_create(&labels)
            .inc_by(u64::try_from(rendered).unwrap_or(u64::MAX));
    }

    /// `n_apps` apps planned against the cluster.
    pub fn record_planned(&self, source: &str, n_apps: usize) {
        self.apps_planned
            .get_or_create(&source_labels(source))
            .inc_by(u64::try_from(n_apps).unwrap_or(u64::MAX));
    }

    pub fn record_poll(&self, source: &str) {
        self.polls.get_or_create(&source_labels(source)).inc();
    }
}

fn source_labels(source: &str) -> SourceLabels {
    SourceLabels {
        source: source.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposition_has_the_recorded_values() {
        let metrics = Metrics::new();
        metrics.set_apps("platform", 3);
        metrics.set_fetch_ok("platform", false);
        metrics.set_drifted("platform", "team-a", "web", true);
        metrics.observe_render("platform", Duration::from_millis(3));
        metrics.record_api_call(ApiTarget::Forge, false);
        metrics.record_error(ErrorKind::Render);
        metrics.record_render_cache("platform", 9_999, 1);
        metrics.record_planned("platform", 1);
        let text = metrics.encode();
        assert!(
            text.contains(&format!(
                "driftless_build_info{{version=\"{}\"}} 1",
                env!("CARGO_PKG_VERSION")
            )),
            "{text}"
        );
        assert!(
            text.contains("driftless_source_fetch_ok{source=\"platform\"} 0"),
            "{text}"
        );
        assert!(
            text.contains("driftless_apps_reused_total{source=\"platform\"} 9999"),
            "{text}"
        );
        assert!(
            text.contains("driftless_apps_rendered_total{source=\"platform\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("driftless_apps_planned_total{source=\"platform\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("driftless_apps{source=\"platform\"} 3"),
            "{text}"
        );
        assert!(
            text.contains(
                "driftless_app_drifted{source=\"platform\",namespace=\"team-a\",app=\"web\"} 1"
            ),
            "{text}"
        );
        assert!(
            text.contains("driftless_render_duration_seconds_count{source=\"platform\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("driftless_api_calls_total{target=\"Forge\",outcome=\"Error\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("driftless_errors_total{kind=\"Render\"} 1"),
            "{text}"
        );
    }

    #[test]
    fn app_states_are_one_series_per_app_and_counts_per_state() {
        use crate::health::HealthStatus;
        use crate::server::ui::state::SyncState;
        let fleet = crate::server::ui::FleetState::default();
        let app = |name: &str| analyzer::AppRef {
            namespace: "team-a".to_owned(),
            name: name.to_owned(),
        };
        fleet.update(&app("web"), "platform", |view| {
            view.sync = SyncState::InSync;
            view.health = Some(HealthStatus::Healthy);
        });
        fleet.update(&app("db"), "platform", |view| {
            view.sync = SyncState::Drifted;
            view.health = Some(HealthStatus::Degraded);
        });
        fleet.update(&app("new"), "platform", |_| {});
        let metrics = Metrics::new();
        metrics.set_app_states(&fleet);
        let text = metrics.encode();
        for line in [
            "driftless_app_in_sync{source=\"platform\",namespace=\"team-a\",app=\"web\"} 1",
            "driftless_app_in_sync{source=\"platform\",namespace=\"team-a\",app=\"db\"} 0",
            "driftless_app_in_sync{source=\"platform\",namespace=\"team-a\",app=\"new\"} 0",
            "driftless_app_healthy{source=\"platform\",namespace=\"team-a\",app=\"web\"} 1",
            "driftless_app_healthy{source=\"platform\",namespace=\"team-a\",app=\"db\"} 0",
            "driftless_apps_by_sync{source=\"platform\",state=\"in-sync\"} 1",
            "driftless_apps_by_sync{source=\"platform\",state=\"drifted\"} 1",
            "driftless_apps_by_sync{source=\"platform\",state=\"pending\"} 1",
            "driftless_apps_by_health{source=\"platform\",state=\"degraded\"} 1",
        ] {
            assert!(text.contains(line), "{line} not in:\n{text}");
        }
        // Health not known yet: no series rather than a guess.
        assert!(
            !text.contains(
                "driftless_app_healthy{source=\"platform\",namespace=\"team-a\",app=\"new\"}"
            ),
            "{text}"
        );
        // An app that left is gone at the next scrape.
        fleet.remove(&app("db"));
        metrics.set_app_states(&fleet);
        let text = metrics.encode();
        assert!(!text.contains("app=\"db\""), "{text}");
        assert!(!text.contains("state=\"drifted\""), "{text}");
    }
}
