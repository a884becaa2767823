//! The plan: what applying the rendered apps would change, object by object. Pure data in, pure
//! data out — no client, no clock. Observing the cluster and applying the plan live elsewhere
//! (`observe`, `apply`).

use analyzer::{AppRef, Diagnostic};

/// Identity of a Kubernetes object: group/version/kind, namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectRef {
    /// `apps/v1`, `v1`.
    pub api_version: String,
    pub kind: String,
    /// `None` for cluster-scoped objects.
    pub namespace: Option<String>,
    pub name: String,
}

impl ObjectRef {
    /// The identity of an object given as JSON (`apiVersion`, `kind`, `metadata.name`,
    /// `metadata.namespace`), taken as written: the scope is not known here, see
    /// [`ObjectRef::with_scope`].
    ///
    /// # Errors
    ///
    /// [`ObjectRefError`] when `apiVersion`, `kind` or `metadata.name` is missing or not a
    /// non-empty string.
    pub fn from_object(object: &serde_json::Value) -> Result<ObjectRef, ObjectRefError> {
        let text = |value: Option<&serde_json::Value>| {
            value
                .and_then(serde_json::Value::as_str)
                .filter(|text| !text.is_empty())
                .map(str::to_owned)
        };
        let metadata = object.get("metadata");
        Ok(ObjectRef {
            api_version: text(object.get("apiVersion"))
                .ok_or(ObjectRefError::Missing("apiVersion"))?,
            kind: text(object.get("kind")).ok_or(ObjectRefError::Missing("kind"))?,
            namespace: text(metadata.and_then(|m| m.get("namespace"))),
            name: text(metadata.and_then(|m| m.get("name")))
                .ok_or(ObjectRefError::Missing("metadata.name"))?,
        })
    }

    /// The API group (`""` for the core group).
    pub fn group(&self) -> &str {
        self.api_version
            .rsplit_once('/')
            .map_or("", |(group, _)| group)
    }

    /// The API version without its group (`v1`).
    pub fn version(&self) -> &str {
        self.api_version
            .rsplit_once('/')
            .map_or(self.api_version.as_str(), |(_, version)| version)
    }

    /// The same reference with the namespace fixed by the kind's scope: cluster-scoped objects
    /// have none (KubeVela stamps the app namespace on every rendered object but a `Namespace`,
    /// cluster-scoped kinds included), namespaced objects without one get `default_namespace`.
    pub fn with_scope(mut self, scope: Scope, default_namespace: &str) -> ObjectRef {
        match scope {
            Scope::Cluster => self.namespace = None,
            Scope::Namespaced => {
                if self.namespace.is_none() {
                    self.namespace = Some(default_namespace.to_owned());
                }
            }
        }
        self
    }
}

/// Why a JSON value is not a Kubernetes object.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ObjectRefError {
    #[error("the object has no {0}")]
    Missing(&'static str),
}

/// Whether a kind's objects live in a namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scope {
    Namespaced,
    Cluster,
}

impl std::fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(namespace) => write!(f, "{}/{}/{}", self.kind, namespace, self.name),
            None => write!(f, "{}/{}", self.kind, self.name),
        }
    }
}

/// What the plan was computed against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlanTarget {
    /// No cluster was configured: every object is planned as a create.
    EmptyCluster,
    /// Live clusters, by name.
    Clusters(Vec<String>),
}

/// The plan of every app.
#[derive(Debug, Clone)]
pub struct Plan {
    pub target: PlanTarget,
    /// Sorted by app.
    pub apps: Vec<AppPlan>,
    /// Diagnostics not tied to one app.
    pub diagnostics: Vec<Diagnostic>,
}

/// The plan of one app.
#[derive(Debug, Clone)]
pub struct AppPlan {
    pub app: AppRef,
    /// The git revision the app was rendered from, when known.
    pub revision: Option<String>,
    /// Deletions first (the prune list), then creates, updates, conflicts and unchanged objects
    /// in apply order.
    pub changes: Vec<Change>,
    pub diagnostics: Vec<Diagnostic>,
    /// The health of the app's live objects when the plan was made (live plans only; `None`
    /// offline, for apps being deleted, and when nothing rates the app's objects).
    pub health: Option<crate::health::AppHealth>,
    /// The plan's digest ([`crate::digest`]): what it was made from. `None` for a
    /// blocked app, which has nothing to apply.
    pub digest: Option<crate::digest::AppDigest>,
}

/// One object's planned action.
#[derive(Debug, Clone)]
pub struct Change {
    pub action: Action,
    /// The target cluster's name (`local` for the default cluster).
    pub cluster: String,
    pub object: ObjectRef,
    /// Unified YAML diff (live → desired) for updates; the full desired YAML for creates; the
    /// live YAML for deletes. Empty for unchanged objects.
    pub diff: String,
    /// Field paths that change (`spec.replicas`), for updates.
    pub changed_fields: Vec<String>,
    /// Why, for conflicts (`owned by app team-a/web`) and for skipped prunes.
    pub reason: Option<String>,
}

/// The action planned for one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Action {
    Delete,
    Create,
    Update,
    Conflict,
    Unchanged,
}

impl Action {
    /// The contract name used in JSON output.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Create => "create",
            Action::Update => "update",
            Action::Delete => "delete",
            Action::Conflict => "conflict",
            Action::Unchanged => "unchanged",
        }
    }
}

impl Plan {
    /// True when any app has a create, update, delete or conflict.
    pub fn has_changes(&self) -> bool {
        self.apps.iter().any(|app| {
            app.changes
                .iter()
                .any(|change| change.action != Action::Unchanged)
        })
    }

    /// True when any app, or the snapshot itself, has an error diagnostic.
    pub fn has_errors(&self) -> bool {
        let is_error = |diagnostic: &Diagnostic| diagnostic.severity == analyzer::Severity::Error;
        self.diagnostics.iter().any(is_error)
            || self
                .apps
                .iter()
                .any(|app| app.diagnostics.iter().any(is_error))
    }
}
