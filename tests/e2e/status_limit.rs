//! `forge.appStatusLimit`: a deploy of more apps than the limit posts per-app commit statuses
//! only for the apps that did not succeed, and says so in the summary; a deploy within the limit
//! posts one per app, as usual.

use anyhow::Result;

use crate::support::apps::{broken_app, config_map_app};
use crate::support::cluster::{TestCluster, TestNamespace};
use crate::support::gitea::Gitea;
use crate::support::gitea_agent::{AgentLines, GiteaAgent};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deploy_over_the_status_limit_posts_statuses_for_failures_only() -> Result<()> {
    let gitea = Gitea::shared()?;
    let cluster = TestCluster::shared().await?;
    let namespace = TestNamespace::new(&cluster, "status-limit").await?;
    let ns = namespace.name.as_str();
    let lines = AgentLines {
        forge: ", appStatusLimit: 2".to_owned(),
        ..AgentLines::default()
    };
    let agent = GiteaAgent::start(&gitea, &cluster, "status-limit", &lines, &[]).await?;
    let tree = &agent.tree;
    for name in ["one", "two", "three"] {
        tree.write(
            &format!("apps/{name}.yaml"),
            &config_map_app(name, ns, "blue"),
        )?;
    }
    tree.write("apps/broken.yaml", &broken_app("broken", ns))?;
    let first = tree.commit_and_push("four apps, one broken", "main")?;

    // Four apps planned, over the limit of 2: the broken app's status and the summary only.
    let ((state, description), _) = agent.summary(&first).await?;
    assert_eq!(state, "failure", "{description}");
    assert!(
        description.contains("own statuses for 1 of 4 apps (appStatusLimit 2)"),
        "{description}"
    );
    let history = gitea.statuses(&agent.repo, &first).await?;
    let mut contexts: Vec<&str> = history
        .iter()
        .map(|(context, _, _)| context.as_str())
        .collect();
    contexts.sort_unstable();
    contexts.dedup();
    let broken_context = format!("driftless/{ns}/broken");
    assert_eq!(
        contexts,
        ["driftless", broken_context.as_str()],
        "{history:?}"
    );
    let latest = gitea.latest_statuses(&agent.repo, &first).await?;
    assert_eq!(latest[&broken_context].0, "failure", "{latest:?}");
    // The apps without a status of their own were deployed all the same.
    let config_maps: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(cluster.client.clone(), ns);
    for name in ["one", "two", "three"] {
        config_maps.get(&format!("{name}-settings")).await?;
    }

    // One app changes: it and the still-broken app are planned, within the limit, and each
    // gets a status of its own.
    tree.write("apps/two.yaml", &config_map_app("two", ns, "green"))?;
    let second = tree.commit_and_push("two turns green", "main")?;
    let ((state, description), latest) = agent.summary(&second).await?;
    assert_eq!(state, "failure", "{description}");
    assert!(!description.contains("own statuses"), "{description}");
    assert_eq!(
        latest[&format!("driftless/{ns}/two")].0,
        "success",
        "{latest:?}"
    );
    assert_eq!(latest[&broken_context].0, "failure", "{latest:?}");
    assert!(
        !latest.contains_key(&format!("driftless/{ns}/one")),
        "{latest:?}"
    );
    agent.stop()?;
    Ok(())
}
