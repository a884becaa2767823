//! The `notification` step's effect: a webhook POST through reqwest. Runs in the caller, never
//! in the scheduler; its result goes back through `engine::record`.
//!
//! Channels: `webhook` (any JSON `message`) and `slack` (`message` with `text`, blocks...),
//! each with `url.value`. Deviation: URLs given as `url.secretRef`, and the `email`,
//! `dingding` and `lark` channels, are reported as a failed step rather than sent, because the
//! agent does not read Secrets from the cluster for notifications.

use super::engine::StepOutcome;

/// Sends every channel in the step's properties; the first failure fails the step.
pub async fn send_notification(
    client: &reqwest::Client,
    properties: &serde_json::Value,
) -> StepOutcome {
    let mut sent = Vec::new();
    for channel in ["webhook", "slack", "email", "dingding", "lark"] {
        let Some(config) = properties.get(channel) else {
            continue;
        };
        let Some(url) = config
            .get("url")
            .and_then(|url| url.get("value"))
            .and_then(|value| value.as_str())
        else {
            return StepOutcome::Failed {
                reason: "NotificationUnsupported".to_owned(),
                message: format!(
                    "{channel} notification needs url.value; Driftless sends no other form"
                ),
            };
        };
        let message = config
            .get("message")
            .cloned()
            .unwrap_or(serde_json::Value::Null);
        match client.post(url).json(&message).send().await {
            Ok(response) if response.status().is_success() => sent.push(channel),
            Ok(response) => {
                return StepOutcome::Failed {
                    reason: "NotificationFailed".to_owned(),
                    message: format!("{channel} notification answered {}", response.status()),
                };
            }
            Err(error) => {
                return StepOutcome::Failed {
                    reason: "NotificationFailed".to_owned(),
                    // Without the URL: it may hold a token (Slack webhook URLs do).
                    message: format!("sending {channel} notification: {}", error.without_url()),
                };
            }
        }
    }
    StepOutcome::Succeeded {
        result: serde_json::json!({ "output": { "sent": sent } }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[tokio::test]
    async fn posts_the_message_and_reports_failures() {
        let received: Arc<Mutex<Vec<serde_json::Value>>> = Arc::default();
        let sink = received.clone();
        let app = axum::Router::new()
            .route(
                "/ok",
                axum::routing::post(move |axum::Json(body): axum::Json<serde_json::Value>| {
                    let sink = sink.clone();
                    async move {
                        sink.lock().unwrap().push(body);
                        "ok"
                    }
                }),
            )
            .route(
                "/broken",
                axum::routing::post(|| async { axum::http::StatusCode::INTERNAL_SERVER_ERROR }),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        let client = reqwest::Client::new();

        let outcome = send_notification(
            &client,
            &serde_json::json!({"webhook": {"url": {"value": format!("http://{address}/ok")}, "message": {"text": "deployed"}}}),
        )
        .await;
        assert_eq!(
            outcome,
            StepOutcome::Succeeded {
                result: serde_json::json!({"output": {"sent": ["webhook"]}})
            }
        );
        assert_eq!(
            received.lock().unwrap().clone(),
            vec![serde_json::json!({"text": "deployed"})]
        );

        let outcome = send_notification(
            &client,
            &serde_json::json!({"slack": {"url": {"value": format!("http://{address}/broken")}, "message": {"text": "x"}}}),
        )
        .await;
        assert!(
            matches!(&outcome, StepOutcome::Failed { reason, message } if reason == "NotificationFailed" && message.contains("500")),
            "{outcome:?}"
        );

        let outcome = send_notification(
            &client,
            &serde_json::json!({"webhook": {"url": {"secretRef": {"name": "s", "key": "k"}}}}),
        )
        .await;
        assert!(
            matches!(outcome, StepOutcome::Failed { reason, .. } if reason == "NotificationUnsupported")
        );
    }
}
