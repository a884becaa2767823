//! Plan digests: a SHA-256 per app over a canonical form of what its plan was made from, and
//! one for the whole plan over the apps' digests. Two plans with the same digest were made from
//! the same desired objects, against the same live objects, under the same policies: applying
//! one is applying what the other showed.
//!
//! The canonical form is JSON built in a fixed order (objects sorted by identity):
//! - each desired object's SHA-256, taken over its hashed-Secret form
//!   ([`crate::redact::hashed_secret_form`]), so no Secret value is recoverable from the input;
//! - each live object the plan read (desired and tracked), as the SHA-256 of its content
//!   without `status` and the server's bookkeeping (`resourceVersion`, `managedFields`,
//!   `generation`), Secret values hashed, or `absent`. Deviation from a plain resourceVersion:
//!   a status-only write (a Deployment reporting its rollout) moves the resourceVersion
//!   without changing anything the plan compares, and must not void a review;
//! - the app's resource policies as parsed.
//!
//! Pure: data in, hex text out.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use sha2::Digest;

use crate::plan::Plan;
use crate::planner::{DesiredApp, LiveObjects, Observed};
use crate::redact;

/// How many hex characters of a digest statuses and comments show; commands accept any prefix
/// at least this long.
pub const SHORT_LEN: usize = 12;

const COMMENT_PREFIX: &str = "<!-- driftless:digests";

/// An app plan's digest, and the part of it that covers only what Git asks for (the desired
/// objects and policies): when two plans' digests differ, this part tells whether Git or the
/// cluster moved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppDigest {
    pub full: String,
    pub desired: String,
}

impl std::fmt::Display for AppDigest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.full)
    }
}

/// The digest of one app's plan.
pub fn app_digest(desired: &DesiredApp, live: &LiveObjects) -> AppDigest {
    let mut objects: Vec<(String, String)> = desired
        .objects
        .iter()
        .map(|object| {
            let hashed = redact::hashed_secret_form(&object.object);
            (object.object_ref.to_string(), sha256_json(&hashed))
        })
        .collect();
    objects.sort();
    let live_objects: Vec<Value> = live
        .objects
        .iter()
        .map(|(object_ref, observed)| {
            let state = match observed {
                Observed::Absent => "absent".to_owned(),
                Observed::Present { live, .. } => sha256_json(&live_content(live)),
                Observed::Failed(_) => "unreadable".to_owned(),
            };
            json!([object_ref.api_version, object_ref.to_string(), state])
        })
        .collect();
    let wanted = json!({
        "app": desired.app.to_string(),
        "objects": objects,
        // `Debug` of plain data: stable for a given agent version, which is all a review needs.
        "policies": format!("{:?}", desired.policies),
    });
    let desired_digest = sha256_json(&wanted);
    AppDigest {
        full: sha256_json(&json!({"desired": desired_digest, "live": live_objects})),
        desired: desired_digest,
    }
}

/// The digest of an app being deleted (gone from Git): the live objects its tracker lists.
pub fn deletion_digest(app: &analyzer::AppRef, live: &LiveObjects) -> AppDigest {
    let desired = DesiredApp {
        app: app.clone(),
        revision: None,
        objects: Vec::new(),
        policies: crate::policy::ResourcePolicies::default(),
        diagnostics: Vec::new(),
    };
    app_digest(&desired, live)
}

/// The digest of the whole plan: over each planned app's name and digest, in app order.
/// `None` when no app carries a digest (every app blocked).
pub fn plan_digest(plan: &Plan) -> Option<String> {
    let entries: Vec<Value> = plan
        .apps
        .iter()
        .filter_map(|app| {
            let digest = app.digest.as_ref()?;
            Some(json!([app.app.to_string(), digest.full]))
        })
        .collect();
    if entries.is_empty() {
        return None;
    }
    Some(sha256_json(&Value::Array(entries)))
}

/// A hidden markdown line carrying every app's digest (`<!-- driftless:digests ns/app=HEX
/// ... -->`): what reviewed-plan mode reads back from the pull request's plan comment. It opens
/// the comment, so no size cut can drop it.
pub fn comment_line(plan: &Plan) -> String {
    let mut line = String::from(COMMENT_PREFIX);
    for app in &plan.apps {
        if let Some(digest) = &app.digest {
            line.push_str(&format!(" {}={digest}", app.app));
        }
    }
    line.push_str(" -->");
    line
}

/// The digests per app (`namespace/name`) that [`comment_line`] wrote into `body`; empty when
/// it holds none.
pub fn digests_in_comment(body: &str) -> BTreeMap<String, String> {
    let Some(line) = body
        .lines()
        .find_map(|line| line.trim().strip_prefix(COMMENT_PREFIX))
    else {
        return BTreeMap::new();
    };
    line.trim_end_matches("-->")
        .split_whitespace()
        .filter_map(|entry| entry.split_once('='))
        .map(|(app, digest)| (app.to_owned(), digest.to_owned()))
        .collect()
}

