//! `notifications[]`: the chat channels and webhooks told about deploy failures, drift and held
//! prunes, as written ([`NotificationFile`]) and checked ([`NotificationChannel`]).
//!
//! ```yaml
//! notifications:
//!   - { name: ops, kind: slack, url: { env: SLACK_WEBHOOK_URL } }
//!   - { name: oncall, kind: webhook, url: { file: /run/secrets/hook-url }, token: { env: HOOK_TOKEN },
//!       events: [deployFailed, pruneHeld] }
//! ```
//!
//! The URL is a secret reference, never a literal: a Slack or Teams incoming-webhook URL is
//! itself the credential, so it comes from the environment or a file, like every token.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;
use serde_saphyr::Spanned;

use super::{Checker, Secret, SecretRef, is_dns_label};

/// One channel, as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NotificationFile {
    pub name: Spanned<String>,
    pub kind: Spanned<NotificationKind>,
    pub url: Spanned<SecretRef>,
    pub token: Option<Spanned<SecretRef>>,
    pub events: Option<Spanned<Vec<NotificationEvent>>>,
}

/// Where a notification goes: the message shape differs per kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NotificationKind {
    /// A Slack incoming webhook (`{"text": …}`).
    Slack,
    /// A Microsoft Teams workflow or incoming webhook (an Adaptive Card message).
    Teams,
    /// Any HTTP endpoint: a JSON document with the event's fields.
    Webhook,
}

/// What is notified.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum NotificationEvent {
    /// An app of a deploy failed (render, analysis, plan or apply).
    DeployFailed,
    /// A drift check found live objects that differ from the deployed revision.
    DriftFound,
    /// A pass's prunes were held by the prune budget and wait for approval.
    PruneHeld,
}

impl NotificationEvent {
    /// Every event, the default of `events`.
    pub const ALL: [NotificationEvent; 3] = [
        NotificationEvent::DeployFailed,
        NotificationEvent::DriftFound,
        NotificationEvent::PruneHeld,
    ];

    /// The name used in the config and in webhook payloads.
    pub fn as_str(self) -> &'static str {
        match self {
            NotificationEvent::DeployFailed => "deployFailed",
            NotificationEvent::DriftFound => "driftFound",
            NotificationEvent::PruneHeld => "pruneHeld",
        }
    }
}

/// One checked channel.
#[derive(Debug, Clone)]
pub struct NotificationChannel {
    pub name: String,
    pub kind: NotificationKind,
    /// The endpoint; a secret (Slack and Teams URLs carry their credential).
    pub url: Secret,
    /// Sent as `Authorization: Bearer` (webhooks only).
    pub token: Option<Secret>,
    pub events: BTreeSet<NotificationEvent>,
}

pub(super) fn check_notifications(
    checker: &mut Checker<'_>,
    channels: Vec<NotificationFile>,
) -> Vec<NotificationChannel> {
    let mut checked = Vec::new();
    let mut names = BTreeMap::new();
    for (idx, channel) in channels.into_iter().enumerate() {
        let field = format!("notifications[{idx}]");
        let name = channel.name.value.clone();
        if !is_dns_label(&name) {
            checker.problem(
                format!("{field}.name"),
                &channel.name,
                "must be a DNS label (lowercase letters, digits and '-')",
            );
        }
        if let Some(previous) = names.insert(name.clone(), idx) {
            checker.problem(
                format!("{field}.name"),
                &channel.name,
                format!("duplicate channel name {name:?} (also notifications[{previous}])"),
            );
        }
        let kind = channel.kind.value;
        let url = checker.spanned_secret(&format!("{field}.url"), &channel.url);
        // The URL is a secret: the message names the problem, never the value.
        if let Some(url) = &url
            && !(url.expose().starts_with("https://") || url.expose().starts_with("http://"))
        {
            checker.problem(
                format!("{field}.url"),
                &channel.url,
                "must hold an http:// or https:// URL",
            );
        }
        let token = match &channel.token {
            Some(token) if kind != NotificationKind::Webhook => {
                checker.problem(
                    format!("{field}.token"),
                    token,
                    "is for kind webhook only (a Slack or Teams URL carries its own credential)",
                );
                None
            }
            Some(token) => checker.spanned_secret(&format!("{field}.token"), token),
            None => None,
        };
        let events: BTreeSet<NotificationEvent> = match &channel.events {
            Some(events) if events.value.is_empty() => {
                checker.problem(
                    format!("{field}.events"),
                    events,
                    "must name at least one event (leave it out for every event)",
                );
                BTreeSet::new()
            }
            Some(events) => events.value.iter().copied().collect(),
            None => NotificationEvent::ALL.into_iter().collect(),
        };
        if let Some(url) = url {
            checked.push(NotificationChannel {
                name,
                kind,
                url,
                token,
                events,
            });
        }
    }
    checked
}
