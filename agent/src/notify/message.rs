//! What a notification says, and the JSON each kind of channel takes: Slack's incoming-webhook
//! `{"text": …}`, a Teams message holding an Adaptive Card (what Teams workflows and incoming
//! webhooks accept), and for generic webhooks a plain document of the event's fields.
//!
//! Every text is built from app names, counts and the agent's own status descriptions, then
//! passed through [`crate::redact::url_credentials`]: no Secret value is ever part of an event,
//! and a credential in a URL quoted by an error is cut out.

use serde::Serialize;
use serde_json::{Value, json};

use crate::config::{NotificationEvent, NotificationKind};
use crate::redact::url_credentials;

/// Apps listed in one message at most; the rest are counted.
const APPS_LISTED: usize = 20;

/// One event to tell the channels about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notification {
    pub event: NotificationEvent,
    pub source: String,
    /// The commit the event is about.
    pub commit: String,
    /// One line: what happened.
    pub summary: String,
    /// The apps concerned (`namespace/name`) with what went wrong for each, when known.
    pub apps: Vec<(String, String)>,
    /// The agent's plan page for the commit.
    pub page_url: Option<String>,
}

/// The generic webhook's document.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WebhookPayload<'a> {
    event: &'static str,
    source: &'a str,
    commit: &'a str,
    summary: String,
    apps: Vec<WebhookApp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    page_url: Option<&'a str>,
}

#[derive(Serialize)]
struct WebhookApp {
    app: String,
    detail: String,
}

impl Notification {
    /// The title line: the event and where it happened.
    fn title(&self) -> String {
        let what = match self.event {
            NotificationEvent::DeployFailed => "Deploy failed",
            NotificationEvent::DriftFound => "Drift found",
            NotificationEvent::PruneHeld => "Prune held for approval",
        };
        let commit: String = self.commit.chars().take(12).collect();
        format!("{what}: source {} at {commit}", self.source)
    }

    /// The listed apps, one line each, redacted; beyond [`APPS_LISTED`] a count.
    fn app_lines(&self) -> Vec<String> {
        let mut lines: Vec<String> = self
            .apps
            .iter()
            .take(APPS_LISTED)
            .map(|(app, detail)| {
                if detail.is_empty() {
                    app.clone()
                } else {
                    format!("{app}: {}", url_credentials(detail))
                }
            })
            .collect();
        if self.apps.len() > APPS_LISTED {
            lines.push(format!("… and {} more", self.apps.len() - APPS_LISTED));
        }
        lines
    }

    /// The request body for a channel of `kind`.
    pub fn body(&self, kind: NotificationKind) -> Value {
        let summary = url_credentials(&self.summary);
        match kind {
            NotificationKind::Slack => {
                let mut text = format!("*{}*\n{summary}", self.title());
                for line in self.app_lines() {
                    text.push_str(&format!("\n• {line}"));
                }
                if let Some(url) = &self.page_url {
                    text.push_str(&format!("\n<{url}|Plan page>"));
                }
                json!({ "text": text })
            }
            NotificationKind::Teams => {
                let mut card_body = vec![
                    json!({"type": "TextBlock", "text": self.title(), "weight": "Bolder", "wrap": true}),
                    json!({"type": "TextBlock", "text": summary, "wrap": true}),
                ];
                for line in self.app_lines() {
                    card_body.push(
                        json!({"type": "TextBlock", "text": format!("- {line}"), "wrap": true}),
                    );
                }
                let mut card = json!({
                    "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
                    "type": "AdaptiveCard",
                    "version": "1.4",
                    "body": card_body,
                });
                if let Some(url) = &self.page_url {
                    card["actions"] =
                        json!([{"type": "Action.OpenUrl", "title": "Plan page", "url": url}]);
                }
                json!({
                    "type": "message",
                    "attachments": [{
                        "contentType": "application/vnd.microsoft.card.adaptive",
                        "content": card,
                    }],
                })
            }
            NotificationKind::Webhook => {
                let payload = WebhookPayload {
                    event: self.event.as_str(),
                    source: &self.source,
                    commit: &self.commit,
                    summary,
                    apps: self
                        .apps
                        .iter()
                        .map(|(app, detail)| WebhookApp {
                            app: app.clone(),
                            detail: url_credentials(detail),
                        })
                        .collect(),
                    page_url: self.page_url.as_deref(),
                };
                serde_json::to_value(payload).unwrap_or(Value::Null)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed() -> Notification {
        Notification {
            event: NotificationEvent::DeployFailed,
            source: "platform".to_owned(),
            commit: "0123456789abcdef0123".to_owned(),
            summary: "1 of 2 app(s) failed".to_owned(),
            apps: vec![(
                "team-a/web".to_owned(),
                "fetching https://user:hunter2@git.example.com/x.git failed".to_owned(),
            )],
            page_url: Some("https://driftless.example.com/plans/0123".to_owned()),
        }
    }

    #[test]
    fn each_kind_gets_its_shape_and_no_url_credential() {
        let notification = failed();
        let slack = notification.body(NotificationKind::Slack);
        let text = slack["text"].as_str().expect("slack text");
        assert!(
            text.starts_with("*Deploy failed: source platform at 0123456789ab*"),
            "{text}"
        );
        assert!(text.contains("• team-a/web: fetching https://"), "{text}");
        assert!(text.contains("<https://driftless.example.com/plans/0123|Plan page>"));

        let teams = notification.body(NotificationKind::Teams);
        let card = &teams["attachments"][0];
        assert_eq!(
            card["contentType"],
            "application/vnd.microsoft.card.adaptive"
        );
        assert_eq!(card["content"]["type"], "AdaptiveCard");
        assert_eq!(
            card["content"]["actions"][0]["url"],
            "https://driftless.example.com/plans/0123"
        );

        let webhook = notification.body(NotificationKind::Webhook);
        assert_eq!(webhook["event"], "deployFailed");
        assert_eq!(webhook["apps"][0]["app"], "team-a/web");
        for body in [slack, teams, webhook] {
            let text = body.to_string();
            assert!(!text.contains("hunter2"), "{text}");
        }
    }

    #[test]
    fn long_app_lists_are_cut_with_a_count() {
        let mut notification = failed();
        notification.event = NotificationEvent::DriftFound;
        notification.apps = (0..25)
            .map(|i| (format!("ns/app-{i}"), String::new()))
            .collect();
        let slack = notification.body(NotificationKind::Slack);
        let text = slack["text"].as_str().expect("slack text");
        assert!(text.contains("• ns/app-19"), "{text}");
        assert!(!text.contains("app-20"), "{text}");
        assert!(text.contains("… and 5 more"), "{text}");
    }
}
