//! Failed API calls described in one line, and which of them pass by themselves.

/// A clear, one-line description of a failed API call, for per-object errors in plans.
pub fn describe_error(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => {
            let what = match status.code {
                401 => "unauthorized",
                403 => "forbidden (RBAC)",
                404 => "not found",
                409 => "conflict",
                422 => "rejected as invalid (validation or admission)",
                400 => "bad request (admission or validation)",
                429 => "throttled by the apiserver",
                500..=599 => "apiserver error",
                _ => "request failed",
            };
            let message = if status.message.is_empty() {
                status.reason.clone()
            } else {
                status.message.clone()
            };
            format!("{what} ({}): {message}", status.code)
        }
        kube::Error::HyperError(_) | kube::Error::Service(_) => {
            format!("apiserver unreachable or timed out: {}", error_chain(error))
        }
        other => error_chain(other),
    }
}

/// What [`describe_error`] writes for failures that pass by themselves: the apiserver
/// unreachable or timing out, answering 5xx or 429, or a write losing a race (409).
const TRANSIENT: [&str; 5] = [
    "apiserver unreachable or timed out",
    "apiserver error (5",
    "throttled by the apiserver (429)",
    "conflict (409)",
    // A resource tracker written by someone else between our read and our write.
    "was changed by someone else meanwhile",
];

/// True when a failure's description (made by [`describe_error`], possibly within a longer
/// message) says it may pass by itself, so the work is worth trying again later.
pub fn is_transient(description: &str) -> bool {
    TRANSIENT.iter().any(|marker| description.contains(marker))
}

/// True when the apiserver answered with this HTTP status.
pub fn has_status(error: &kube::Error, code: u16) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == code)
}

fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_errors_say_what_went_wrong() {
        let status = |code: u16, message: &str| {
            kube::Error::Api(Box::new(kube::core::Status {
                code,
                message: message.to_owned(),
                ..kube::core::Status::default()
            }))
        };
        assert_eq!(
            describe_error(&status(403, "configmaps is forbidden")),
            "forbidden (RBAC) (403): configmaps is forbidden"
        );
        assert!(
            describe_error(&status(422, "spec.replicas: Invalid"))
                .starts_with("rejected as invalid")
        );
        assert!(has_status(&status(409, "x"), 409));
    }

    #[test]
    fn outages_throttling_and_races_are_transient_and_refusals_are_not() {
        let status = |code: u16| {
            describe_error(&kube::Error::Api(Box::new(kube::core::Status {
                code,
                message: "m".to_owned(),
                ..kube::core::Status::default()
            })))
        };
        let unreachable = describe_error(&kube::Error::Service("connection refused".into()));
        for transient in [
            status(500),
            status(503),
            status(429),
            status(409),
            unreachable,
        ] {
            assert!(
                is_transient(&format!("v1/ConfigMap x: {transient}")),
                "{transient}"
            );
        }
        for refusal in [status(400), status(403), status(404), status(422)] {
            assert!(!is_transient(&refusal), "{refusal}");
        }
    }
}
