//! Per-app results that every replica publishes in the cluster, and the one summary the leader
//! makes of them. Each replica stores, per source, one ConfigMap in the Lease namespace with the
//! commit it last deployed and the state of each app it owns; the leader reads them all and,
//! once every app of its render of that commit has a result from a live member at that commit,
//! writes the commit's summary status. So the forge sees one summary per commit, as with one
//! agent, however many replicas deployed it.

use std::collections::BTreeMap;

use analyzer::AppRef;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ListParams};
use serde::{Deserialize, Serialize};

use super::{ROLE_LABEL, Shards, assign};
use crate::forge::StatusState;

const SOURCE_LABEL: &str = "driftless.dev/shard-source";
const DATA_KEY: &str = "results.json";

/// A replica's published results for one source (the ConfigMap's JSON).
#[derive(Debug, Default, Serialize, Deserialize)]
struct Published {
    replica: String,
    commit: String,
    /// `namespace/name` → `success`, `failure`, `error` or `pending`.
    apps: BTreeMap<String, String>,
}

/// The label value naming a source (source names may not be label values).
fn source_key(source: &str) -> String {
    format!("{:016x}", assign::stable_hash(source))
}

/// Stores this replica's results for `source` at `commit`: the state of each app it owns.
///
/// # Errors
/// The ConfigMap could not be read or written.
pub(crate) async fn publish(
    shards: &Shards,
    source: &str,
    commit: &str,
    states: &BTreeMap<AppRef, StatusState>,
) -> Result<(), kube::Error> {
    let namespace = &shards.config().namespace;
    let name = format!("driftless-results-{}-{}", source_key(source), shards.me());
    let api: Api<ConfigMap> = Api::namespaced(shards.cluster().client().clone(), namespace);
    let current = api.get_opt(&name).await?;
    let published = Published {
        replica: shards.me().to_owned(),
        commit: commit.to_owned(),
        apps: states
            .iter()
            .map(|(app, state)| (app.to_string(), state.as_str().to_owned()))
            .collect(),
    };
    let config_map = ConfigMap {
        metadata: ObjectMeta {
            name: Some(name),
            labels: Some(BTreeMap::from([
                (ROLE_LABEL.to_owned(), "results".to_owned()),
                (SOURCE_LABEL.to_owned(), source_key(source)),
            ])),
            resource_version: current
                .as_ref()
                .and_then(|current| current.metadata.resource_version.clone()),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(
            DATA_KEY.to_owned(),
            serde_json::to_string(&published).expect("strings serialize"),
        )])),
        ..ConfigMap::default()
    };
    let version = config_map.metadata.resource_version.clone();
    crate::writer::write_record(shards.cluster(), namespace, &config_map, version.as_deref())
        .await?;
    Ok(())
}

/// The summary of `commit` from every live member's published results, once each of `apps`
/// has a result at that commit; `None` before.
///
/// # Errors
/// The results could not be listed.
pub(crate) async fn summary(
    shards: &Shards,
    source: &str,
    commit: &str,
    apps: &[&AppRef],
    members: &[String],
) -> Result<Option<(StatusState, String)>, kube::Error> {
    let api: Api<ConfigMap> = Api::namespaced(
        shards.cluster().client().clone(),
        &shards.config().namespace,
    );
    let selector = format!("{ROLE_LABEL}=results,{SOURCE_LABEL}={}", source_key(source));
    let mut states: BTreeMap<String, String> = BTreeMap::new();
    for config_map in api.list(&ListParams::default().labels(&selector)).await? {
        let Some(published) = config_map
            .data
            .as_ref()
            .and_then(|data| data.get(DATA_KEY))
            .and_then(|text| serde_json::from_str::<Published>(text).ok())
        else {
            continue;
        };
        if published.commit == commit && members.contains(&published.replica) {
            states.extend(published.apps);
        }
    }
    Ok(summarize(apps, &states, members.len()))
}

/// The summary of `apps` from their states (`None` while some app has none yet, or is
/// pending).
fn summarize(
    apps: &[&AppRef],
    states: &BTreeMap<String, String>,
    n_members: usize,
) -> Option<(StatusState, String)> {
    let mut failed = Vec::new();
    for app in apps {
        let key = app.to_string();
        match states.get(&key).map(String::as_str) {
            None | Some("pending") => return None,
            Some("success") => {}
            Some(_) => failed.push(key),
        }
    }
    Some(if failed.is_empty() {
        (
            StatusState::Success,
            format!("{} app(s) deployed by {n_members} replica(s)", apps.len()),
        )
    } else {
        (
            StatusState::Failure,
            format!(
                "{} of {} app(s) failed: {}",
                failed.len(),
                apps.len(),
                failed.join(", ")
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app(name: &str) -> AppRef {
        AppRef {
            namespace: "team".to_owned(),
            name: name.to_owned(),
        }
    }

    #[test]
    fn a_summary_waits_for_every_app_and_names_the_failed_ones() {
        let (a, b) = (app("a"), app("b"));
        let apps = [&a, &b];
        let mut states = BTreeMap::from([("team/a".to_owned(), "success".to_owned())]);
        assert_eq!(summarize(&apps, &states, 2), None);
        states.insert("team/b".to_owned(), "pending".to_owned());
        assert_eq!(summarize(&apps, &states, 2), None);
        states.insert("team/b".to_owned(), "failure".to_owned());
        assert_eq!(
            summarize(&apps, &states, 2),
            Some((
                StatusState::Failure,
                "1 of 2 app(s) failed: team/b".to_owned()
            ))
        );
        states.insert("team/b".to_owned(), "success".to_owned());
        assert_eq!(
            summarize(&apps, &states, 2),
            Some((
                StatusState::Success,
                "2 app(s) deployed by 2 replica(s)".to_owned()
            ))
        );
    }
}
