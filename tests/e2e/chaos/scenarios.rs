//! The scenarios of the chaos trials: what the repository holds before and after the disturbed
//! step, and what the cluster must then hold (what Git says).

use std::collections::{BTreeMap, BTreeSet};

use anyhow::Result;

use crate::support::agent::WorkTree;

/// The step a trial disturbs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// The first deploy of the ConfigMap apps into an empty namespace.
    FirstDeploy,
    /// Colours change, one app swaps a component for another (a create and a prune in one app).
    Update,
    /// Half the apps leave Git (their objects and trackers must go), another loses a component.
    Prune,
    /// An app whose workflow applies one component, suspends for two seconds, applies another.
    WorkflowSuspend,
    /// A Deployment under a rollout plan takes a new image: the new revision runs beside the
    /// previous one batch by batch, is promoted, and its extra Deployment is garbage-collected.
    RolloutBatches,
}

impl Scenario {
    pub const ALL: [Scenario; 5] = [
        Scenario::FirstDeploy,
        Scenario::Update,
        Scenario::Prune,
        Scenario::WorkflowSuspend,
        Scenario::RolloutBatches,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Scenario::FirstDeploy => "first-deploy",
            Scenario::Update => "update",
            Scenario::Prune => "prune",
            Scenario::WorkflowSuspend => "workflow-suspend",
            Scenario::RolloutBatches => "rollout-batches",
        }
    }

    /// How long after the disturbed step starts the kill may land: about as long as the step
    /// takes, so every phase of it is hit.
    pub fn window_ms(self) -> u64 {
        match self {
            Scenario::FirstDeploy => 1_500,
            Scenario::Update | Scenario::Prune => 2_000,
            Scenario::WorkflowSuspend => 4_000,
            Scenario::RolloutBatches => 6_000,
        }
    }

    /// The repository before the disturbed step; `None` when the step is the first deploy.
    pub fn before(self, namespace: &str) -> Option<State> {
        match self {
            Scenario::FirstDeploy => None,
            Scenario::Update | Scenario::Prune => Some(State::config_map_apps(namespace, "blue")),
            Scenario::WorkflowSuspend => Some(State::config_map_apps(namespace, "blue")),
            Scenario::RolloutBatches => {
                let mut state = State::config_map_apps(namespace, "blue");
                state.rollout = Some("nginx:1.25".to_owned());
                Some(state)
            }
        }
    }

    /// The repository after it: what the cluster must converge on.
    pub fn after(self, namespace: &str) -> State {
        match self {
            Scenario::FirstDeploy => State::config_map_apps(namespace, "blue"),
            Scenario::Update => {
                let mut state = State::config_map_apps(namespace, "green");
                state.apps[1].components = vec![
                    ("settings".to_owned(), "app-1-settings".to_owned()),
                    ("more".to_owned(), "app-1-more".to_owned()),
                ];
                state
            }
            Scenario::Prune => {
                let mut state = State::config_map_apps(namespace, "blue");
                state.apps.truncate(CONFIG_MAP_APPS / 2);
                state.apps[1].components.truncate(1);
                state
            }
            Scenario::WorkflowSuspend => {
                let mut state = State::config_map_apps(namespace, "blue");
                state.gated = true;
                state
            }
            Scenario::RolloutBatches => {
                let mut state = State::config_map_apps(namespace, "blue");
                state.rollout = Some("nginx:1.26".to_owned());
                state
            }
        }
    }
}

/// One ConfigMap app: its name and its components (component name, ConfigMap name).
#[derive(Debug, Clone)]
pub struct ConfigMapApp {
    pub name: String,
    pub components: Vec<(String, String)>,
}

/// What the repository says.
#[derive(Debug, Clone)]
pub struct State {
    pub namespace: String,
    pub color: String,
    pub apps: Vec<ConfigMapApp>,
    /// The workflow app `gated` (ConfigMaps `gated-before`, then `gated-after`).
    pub gated: bool,
    /// The rollout app `rolled` and its image (Deployment `web`, 4 replicas).
    pub rollout: Option<String>,
}

/// The ConfigMap apps of every state: enough writes (two per object, tracker writes around
/// them, within the agent's QPS budget) that a deploy lasts a second or two, so random kills
/// land inside it.
pub const CONFIG_MAP_APPS: usize = 12;

/// Replicas of the rollout app's Deployment.
pub const ROLLOUT_REPLICAS: i32 = 4;