/// The first [`SHORT_LEN`] characters of a digest.
pub fn short(digest: &str) -> &str {
    digest.get(..SHORT_LEN).unwrap_or(digest)
}

/// Whether `given` (a full digest or a prefix of at least [`SHORT_LEN`] characters, any case)
/// names `digest`.
pub fn matches(digest: &str, given: &str) -> bool {
    let given = given.trim().to_ascii_lowercase();
    given.len() >= SHORT_LEN && digest.starts_with(&given)
}

/// The live object as the digest sees it: no status, no server bookkeeping, Secret values
/// hashed.
fn live_content(live: &Value) -> Value {
    let mut content = redact::hashed_secret_form(live);
    if let Some(object) = content.as_object_mut() {
        object.remove("status");
    }
    if let Some(metadata) = content.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in ["resourceVersion", "managedFields", "generation"] {
            metadata.remove(field);
        }
    }
    content
}

/// SHA-256 of a text, hex.
pub fn sha256_text(text: &str) -> String {
    hex::encode(sha2::Sha256::digest(text.as_bytes()))
}

fn sha256_json(value: &Value) -> String {
    let bytes = serde_json::to_vec(value).expect("a JSON value always serialises");
    hex::encode(sha2::Sha256::digest(&bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::ObjectRef;
    use crate::planner::DesiredObject;

    fn desired_with(object: Value) -> DesiredApp {
        let object_ref = ObjectRef::from_object(&object).expect("valid object");
        DesiredApp {
            app: analyzer::AppRef {
                namespace: "team".into(),
                name: "web".into(),
            },
            revision: Some("abc".into()),
            objects: vec![DesiredObject {
                object_ref,
                component: "web".into(),
                component_type: None,
                trait_type: None,
                output_name: None,
                hash: crate::planner::hash_object(&object),
                object,
            }],
            policies: crate::policy::ResourcePolicies::default(),
            diagnostics: Vec::new(),
        }
    }

    fn secret(value: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": "db", "namespace": "team"},
               "stringData": {"password": value}})
    }

    #[test]
    fn the_digest_follows_desired_values_and_live_content_but_not_status() {
        let desired = desired_with(secret("hunter2"));
        let empty = LiveObjects::default();
        let first = app_digest(&desired, &empty);
        assert_eq!(first, app_digest(&desired, &empty), "deterministic");
        assert_eq!(first.full.len(), 64);
        assert_ne!(first, app_digest(&desired_with(secret("hunter3")), &empty));

        let object_ref = desired.objects[0].object_ref.clone();
        let live_at = |version: &str, data: &str, status: &str| LiveObjects {
            objects: [(
                object_ref.clone(),
                Observed::Present {
                    live: json!({"apiVersion": "v1", "kind": "Secret",
                                 "metadata": {"name": "db", "resourceVersion": version},
                                 "data": {"password": data}, "status": {"x": status}}),
                    dry_run: None,
                },
            )]
            .into(),
        };
        let planned = app_digest(&desired, &live_at("1", "aGk=", "a"));
        assert_ne!(planned, first, "absent and present differ");
        assert_eq!(planned.desired, first.desired, "the same desired objects");
        assert_eq!(planned, app_digest(&desired, &live_at("2", "aGk=", "b")));
        assert_ne!(planned, app_digest(&desired, &live_at("3", "aG8=", "b")));
    }

    #[test]
    fn secret_values_do_not_reach_the_canonical_form() {
        let hashed = redact::hashed_secret_form(&secret("hunter2"));
        assert!(!hashed.to_string().contains("hunter2"));
    }

    #[test]
    fn comment_lines_round_trip() {
        let mut plan = Plan {
            target: crate::plan::PlanTarget::EmptyCluster,
            apps: Vec::new(),
            diagnostics: Vec::new(),
        };
        assert!(digests_in_comment(&comment_line(&plan)).is_empty());
        plan.apps.push(crate::plan::AppPlan {
            app: desired_with(secret("x")).app,
            revision: None,
            changes: Vec::new(),
            diagnostics: Vec::new(),
            health: None,
            digest: Some(AppDigest {
                full: "ab".repeat(32),
                desired: "cd".repeat(32),
            }),
        });
        let body = format!("{}\n### Driftless plan\n", comment_line(&plan));
        let read = digests_in_comment(&body);
        assert_eq!(read.get("team/web"), Some(&"ab".repeat(32)));
    }

    #[test]
    fn prefixes_name_a_digest() {
        let digest = "0123456789abcdef0123";
        assert!(matches(digest, "0123456789AB"));
        assert!(!matches(digest, "0123"));
        assert!(!matches(digest, "0123456789ac"));
        assert_eq!(short(digest), "0123456789ab");
    }
}
