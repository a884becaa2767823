//! The reference of `driftless.yaml`: every field of every section with its default and what it
//! does, rendered to `docs/configuration.md`. A test checks each section's fields against the
//! config types (serde's own list of the fields a struct accepts), and the committed page
//! against [`markdown`], so neither can drift from the code.

use crate::source::relay::FetchBudget;

/// One section of the file (a YAML mapping read into one of the `*File` types).
pub struct Section {
    /// Where it appears: `sources[]`, `sources[].fetch`.
    pub path: &'static str,
    pub about: &'static str,
    pub fields: Vec<Field>,
}

/// One field: its YAML name, its default (`required`, `none`, a value) and what it does.
pub struct Field {
    pub name: &'static str,
    pub default: String,
    pub about: &'static str,
}

fn field(name: &'static str, default: impl Into<String>, about: &'static str) -> Field {
    Field {
        name,
        default: default.into(),
        about,
    }
}

fn seconds(duration: std::time::Duration) -> String {
    format!("`{}s`", duration.as_secs())
}

fn mebibytes(bytes: u64) -> String {
    format!("`{}Mi`", bytes / (1024 * 1024))
}

/// Every section, in the order of the page.
pub fn sections() -> Vec<Section> {
    let fetch = FetchBudget::default();
    let prune = crate::prune_guard::PruneBudget::default();
    vec![
        Section {
            path: "(top level)",
            about: "The agent's configuration file, `driftless agent --config driftless.yaml`. Relative paths are resolved against the file's directory.",
            fields: vec![
                field(
                    "sources",
                    "required",
                    "The git repositories to deploy (at least one); see `sources[]`.",
                ),
                field(
                    "clusters",
                    "the in-cluster identity",
                    "Clusters to deploy to; see `clusters[]`.",
                ),
                field(
                    "forge",
                    "none",
                    "Where commit statuses and pull-request comments go; see `forge`.",
                ),
                field(
                    "drift",
                    "none",
                    "When to look for drift and what to do about it; see `drift`.",
                ),
                field(
                    "server",
                    "see `server`",
                    "The HTTP server: probes, metrics, webhooks, plan pages.",
                ),
                field(
                    "sharding",
                    "none (one agent deploys every app)",
                    "Replicas sharing each source's apps through Leases; see `sharding`.",
                ),
                field(
                    "notifications",
                    "none",
                    "Slack, Teams and webhook channels told about failures, drift and held prunes; see `notifications[]`.",
                ),
                field(
                    "qps",
                    "`20`",
                    "Kubernetes API requests per second, per cluster.",
                ),
                field("burst", "`40`", "Requests allowed in a burst above `qps`."),
                field(
                    "concurrency",
                    "`4`",
                    "Apps planned or applied at once, across all sources.",
                ),
                field("cacheDir", "`.driftless-cache`", "Where git caches live."),
                field(
                    "analysis",
                    "none",
                    "Analyzer settings (severity per rule, suppressions); see RULES.md.",
                ),
            ],
        },
        Section {
            path: "sources[]",
            about: "One git repository the agent polls, renders and deploys.",
            fields: vec![
                field(
                    "name",
                    "required",
                    "A DNS label; the source's identity in trackers, statuses and metrics.",
                ),
                field(
                    "url",
                    "required",
                    "`https://`, `http://`, `ssh://`, `user@host:path` or `file://`. Never with a password in it: use `credentials`.",
                ),
                field("branch", "`main`", "The branch deployed."),
                field(
                    "paths",
                    "every path",
                    "Include and exclude globs; see `sources[].paths`.",
                ),
                field(
                    "pollInterval",
                    "`60s`",
                    "How often the branch is fetched (webhooks make it sooner).",
                ),
                field(
                    "credentials",
                    "none",
                    "How to authenticate; see `sources[].credentials`.",
                ),
                field(
                    "forgeRepo",
                    "read off the URL",
                    "`owner/name` on the forge, for statuses and comments.",
                ),
                field(
                    "knownHosts",
                    "required for SSH",
                    "The SSH host keys trusted, as `known_hosts` lines (`ssh-keyscan HOST`); host keys are checked strictly.",
                ),
                field(
                    "caFile",
                    "none",
                    "PEM certificate authorities trusted for this HTTPS remote, beside the system's.",
                ),
                field(
                    "fetch",
                    "see `sources[].fetch`",
                    "The fetch's depth and network budget.",
                ),
                field(
                    "boundary",
                    "none",
                    "What the source's apps may touch (namespaces, clusters, kinds).",
                ),
                field(
                    "previews",
                    "same-repository pull requests",
                    "Which pull requests get plan previews.",
                ),
                field(
                    "serviceAccount",
                    "the agent's identity",
                    "The ServiceAccount the source's apps are applied as.",
                ),
                field(
                    "createNamespaces",
                    "`true`",
                    "Whether the apps' missing namespaces are created.",
                ),
                field(
                    "prune",
                    "see `sources[].prune`",
                    "How much one pass may prune before it waits for approval.",
                ),
                field(
                    "applyReviewedPlan",
                    "`false`",
                    "Apply a merged pull request's apps only when their plan digest is the one last posted on the pull request; hold the others with a new plan posted, until approved.",
                ),
                field(
                    "reviewedPlan",
                    "see `sources[].reviewedPlan`",
                    "Direct pushes and approvers of reviewed-plan mode.",
                ),
            ],
        },
        Section {
            path: "sources[].reviewedPlan",
            about: "Used with `applyReviewedPlan: true`. A held app is applied once approved: a `/driftless apply` comment on the pull request from an approver, or `driftless approve APP --digest D`.",
            fields: vec![
                field(
                    "directPushes",
                    "`hold`",
                    "`hold` or `apply`: what a commit that no previewed pull request merged gets (squash and rebase merges count as direct pushes).",
                ),
                field(
                    "approvers",
                    "none",
                    "Forge logins whose `/driftless apply` comment approves a held plan.",
                ),
            ],
        },
        Section {
            path: "sources[].paths",
            about: "Globs over repository paths; a file is part of the source when it matches an include (or there are none) and no exclude.",
            fields: vec![
                field(
                    "include",
                    "every path",
                    "Globs of paths that belong to the source.",
                ),
                field("exclude", "none", "Globs of paths left out."),
            ],
        },
        Section {
            path: "sources[].credentials",
            about: "Exactly one of `token`, `password`, `sshKey` or `githubApp`. Secrets are `{ env: NAME }` or `{ file: PATH }`, read once at start; they never appear in logs or messages.",
            fields: vec![
                field(
                    "username",
                    "`driftless` (HTTP), `git` (SSH)",
                    "The user name sent with the token, password or key.",
                ),
                field(
                    "token",
                    "none",
                    "An access token, sent as the HTTP basic-auth password.",
                ),
                field("password", "none", "A password for HTTP basic auth."),
                field("sshKey", "none", "An SSH private key (OpenSSH or PEM)."),
                field("sshKeyPassphrase", "none", "The key's passphrase."),
                field(
                    "githubApp",
                    "none",
                    "A GitHub App installation whose tokens authenticate git over HTTPS; see `sources[].credentials.githubApp`.",
                ),
            ],
        },
        Section {
            path: "sources[].credentials.githubApp",
            about: "The app's private key signs a JWT (RS256) that is exchanged at `POST {apiUrl}/app/installations/{installationId}/access_tokens` for an installation token; the token is cached until five minutes before it expires and sent as the password of `x-access-token`. Neither key nor token is ever logged.",
            fields: vec![
                field("appId", "required", "The GitHub App's id."),
                field(
                    "installationId",
                    "required",
                    "The id of the app's installation on the repository's owner.",
                ),
                field(
                    "privateKey",
                    "required",
                    "The app's private key (PEM), usually `{ file: PATH }` from a mounted Secret.",
                ),
                field(
                    "apiUrl",
                    "`https://api.github.com`",
                    "The API root; GitHub Enterprise Server: `https://HOST/api/v3`.",
                ),
            ],
        },
        Section {
            path: "sources[].fetch",
            about: "The budget of every fetch: a fetch over it fails with the reason, the last good revision stays deployed, and other sources are not held up.",
            fields: vec![
                field(
                    "depth",
                    "`1`",
                    "Commits of history fetched; `0` fetches the whole history.",
                ),
                field(
                    "connectTimeout",
                    seconds(fetch.connect_timeout),
                    "Connecting to the remote.",
                ),
                field(
                    "lowSpeedLimit",
                    format!("`{}`", fetch.low_speed_limit),
                    "Bytes per second under which a transfer counts as stalled.",
                ),
                field(
                    "lowSpeedTime",
                    seconds(fetch.low_speed_time),
                    "How long a transfer may stay under `lowSpeedLimit`.",
                ),
                field("timeout", seconds(fetch.timeout), "The whole fetch."),
                field(
                    "maxSize",
                    mebibytes(fetch.max_fetch_bytes),
                    "Bytes received in one fetch (`512Mi`, `1Gi`, or bytes).",
                ),
                field(
                    "maxFileSize",
                    mebibytes(fetch.max_file_bytes),
                    "The size of one file read from a commit.",
                ),
            ],
        },
        Section {
            path: "sources[].prune",
            about: "Prunes over either limit wait for approval.",
            fields: vec![
                field(
                    "maxObjects",
                    format!("`{}`", prune.max_objects),
                    "Objects one pass may delete.",
                ),
                field(
                    "maxPercent",
                    format!("`{}`", prune.max_percent),
                    "Percent (1-100) of the source's objects one pass may delete (checked for larger sources only).",
                ),
            ],
        },
        Section {
            path: "clusters[]",
            about: "Clusters the agent deploys to; the first is `local`.",
            fields: vec![
                field(
                    "name",
                    "required",
                    "The cluster's name in placements and plans.",
                ),
                field(
                    "kubeconfig",
                    "the in-cluster identity",
                    "A kubeconfig file.",
                ),
                field("context", "the current context", "The kubeconfig context."),
                field(
                    "labels",
                    "none",
                    "Labels for topology policies' cluster selectors.",
                ),
            ],
        },
        Section {
            path: "forge",
            about: "Where commit statuses and pull-request comments go.",
            fields: vec![
                field("kind", "required", "`github`, `gitea` or `gitlab`."),
                field("baseUrl", "the forge's public API", "The API base URL."),
                field(
                    "token",
                    "required without `githubApp`",
                    "The API token (a secret reference).",
                ),
                field(
                    "githubApp",
                    "none",
                    "Instead of `token`: a GitHub App installation whose tokens authenticate the API calls, exchanged and cached as for `sources[].credentials.githubApp` (the same fields).",
                ),
                field(
                    "appStatusLimit",
                    "100",
                    "The most per-app commit statuses (`driftless/<namespace>/<app>`) one deploy posts. A deploy of more apps (the first deploy of a large repository) posts them only for the apps that did not succeed, at most this many; the `driftless` summary status and the plan page cover every app. 0: the summary alone.",
                ),
            ],
        },
        Section {
            path: "drift",
            about: "Re-planning the deployed revision against the cluster on a schedule.",
            fields: vec![
                field("schedule", "required", "A cron expression."),
                field(
                    "mode",
                    "required",
                    "`report` (status and metric) or `correct` (re-apply).",
                ),
            ],
        },
        Section {
            path: "server",
            about: "The agent's HTTP server: `/healthz`, `/readyz`, `/metrics`, `/webhooks/{gitea,github,gitlab}`, `/plans/<commit>`, and the web UI under `/ui`.",
            fields: vec![
                field("listen", "`0.0.0.0:8080`", "The address to listen on."),
                field(
                    "externalUrl",
                    "`http://<listen>`",
                    "The URL statuses link plan pages under.",
                ),
                field(
                    "webhookSecret",
                    "none (webhooks off)",
                    "The shared secret of forge webhooks.",
                ),
                field(
                    "apiToken",
                    "none",
                    "A bearer token that plan pages require.",
                ),
                field(
                    "trustedHeader",
                    "none",
                    "A header set by an authenticating proxy that plan pages require.",
                ),
                field(
                    "operatorToken",
                    "none (nobody acts in the UI)",
                    "A bearer token (a secret reference, 16 characters or more) that reads what `apiToken` reads and may also resume workflows and approve rollout batches in the web UI (`/ui`). Browsers sign in with either token at `/ui/login`.",
                ),
                field(
                    "groupsHeader",
                    "none",
                    "The header an authenticating proxy lists the user's groups in, comma-separated (`X-Forwarded-Groups`).",
                ),
                field(
                    "operatorGroups",
                    "none",
                    "Users of `trustedHeader` in any of these groups (read from `groupsHeader`) may resume and approve in the web UI; everyone else only reads.",
                ),
            ],
        },
        Section {
            path: "sharding",
            about: "Scale-out: replicas of the agent share each source's apps through Leases (member, claim and leader Leases).",
            fields: vec![
                field(
                    "replicaId",
                    "`$POD_NAME`",
                    "This replica's name among the members (unique per running replica); `--replica-id` overrides it.",
                ),
                field(
                    "namespace",
                    "`$POD_NAMESPACE`, else `driftless-system`",
                    "Where the member and claim Leases live.",
                ),
                field(
                    "leaseDuration",
                    "`15s`",
                    "A replica silent this long is gone; its apps move to the others.",
                ),
                field(
                    "epsilon",
                    format!("`{}`", crate::shard::assign::DEFAULT_EPSILON),
                    "Load bound: no replica holds more than ⌈(1 + ε) × average⌉ apps.",
                ),
            ],
        },
        Section {
            path: "notifications[]",
            about: "One channel told about events. Delivered in the background, in order, retried with backoff (or the `Retry-After` asked for) while the channel is down; messages name apps, commits and what failed, never a Secret value or a credential.",
            fields: vec![
                field(
                    "name",
                    "required",
                    "A DNS label naming the channel in logs.",
                ),
                field(
                    "kind",
                    "required",
                    "`slack` (incoming webhook), `teams` (workflow or incoming webhook; an Adaptive Card) or `webhook` (a JSON document: `event`, `source`, `commit`, `summary`, `apps[]`, `pageUrl`).",
                ),
                field(
                    "url",
                    "required",
                    "The endpoint, as a secret reference (a Slack or Teams webhook URL is a credential).",
                ),
                field(
                    "token",
                    "none",
                    "For `webhook`: a secret sent as `Authorization: Bearer`.",
                ),
                field(
                    "events",
                    "every event",
                    "Which of `deployFailed`, `driftFound` and `pruneHeld` to send. The same news is sent once (per source, commit and apps).",
                ),
            ],
        },
        Section {
            path: "secret references",
            about: "Every secret (`token`, `sshKey`, `webhookSecret`, …) is one of these.",
            fields: vec![
                field("env", "none", "An environment variable holding the secret."),
                field("file", "none", "A file holding the secret."),
            ],
        },
    ]
}