impl State {
    /// [`CONFIG_MAP_APPS`] apps `app-0`…, one ConfigMap each, `app-1` with a second one
    /// (`app-1-extra`).
    fn config_map_apps(namespace: &str, color: &str) -> State {
        let apps = (0..CONFIG_MAP_APPS)
            .map(|index| {
                let name = format!("app-{index}");
                let mut components = vec![("settings".to_owned(), format!("{name}-settings"))];
                if index == 1 {
                    components.push(("extra".to_owned(), "app-1-extra".to_owned()));
                }
                ConfigMapApp { name, components }
            })
            .collect();
        State {
            namespace: namespace.to_owned(),
            color: color.to_owned(),
            apps,
            gated: false,
            rollout: None,
        }
    }

    /// Writes the state into the work tree (removing the files of apps it does not hold) and
    /// commits it; returns the commit.
    pub fn commit(&self, tree: &WorkTree, message: &str) -> Result<String> {
        let apps = tree.dir.path().join("apps");
        if apps.exists() {
            std::fs::remove_dir_all(&apps)?;
        }
        for app in &self.apps {
            let components: String = app
                .components
                .iter()
                .map(|(component, config_map)| {
                    config_map_component(component, config_map, &self.color)
                })
                .collect();
            tree.write(
                &format!("apps/{}.yaml", app.name),
                &application(&app.name, &self.namespace, &components, ""),
            )?;
        }
        if self.gated {
            let components = config_map_component("before", "gated-before", &self.color)
                + &config_map_component("after", "gated-after", &self.color);
            tree.write(
                "apps/gated.yaml",
                &application("gated", &self.namespace, &components, GATED_WORKFLOW),
            )?;
        }
        if let Some(image) = &self.rollout {
            tree.write(
                "definitions/traits/rollout.cue",
                crate::workflow::ROLLOUT_TRAIT,
            )?;
            tree.write("apps/rolled.yaml", &rollout_app(&self.namespace, image))?;
        }
        tree.commit_all(message)
    }

    /// The ConfigMaps Git says exist, by name, with their app.
    pub fn config_maps(&self) -> BTreeMap<String, String> {
        let mut config_maps = BTreeMap::new();
        for app in &self.apps {
            for (_, config_map) in &app.components {
                config_maps.insert(config_map.clone(), app.name.clone());
            }
        }
        if self.gated {
            for name in ["gated-before", "gated-after"] {
                config_maps.insert(name.to_owned(), "gated".to_owned());
            }
        }
        config_maps
    }

    /// The apps Git holds.
    pub fn app_names(&self) -> BTreeSet<String> {
        let mut names: BTreeSet<String> = self.apps.iter().map(|app| app.name.clone()).collect();
        if self.gated {
            names.insert("gated".to_owned());
        }
        if self.rollout.is_some() {
            names.insert("rolled".to_owned());
        }
        names
    }
}

const GATED_WORKFLOW: &str = "  workflow:
    steps:
      - name: first
        type: apply-component
        properties:
          component: before
      - name: pause
        type: suspend
        properties:
          duration: 2s
      - name: second
        type: apply-component
        properties:
          component: after
";

fn config_map_component(component: &str, name: &str, color: &str) -> String {
    format!(
        "    - name: {component}
      type: k8s-objects
      properties:
        objects:
          - apiVersion: v1
            kind: ConfigMap
            metadata:
              name: {name}
            data:
              color: {color}
"
    )
}

fn application(name: &str, namespace: &str, components: &str, workflow: &str) -> String {
    format!(
        "apiVersion: core.oam.dev/v1beta1
kind: Application
metadata:
  name: {name}
  namespace: {namespace}
spec:
  components:
{components}{workflow}"
    )
}

fn rollout_app(namespace: &str, image: &str) -> String {
    format!(
        "apiVersion: core.oam.dev/v1beta1
kind: Application
metadata:
  name: rolled
  namespace: {namespace}
spec:
  components:
    - name: web
      type: webservice
      properties:
        image: {image}
      traits:
        - type: scaler
          properties:
            replicas: {ROLLOUT_REPLICAS}
        - type: rollout
          properties:
            targetSize: {ROLLOUT_REPLICAS}
            rolloutBatches:
              - replicas: 2
              - replicas: 2
  workflow:
    steps:
      - name: web
        type: apply-component
        properties:
          component: web
"
    )
}
