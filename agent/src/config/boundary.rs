//! What a source may do, as written under `sources[]`: its `boundary` (clusters, namespaces,
//! cluster-scoped and denied kinds), which pull requests it previews (`previews`), and the
//! ServiceAccount it applies as (`serviceAccount`, through impersonation).
//!
//! ```yaml
//! sources:
//!   - name: team-a
//!     url: https://git.example.com/team-a/apps.git
//!     boundary:
//!       namespaces: [team-a, "team-a-*"]
//!       clusters: [local]
//!       clusterScopedKinds: []          # the default once a boundary is declared
//!       deniedKinds: [rbac.authorization.k8s.io/RoleBinding]
//!     previews:
//!       fromForks: false                # the default
//!       authors: [alice, bob]           # absent: every author of a same-repository PR
//!     serviceAccount: { namespace: team-a, name: deployer }
//! ```
//!
//! A source that declares no boundary may write anywhere its credentials reach, except the
//! tracker namespace, which is always reserved for Driftless.

use analyzer::boundary::{Globs, SourceBoundary};
use serde::Deserialize;
use serde_saphyr::Spanned;

use super::{Checker, is_dns_label};

/// `sources[].boundary` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BoundaryFile {
    pub namespaces: Option<Vec<Spanned<String>>>,
    pub clusters: Option<Vec<Spanned<String>>>,
    #[serde(default)]
    pub cluster_scoped_kinds: Vec<Spanned<String>>,
    #[serde(default)]
    pub denied_kinds: Vec<Spanned<String>>,
}

/// `sources[].previews` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PreviewsFile {
    #[serde(default)]
    pub from_forks: bool,
    pub authors: Option<Vec<String>>,
}

/// `sources[].serviceAccount` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ServiceAccountFile {
    pub namespace: Spanned<String>,
    pub name: Spanned<String>,
}

/// Which pull requests a source previews.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PreviewPolicy {
    /// Previews of pull requests from forks: off unless set.
    pub from_forks: bool,
    /// When set, only these authors' pull requests are previewed.
    pub authors: Option<Vec<String>>,
}

/// Why a pull request is not previewed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PreviewRefusal {
    FromFork,
    AuthorNotListed(String),
}

impl PreviewPolicy {
    /// Whether a pull request by `author`, from a fork or not, is previewed.
    ///
    /// # Errors
    ///
    /// Why not.
    pub fn admits(&self, author: &str, from_fork: bool) -> Result<(), PreviewRefusal> {
        if from_fork && !self.from_forks {
            return Err(PreviewRefusal::FromFork);
        }
        match &self.authors {
            Some(authors) if !authors.iter().any(|listed| listed == author) => {
                Err(PreviewRefusal::AuthorNotListed(author.to_owned()))
            }
            _ => Ok(()),
        }
    }
}

impl std::fmt::Display for PreviewRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PreviewRefusal::FromFork => write!(
                f,
                "not previewed: the pull request comes from a fork (set previews.fromForks)"
            ),
            PreviewRefusal::AuthorNotListed(author) => write!(
                f,
                "not previewed: author {author} is not in previews.authors"
            ),
        }
    }
}

/// The ServiceAccount a source applies as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceAccountRef {
    pub namespace: String,
    pub name: String,
}

impl ServiceAccountRef {
    /// The user name the apiserver knows the ServiceAccount by.
    pub fn user_name(&self) -> String {
        format!("system:serviceaccount:{}:{}", self.namespace, self.name)
    }
}

pub(super) fn check_boundary(
    checker: &mut Checker<'_>,
    field: &str,
    source: &str,
    boundary: Option<BoundaryFile>,
) -> SourceBoundary {
    let mut checked = SourceBoundary {
        source: source.to_owned(),
        ..SourceBoundary::default()
    };
    let Some(boundary) = boundary else {
        return checked;
    };
    let mut globs = |list: &str, patterns: Option<Vec<Spanned<String>>>| {
        let patterns = patterns?;
        let texts: Vec<String> = patterns
            .iter()
            .map(|pattern| pattern.value.trim().to_owned())
            .collect();
        match Globs::new(&texts) {
            Ok(globs) => Some(globs),
            Err((bad, message)) => {
                let at = patterns
                    .iter()
                    .position(|pattern| pattern.value.trim() == bad)
                    .unwrap_or(0);
                match patterns.get(at) {
                    Some(pattern) => checker.problem(
                        format!("{field}.boundary.{list}[{at}]"),
                        pattern,
                        format!("invalid glob: {message}"),
                    ),
                    None => checker.problem_unplaced(
                        format!("{field}.boundary.{list}"),
                        format!("invalid glob: {message}"),
                    ),
                }
                None
            }
        }
    };
    checked.namespaces = globs("namespaces", boundary.namespaces);
    checked.clusters = globs("clusters", boundary.clusters);
    checked.cluster_scoped_kinds = Some(
        boundary
            .cluster_scoped_kinds
            .into_iter()
            .map(|kind| kind.value.trim().to_owned())
            .collect(),
    );
    checked.denied_kinds = boundary
        .denied_kinds
        .into_iter()
        .map(|kind| kind.value.trim().to_owned())
        .collect();
    checked
}

pub(super) fn check_previews(previews: Option<PreviewsFile>) -> PreviewPolicy {
    previews.map_or_else(PreviewPolicy::default, |previews| PreviewPolicy {
        from_forks: previews.from_forks,
        authors: previews.authors,
    })
}

pub(super) fn check_service_account(
    checker: &mut Checker<'_>,
    field: &str,
    account: Option<ServiceAccountFile>,
) -> Option<ServiceAccountRef> {
    let account = account?;
    let mut valid = true;
    for (key, value) in [("namespace", &account.namespace), ("name", &account.name)] {
        if !is_dns_label(value.value.trim()) {
            checker.problem(
                format!("{field}.serviceAccount.{key}"),
                value,
                "must be lowercase letters, digits and '-', at most 63 characters",
            );
            valid = false;
        }
    }
    valid.then(|| ServiceAccountRef {
        namespace: account.namespace.value.trim().to_owned(),
        name: account.name.value.trim().to_owned(),
    })
}