/// `docs/configuration.md`.
pub fn markdown() -> String {
    let mut text = String::from(
        "# `driftless.yaml` reference\n\n\
         Generated from the config types by `agent/src/config/reference.rs`; a test fails when \
         this page and the code disagree (regenerate with `UPDATE_EXPECT=1 cargo test -p agent \
         configuration_reference`).\n",
    );
    for section in sections() {
        text.push_str(&format!("\n## `{}`\n\n{}\n\n", section.path, section.about));
        text.push_str("| Field | Default | Description |\n| --- | --- | --- |\n");
        for field in &section.fields {
            text.push_str(&format!(
                "| `{}` | {} | {} |\n",
                field.name, field.default, field.about
            ));
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{
        ClusterFile, ConfigFile, CredentialsFile, DriftFile, FetchFile, ForgeFile, PathsFile,
        SecretRef, ServerFile, SourceFile,
    };

    /// The fields `T` accepts, from serde's error for an unknown one.
    fn accepted<T: serde::de::DeserializeOwned>() -> Vec<String> {
        let error = match serde_saphyr::from_str::<T>("not-a-field-of-any-section: 1\n") {
            Ok(_) => panic!("a made-up field was accepted"),
            // The first line; a source snippet follows.
            Err(error) => error
                .to_string()
                .lines()
                .next()
                .unwrap_or_default()
                .to_owned(),
        };
        // `unknown field `x`, expected one of a, b, c` (or `expected a or b`, or `expected a`).
        let list = error
            .split_once("expected one of ")
            .or_else(|| error.split_once("expected "))
            .map(|(_, list)| list)
            .unwrap_or_else(|| panic!("no field list in {error:?}"));
        list.split([',', ' '])
            .map(|name| name.trim().trim_matches('`'))
            .filter(|name| !name.is_empty() && *name != "or")
            .map(str::to_owned)
            .collect()
    }

    fn documented(path: &str) -> Vec<String> {
        let sections = sections();
        let section = sections
            .iter()
            .find(|section| section.path == path)
            .unwrap_or_else(|| panic!("no section {path}"));
        section
            .fields
            .iter()
            .map(|field| field.name.to_owned())
            .collect()
    }

    #[test]
    fn every_field_of_the_types_is_documented_and_nothing_else() {
        let check = |path: &str, mut fields: Vec<String>| {
            let mut documented = documented(path);
            fields.sort();
            documented.sort();
            assert_eq!(
                documented, fields,
                "section {path} of docs/configuration.md"
            );
        };
        check("(top level)", accepted::<ConfigFile>());
        check("sources[]", accepted::<SourceFile>());
        check("sources[].paths", accepted::<PathsFile>());
        check("sources[].credentials", accepted::<CredentialsFile>());
        check(
            "sources[].credentials.githubApp",
            accepted::<crate::config::sources::GithubAppFile>(),
        );
        check("sources[].fetch", accepted::<FetchFile>());
        check(
            "sources[].prune",
            accepted::<crate::config::sources::PruneFile>(),
        );
        check(
            "sources[].reviewedPlan",
            accepted::<crate::config::reviewed::ReviewedPlanFile>(),
        );
        check("clusters[]", accepted::<ClusterFile>());
        check("forge", accepted::<ForgeFile>());
        check("drift", accepted::<DriftFile>());
        check("server", accepted::<ServerFile>());
        check("sharding", accepted::<crate::config::ShardingFile>());
        check(
            "notifications[]",
            accepted::<crate::config::NotificationFile>(),
        );
        check("secret references", accepted::<SecretRef>());
    }

    #[test]
    fn configuration_reference() {
        expect_test::expect_file!["../../../docs/configuration.md"].assert_eq(&markdown());
    }
}
