//! `invalid-name` (error): an Application name that is not a DNS-1123 subdomain, or a
//! component name that is not a DNS-1123 label.
//!
//! The API server rejects the Application, and component names become object names (a
//! Deployment, a Service), so they must be lowercase alphanumerics and `-`, start and end
//! with an alphanumeric, at most 63 characters (253 for the app, which may contain `.`).
//!
//! ```yaml
//! metadata:
//!   name: My_App            # error: not a DNS-1123 subdomain
//! spec:
//!   components:
//!     - name: Web           # error: not a DNS-1123 label
//! ```

use super::AppContext;
use crate::Diagnostic;

pub(crate) fn check(ctx: &AppContext<'_>, out: &mut Vec<Diagnostic>) {
    let positions = &ctx.loaded.document.positions;
    let name = &ctx.loaded.app.metadata.name;
    if !is_dns1123_subdomain(name) {
        out.push(Diagnostic::error(
            "invalid-name",
            format!(
                "Application name `{name}` is not a valid DNS-1123 subdomain (lowercase \
                 alphanumerics, `-` and `.`, at most 253 characters)"
            ),
            Some(positions.value_span("/metadata/name")),
        ));
    }
    for (index, component) in ctx.loaded.app.spec.components.iter().enumerate() {
        // An empty name is already a `missing-field` error.
        if component.name.is_empty() || is_dns1123_label(&component.name) {
            continue;
        }
        out.push(
            Diagnostic::error(
                "invalid-name",
                format!(
                    "component name `{}` is not a valid DNS-1123 label (lowercase \
                     alphanumerics and `-`, at most 63 characters)",
                    component.name
                ),
                Some(positions.value_span(&format!("/spec/components/{index}/name"))),
            )
            .for_component(&component.name),
        );
    }
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, at most 63 bytes (Kubernetes' `IsDNS1123Label`).
pub(crate) fn is_dns1123_label(name: &str) -> bool {
    let bytes = name.as_bytes();
    let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes.first().is_some_and(alnum)
        && bytes.last().is_some_and(alnum)
        && bytes.iter().all(|b| alnum(b) || *b == b'-')
}

/// Dot-separated DNS-1123 labels, at most 253 bytes (Kubernetes' `IsDNS1123Subdomain`).
pub(crate) fn is_dns1123_subdomain(name: &str) -> bool {
    name.len() <= 253 && name.split('.').all(is_dns1123_label)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_subdomains() {
        assert!(is_dns1123_label("web-1"));
        assert!(!is_dns1123_label("Web"));
        assert!(!is_dns1123_label("-web"));
        assert!(!is_dns1123_label("web_1"));
        assert!(!is_dns1123_label(&"a".repeat(64)));
        assert!(is_dns1123_subdomain("my.app"));
        assert!(!is_dns1123_subdomain("my..app"));
        assert!(!is_dns1123_label("my.app"));
    }
}
