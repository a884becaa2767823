//! `unserved-api` (error): a rendered object's `apiVersion` and `kind` are not served by the
//! target Kubernetes release (1.34), or not by the CustomResourceDefinitions of the
//! repository.
//!
//! Built-in groups (`v1`, `apps`, `rbac.authorization.k8s.io`, ...) are checked against what
//! a default kube-apiserver 1.34 serves: a typo in the kind, a version that never existed
//! (`apps/v2`), and a retired or disabled alpha or beta version
//! (`rbac.authorization.k8s.io/v1alpha1`) are all rejected by the API server. The message
//! suggests the closest served `apiVersion` and `kind`, and says when Kubernetes deprecated the
//! version. A version the deprecation data knows as removed is `removed-api-version`'s, not
//! this rule's. A cluster that enables an alpha or beta version with `--runtime-config` can
//! make this rule a warning in `driftless.yaml`.
//!
//! A custom group is checked only when the repository has a CustomResourceDefinition of that
//! group: then the kind and version must be one it serves. A group with no CRD in the
//! repository may be installed in the cluster and is not reported.
//!
//! ```yaml
//! objects:
//!   - apiVersion: v1
//!     kind: ConfgMap         # error: v1 ConfgMap is not served by Kubernetes 1.34; did you mean v1 ConfigMap?
//!   - apiVersion: apps/v2    # error: apps/v2 Deployment is not served ...; did you mean apps/v1 Deployment?
//!     kind: Deployment
//! ```

use super::AppContext;
use super::api_versions::{RetiredApi, builtin_apis, group_of, is_removed};
use crate::{Diagnostic, RenderedObject};

/// `retired` is the object's entry in the table of retired API versions, if any.
pub(crate) fn check(
    ctx: &AppContext<'_>,
    object: &RenderedObject,
    api_version: &str,
    kind: &str,
    retired: Option<&RetiredApi>,
    out: &mut Vec<Diagnostic>,
) {
    if retired.is_some_and(is_removed) {
        return;
    }
    let builtin = builtin_apis();
    let group = group_of(api_version);
    let (served_by, suggestion) = if builtin.is_builtin_group(group) {
        if builtin.serves(api_version, kind) {
            return;
        }
        let suggestion = builtin
            .suggest(api_version, kind)
            .map(|(v, k)| (v.to_owned(), k.to_owned()));
        ("Kubernetes 1.34", suggestion)
    } else {
        let declared = ctx.crd_schemas.declared();
        let of_group: Vec<&(Box<str>, Box<str>)> = declared
            .iter()
            .filter(|(v, _)| group_of(v) == group)
            .collect();
        if of_group.is_empty()
            || of_group
                .iter()
                .any(|(v, k)| **v == *api_version && **k == *kind)
        {
            return;
        }
        let suggestion = of_group
            .iter()
            .find(|(_, k)| **k == *kind)
            .or_else(|| {
                of_group
                    .iter()
                    .min_by_key(|(_, k)| strsim::damerau_levenshtein(k, kind))
            })
            .map(|(v, k)| (v.to_string(), k.to_string()));
        ("the repository's CustomResourceDefinitions", suggestion)
    };
    // The field that is wrong: the version when the suggestion keeps the kind.
    let (hint, field) = match suggestion {
        Some((v, k)) if k == kind => (format!("; did you mean {v} {k}?"), "/apiVersion"),
        Some((v, k)) => (format!("; did you mean {v} {k}?"), "/kind"),
        None => (String::new(), "/kind"),
    };
    let deprecated = match retired {
        Some(api) => format!(" (deprecated since 1.{})", api.deprecated_in),
        None => String::new(),
    };
    out.push(ctx.at_object(
        object,
        Diagnostic::error(
            "unserved-api",
            format!(
                "{}: {api_version} {kind}{deprecated} is not served by {served_by}{hint}",
                super::object_label(&object.object)
            ),
            Some(ctx.field_span(object, field)),
        ),
    ));
}
