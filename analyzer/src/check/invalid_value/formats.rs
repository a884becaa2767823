//! The string formats the API server validates (`k8s.io/apimachinery/pkg/util/validation`):
//! each returns why the value is invalid, or `None`.

/// A DNS-1123 label (`IsDNS1123Label`): container, volume and namespace names.
pub(crate) fn dns1123_label(value: &str) -> Option<&'static str> {
    if value.len() > 63 {
        return Some("must be no more than 63 characters");
    }
    (!is_label(value, |c| c.is_ascii_lowercase() || c.is_ascii_digit()))
        .then_some("must be a lowercase RFC 1123 label: lowercase letters, digits and '-', starting and ending with a letter or digit")
}

/// A DNS-1123 subdomain (`IsDNS1123Subdomain`): most object names.
pub(crate) fn dns1123_subdomain(value: &str) -> Option<&'static str> {
    if value.len() > 253 {
        return Some("must be no more than 253 characters");
    }
    let valid = value
        .split('.')
        .all(|label| is_label(label, |c| c.is_ascii_lowercase() || c.is_ascii_digit()));
    (!valid).then_some("must be a lowercase RFC 1123 subdomain: lowercase letters, digits, '-' and '.', starting and ending with a letter or digit")
}

/// A DNS-1035 label (`IsDNS1035Label`): Service names.
pub(crate) fn dns1035_label(value: &str) -> Option<&'static str> {
    if value.len() > 63 {
        return Some("must be no more than 63 characters");
    }
    let starts_with_letter = value.starts_with(|c: char| c.is_ascii_lowercase());
    (!(starts_with_letter && is_label(value, |c| c.is_ascii_lowercase() || c.is_ascii_digit())))
        .then_some("must be a lowercase RFC 1035 label: lowercase letters, digits and '-', starting with a letter and ending with a letter or digit")
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?` with `alnum` deciding the letters and digits.
fn is_label(value: &str, alnum: impl Fn(char) -> bool) -> bool {
    !value.is_empty()
        && value.starts_with(&alnum)
        && value.ends_with(&alnum)
        && value.chars().all(|c| alnum(c) || c == '-')
}

/// An IANA service name (`IsValidPortName`): named ports.
pub(crate) fn port_name(value: &str) -> Option<&'static str> {
    if value.len() > 15 {
        return Some("must be no more than 15 characters");
    }
    if !value
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    {
        return Some("must contain only lowercase letters, digits and '-'");
    }
    if !value.chars().any(|c| c.is_ascii_lowercase()) {
        return Some("must contain at least one letter");
    }
    if value.contains("--") {
        return Some("must not contain consecutive hyphens");
    }
    if value.starts_with('-') || value.ends_with('-') {
        return Some("must not begin or end with a hyphen");
    }
    None
}

/// A port number (`IsValidPortNum`).
pub(crate) fn port_number(value: i64) -> Option<&'static str> {
    (!(1..=65535).contains(&value)).then_some("must be between 1 and 65535, inclusive")
}

/// A label or annotation key (`IsQualifiedName`): an optional DNS subdomain prefix and `/`,
/// then a name of at most 63 characters.
pub(crate) fn qualified_name(value: &str) -> Option<&'static str> {
    let name = match value.split_once('/') {
        Some((prefix, name)) => {
            if prefix.is_empty() || dns1123_subdomain(prefix).is_some() {
                return Some("must have a DNS subdomain prefix before '/'");
            }
            name
        }
        None => value,
    };
    if name.is_empty() || name.len() > 63 {
        return Some("must have a name part of 1 to 63 characters");
    }
    (!is_qualified_name_part(name))
        .then_some("must consist of letters, digits, '-', '_' or '.', starting and ending with a letter or digit")
}

fn is_qualified_name_part(value: &str) -> bool {
    value.starts_with(|c: char| c.is_ascii_alphanumeric())
        && value.ends_with(|c: char| c.is_ascii_alphanumeric())
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// A label value (`IsValidLabelValue`): empty, or at most 63 characters of a qualified name.
pub(crate) fn label_value(value: &str) -> Option<&'static str> {
    if value.is_empty() {
        return None;
    }
    if value.len() > 63 {
        return Some("must be no more than 63 characters");
    }
    (!is_qualified_name_part(value))
        .then_some("must consist of letters, digits, '-', '_' or '.', starting and ending with a letter or digit")
}

/// An environment variable name (`IsRelaxedEnvVarName`, the only rule since 1.34): printable
/// ASCII without `=`.
pub(crate) fn env_var_name(value: &str) -> Option<&'static str> {
    if value.is_empty() {
        return Some("is required");
    }
    (!value.chars().all(|c| (' '..='~').contains(&c) && c != '='))
        .then_some("must consist of printable ASCII characters other than '='")
}

/// The syntax of a resource quantity (`resource.ParseQuantity`).
#[cfg(test)]
fn quantity(value: &str) -> Option<&'static str> {
    (!crate::schema::is_quantity(value)).then_some("must be a quantity")
}

/// A quantity's sign: true when it is negative (and not zero).
pub(crate) fn quantity_is_negative(value: &str) -> bool {
    value.starts_with('-') && value.chars().any(|c| ('1'..='9').contains(&c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_accept_and_reject_as_the_api_server_does() {
        assert_eq!(dns1123_label("web-1"), None);
        assert!(dns1123_label("Web").is_some());
        assert!(dns1123_label("-web").is_some());
        assert!(dns1123_label(&"a".repeat(64)).is_some());
        assert_eq!(dns1123_subdomain("web.team-a"), None);
        assert!(dns1123_subdomain("web..a").is_some());
        assert!(dns1123_subdomain("web_a").is_some());
        assert_eq!(dns1035_label("web"), None);
        assert!(dns1035_label("1web").is_some());
        assert_eq!(port_name("http-metrics"), None);
        assert!(port_name("http-metrics-port").is_some());
        assert!(port_name("8080").is_some());
        assert!(port_name("a--b").is_some());
        assert!(port_name("HTTP").is_some());
        assert_eq!(port_number(65535), None);
        assert!(port_number(65536).is_some());
        assert!(port_number(0).is_some());
        assert_eq!(qualified_name("app.kubernetes.io/name"), None);
        assert_eq!(qualified_name("app_Name.x"), None);
        assert!(qualified_name("a/b/c").is_some());
        assert!(qualified_name("-x").is_some());
        assert_eq!(label_value(""), None);
        assert!(label_value("a b").is_some());
        assert_eq!(env_var_name("1_MY.VAR-x"), None);
        assert!(env_var_name("A=B").is_some());
        assert!(env_var_name("").is_some());
        for valid in [
            "1", "500m", "1.5Gi", "1e3", "+2", "-1", ".5", "5.", "1E-3", "100Mi",
        ] {
            assert_eq!(quantity(valid), None, "{valid}");
        }
        for invalid in ["", "m", "1.2.3", "1 Gi", "1GB", "1mi", "e3", "1e", "one"] {
            assert!(quantity(invalid).is_some(), "{invalid}");
        }
        assert!(quantity_is_negative("-1"));
        assert!(!quantity_is_negative("-0"));
    }
}
