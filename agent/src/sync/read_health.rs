//! The apps' health as their objects are live now (read again after an apply).

use std::collections::BTreeMap;

use analyzer::AppRef;

use super::LivePlan;
use crate::cluster::Cluster;
use crate::health::{self, AppHealth};
use crate::observe::{self};
use crate::planner::{LiveObjects, Observed};

/// The health of each app's rendered objects as they are live now (re-read after an apply).
pub async fn read_health(cluster: &Cluster, live_plan: &LivePlan) -> BTreeMap<AppRef, AppHealth> {
    // In bulk, as for the plan: after applying 10,000 apps, one GET per object is ~35,000 requests.
    let wanted: Vec<crate::plan::ObjectRef> = live_plan
        .observations
        .iter()
        .flat_map(|observation| &observation.desired.objects)
        .map(|object| object.object_ref.clone())
        .collect();
    cluster.prefetch(wanted).await;
    let mut healths = BTreeMap::new();
    for observation in &live_plan.observations {
        let mut live = LiveObjects::default();
        for object in &observation.desired.objects {
            let object_ref = &object.object_ref;
            let Ok(Some(resolved)) = cluster
                .resolve(&object_ref.api_version, &object_ref.kind)
                .await
            else {
                continue;
            };
            let observed = match observe::read(cluster, &resolved, object_ref).await {
                Ok(Some(live)) => Observed::Present {
                    live,
                    dry_run: None,
                },
                Ok(None) => Observed::Absent,
                Err(message) => Observed::Failed(message),
            };
            live.objects.insert(object_ref.clone(), observed);
        }
        let statuses = live_plan
            .statuses
            .get(&observation.desired.app)
            .map_or(&[][..], Vec::as_slice);
        if let Some(health) = health::of_app(&observation.desired, &live, statuses) {
            healths.insert(observation.desired.app.clone(), health);
        }
    }
    cluster.clear_prefetched();
    healths
}
