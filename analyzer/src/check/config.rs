//! The `analysis` section of `driftless.yaml` (severity per rule, suppressions by path) and
//! the cluster registry the `unknown-cluster` rule checks topologies against.
//!
//! ```yaml
//! analysis:
//!   rules: { missing-probes: off, image-tag: error }
//!   ignore:
//!     - paths: ["apps/legacy/**"]
//!       rules: [missing-resources]   # empty or absent: every rule
//!   limits: { steps: 500000, appSeconds: 10 }   # per template evaluation / per app render
//! ```
//!
//! The agent's config loader embeds [`AnalysisConfig`] as its `analysis` field; the CLI reads
//! a repository's `driftless.yaml` with [`AnalysisConfig::from_agent_config`], which looks only
//! at `analysis` and `clusters` so that `driftless analyze` works without the agent's sources
//! and credentials.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::rules::rule_by_id;

/// Severity settings and suppressions.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AnalysisConfig {
    /// Severity per rule id.
    #[serde(default)]
    pub rules: BTreeMap<String, RuleLevel>,
    /// Rules suppressed for files matching globs.
    #[serde(default)]
    pub ignore: Vec<IgnoreRule>,
    /// The names of the clusters the agent knows (`clusters[].name` of `driftless.yaml`).
    /// `None`: no registry, so topology clusters are not checked.
    #[serde(skip)]
    pub known_clusters: Option<Vec<String>>,
    /// How much work one app's render may take (`limits: {steps, appSeconds}`); the
    /// defaults when absent. Whoever builds the render options applies it
    /// ([`crate::AnalysisOptions::with_config`]).
    #[serde(default)]
    pub limits: Option<crate::RenderLimits>,
    /// What the source being analysed may touch (the `source-boundary` rule); `None`: not
    /// checked. Set by the agent per source, and by the CLI for `--source`.
    #[serde(skip)]
    pub boundary: Option<std::sync::Arc<crate::boundary::SourceBoundary>>,
}

/// A configured severity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RuleLevel {
    Error,
    Warning,
    Off,
}

/// Suppresses `rules` (every rule when empty) for diagnostics in files matching `paths`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct IgnoreRule {
    pub paths: Vec<String>,
    #[serde(default)]
    pub rules: Vec<String>,
}

/// Why a config cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    #[error("invalid driftless.yaml: {0}")]
    ParseFailed(String),
    #[error("driftless.yaml: `analysis.rules` names unknown rule `{0}`")]
    UnknownRule(String),
    #[error("driftless.yaml: invalid glob `{glob}` in `analysis.ignore`: {message}")]
    InvalidGlob { glob: String, message: String },
    #[error(
        "driftless.yaml: `analysis.limits` must be positive (steps {steps}, appSeconds {app_seconds})"
    )]
    InvalidLimits { steps: u64, app_seconds: f64 },
}

/// The parts of the agent config the analysis reads.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct AgentConfigView {
    #[serde(default)]
    analysis: Option<AnalysisConfig>,
    #[serde(default)]
    clusters: Option<Vec<ClusterView>>,
}

#[derive(Debug, Deserialize)]
struct ClusterView {
    name: String,
}

impl AnalysisConfig {
    /// Reads `analysis` and `clusters` from the text of a `driftless.yaml`, ignoring its other
    /// sections, and checks rule ids and globs.
    ///
    /// # Errors
    /// When the YAML does not parse, a rule id is unknown, or a glob is invalid.
    pub fn from_agent_config(text: &str) -> Result<AnalysisConfig, ConfigError> {
        let view: AgentConfigView =
            serde_saphyr::from_str_with_options(text, crate::load::yaml_options(text))
                .map_err(|error| ConfigError::ParseFailed(error.to_string()))?;
        let mut config = view.analysis.unwrap_or_default();
        config.known_clusters = view
            .clusters
            .map(|clusters| clusters.into_iter().map(|cluster| cluster.name).collect());
        config.check()?;
        Ok(config)
    }

    /// Checks that every rule id exists and every glob compiles.
    ///
    /// # Errors
    /// The first unknown rule id or invalid glob.
    pub fn check(&self) -> Result<(), ConfigError> {
        let rule_ids = self
            .rules
            .keys()
            .chain(self.ignore.iter().flat_map(|ignore| &ignore.rules));
        for id in rule_ids {
            if rule_by_id(id).is_none() {
                return Err(ConfigError::UnknownRule(id.clone()));
            }
        }
        if let Some(limits) = self.limits
            && (limits.steps == 0 || !(limits.app_seconds > 0.0 && limits.app_seconds.is_finite()))
        {
            return Err(ConfigError::InvalidLimits {
                steps: limits.steps,
                app_seconds: limits.app_seconds,
            });
        }
        for glob in self.ignore.iter().flat_map(|ignore| &ignore.paths) {
            globset::Glob::new(glob).map_err(|error| ConfigError::InvalidGlob {
                glob: glob.clone(),
                message: error.kind().to_string(),
            })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_analysis_and_cluster_names_only() {
        let config = AnalysisConfig::from_agent_config(
            "sources: [{name: a, url: x}]\nclusters:\n- {name: prod, kubeconfig: k}\nanalysis:\n  rules: {image-tag: off, missing-probes: error}\n  ignore: [{paths: [\"apps/legacy/**\"]}]\n",
        )
        .unwrap();
        assert_eq!(config.rules.get("image-tag"), Some(&RuleLevel::Off));
        assert_eq!(config.rules.get("missing-probes"), Some(&RuleLevel::Error));
        assert_eq!(config.known_clusters, Some(vec!["prod".to_owned()]));
        assert_eq!(config.ignore[0].paths, vec!["apps/legacy/**".to_owned()]);
    }

    #[test]
    fn unknown_rules_and_bad_globs_are_errors() {
        let error =
            AnalysisConfig::from_agent_config("analysis: {rules: {nope: off}}").unwrap_err();
        assert_eq!(error, ConfigError::UnknownRule("nope".to_owned()));
        let error = AnalysisConfig::from_agent_config("analysis: {ignore: [{paths: [\"a[\"]}]}")
            .unwrap_err();
        assert!(
            matches!(error, ConfigError::InvalidGlob { .. }),
            "{error:?}"
        );
    }
}
