//! Tests of config parsing and checking: valid files, and invalid ones whose message names the
//! field.

use std::path::Path;
use std::time::Duration;

use super::*;

fn env() -> Environment {
    Environment::from_pairs([
        ("GIT_TOKEN", "git-token-value-123"),
        ("FORGE_TOKEN", "forge-token-value-456"),
        ("HOOK_SECRET", "hook-secret-789"),
        ("EMPTY", "  "),
    ])
}

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::parse(
        text,
        Path::new("driftless.yaml"),
        Path::new("/etc/driftless"),
        &env(),
    )
}

fn problems(text: &str) -> Vec<FieldProblem> {
    match parse(text) {
        Err(ConfigError::Invalid { problems, .. }) => problems,
        other => panic!("expected invalid fields, got {other:?}"),
    }
}

fn parse_error(text: &str) -> String {
    match parse(text) {
        Err(error @ ConfigError::ParseFailed { .. }) => error.to_string(),
        other => panic!("expected a parse error, got {other:?}"),
    }
}

const FULL: &str = r#"
sources:
  - name: platform
    url: https://git.example.com/platform/apps.git
    branch: release
    paths:
      include: ["apps/**", "definitions/**"]
      exclude: ["**/README.md"]
    pollInterval: 1m30s
    credentials:
      token: { env: GIT_TOKEN }
  - name: local
    url: file:///srv/git/local
    createNamespaces: false
clusters:
  - name: prod
    kubeconfig: kube/prod.yaml
    context: prod-admin
    labels: { env: prod }
forge:
  kind: gitea
  baseUrl: http://127.0.0.1:3000/
  token: { env: FORGE_TOKEN }
drift:
  schedule: "*/10 * * * *"
  mode: correct
server:
  listen: 0.0.0.0:9090
  externalUrl: https://driftless.example.com/
  webhookSecret: { env: HOOK_SECRET }
qps: 5
burst: 10
concurrency: 2
cacheDir: cache
"#;

#[test]
fn full_config_is_checked_into_typed_values() {
    let config = parse(FULL).unwrap();
    assert_eq!(config.sources.len(), 2);
    let platform = &config.sources[0];
    assert_eq!(platform.name, "platform");
    assert_eq!(platform.branch, "release");
    assert_eq!(platform.poll_interval, Duration::from_secs(90));
    assert_eq!(
        platform.forge_repo,
        Some(RepoSlug {
            owner: "platform".into(),
            name: "apps".into()
        })
    );
    assert_eq!(
        platform.paths.check("apps/web/app.yaml"),
        PathMatch::Included
    );
    assert_eq!(
        platform.paths.check("apps/web/README.md"),
        PathMatch::Excluded
    );
    assert_eq!(
        platform.paths.check("docs/index.md"),
        PathMatch::NotIncluded
    );
    match &platform.credentials {
        Some(GitCredentials::Token { token, .. }) => {
            assert_eq!(token.expose(), "git-token-value-123")
        }
        other => panic!("expected a token, got {other:?}"),
    }
    assert_eq!(
        platform.create_namespaces,
        crate::namespaces::CreateNamespaces::WhenMissing
    );
    let local = &config.sources[1];
    assert_eq!(
        local.create_namespaces,
        crate::namespaces::CreateNamespaces::Never
    );
    assert_eq!(local.branch, "main");
    assert_eq!(local.poll_interval, Duration::from_secs(60));
    assert_eq!(
        local.paths.check("anything/at/all.yaml"),
        PathMatch::Included
    );

    assert_eq!(
        config.clusters[0].kubeconfig.as_deref(),
        Some(Path::new("/etc/driftless/kube/prod.yaml"))
    );
    assert_eq!(
        config.clusters[0].labels.get("env").map(String::as_str),
        Some("prod")
    );
    let forge = config.forge.as_ref().unwrap();
    assert_eq!(forge.kind, ForgeKind::Gitea);
    assert_eq!(forge.base_url, "http://127.0.0.1:3000");
    let drift = config.drift.as_ref().unwrap();
    assert_eq!(drift.mode, DriftMode::Correct);
    assert_eq!(config.server.listen.port(), 9090);
    assert_eq!(config.server.external_url, "https://driftless.example.com");
    assert_eq!((config.qps, config.burst, config.concurrency), (5.0, 10, 2));
    assert_eq!(config.cache_dir, Path::new("/etc/driftless/cache"));
}

#[test]
fn five_field_cron_fires_on_the_minute() {
    let schedule = parse_cron("*/10 * * * *").unwrap();
    let start = chrono::DateTime::parse_from_rfc3339("2026-01-01T10:03:20Z")
        .unwrap()
        .with_timezone(&chrono::Utc);
    let next = schedule.after(&start).next().unwrap();
    assert_eq!(next.to_rfc3339(), "2026-01-01T10:10:00+00:00");
}

#[test]
fn secrets_never_print() {
    let config = parse(FULL).unwrap();
    let debug = format!("{config:?}");
    for secret in [
        "git-token-value-123",
        "forge-token-value-456",
        "hook-secret-789",
    ] {
        assert!(!debug.contains(secret), "{secret} leaked into Debug output");
    }
    assert!(debug.contains("***"));
    assert_eq!(Secret::new("x").to_string(), "***");
}

#[test]
fn unknown_field_is_named_with_its_line() {
    let message = parse_error("sources:\n  - name: a\n    url: file:///x\n    brnch: main\n");
    assert!(message.contains("brnch"), "{message}");
    assert!(message.contains('4'), "line missing: {message}");
}

#[test]
fn missing_url_is_named() {
    let message = parse_error("sources:\n  - name: a\n");
    assert!(message.contains("url"), "{message}");
}

#[test]
fn bad_drift_mode_is_named() {
    let message = parse_error(
        "sources: [{name: a, url: 'file:///x'}]\ndrift: { schedule: '* * * * *', mode: fix }\n",
    );
    assert!(message.contains("fix"), "{message}");
}

#[test]
fn invalid_values_name_field_and_line() {
    let text = "\
sources:
  - name: a
    url: file:///x
    pollInterval: 5 minutes
    paths:
      include: ['apps/**', 'apps/[']
  - name: a
    url: ftp://example.com/x
    branch: 'bad..branch'
drift:
  schedule: 'every day'
server:
  listen: localhost
concurrency: 0
";
    let problems = problems(text);
    let by_field: Vec<(&str, u64)> = problems
        .iter()
        .map(|p| (p.field.as_str(), p.line))
        .collect();
    assert_eq!(
        by_field,
        vec![
            ("sources[0].paths.include[1]", 6),
            ("sources[0].pollInterval", 4),
            ("sources[1].name", 7),
            ("sources[1].url", 8),
            ("sources[1].branch", 9),
            ("drift.schedule", 11),
            ("server.listen", 13),
            ("concurrency", 14),
        ],
        "{problems:#?}"
    );
    let message = parse(text).unwrap_err().to_string();
    assert!(
        message.contains("line 4, column 19: sources[0].pollInterval: invalid duration"),
        "{message}"
    );
}

#[test]
fn secret_problems_name_the_field() {
    let problems = problems(
        "\
sources:
  - name: a
    url: https://example.com/o/r.git
    credentials: { token: { env: MISSING } }
forge: { kind: gitea, baseUrl: 'http://x', token: { env: EMPTY } }
server: { webhookSecret: { env: A, file: b } }
",
    );
    let messages: Vec<String> = problems.iter().map(ToString::to_string).collect();
    assert_eq!(problems[0].field, "sources[0].credentials.token");
    assert!(messages[0].contains("MISSING is not set"), "{messages:?}");
    assert_eq!(problems[1].field, "forge.token");
    assert!(messages[1].contains("EMPTY is empty"), "{messages:?}");
    assert_eq!(problems[2].field, "server.webhookSecret");
    assert!(messages[2].contains("not both"), "{messages:?}");
}

#[test]
fn secret_from_file_relative_to_config() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("token"), "file-token\n").unwrap();
    let text = "sources: [{name: a, url: 'https://h/o/r', credentials: {token: {file: token}}}]\n";
    let config = Config::parse(text, Path::new("x.yaml"), dir.path(), &env()).unwrap();
    match &config.sources[0].credentials {
        Some(GitCredentials::Token { token, .. }) => assert_eq!(token.expose(), "file-token"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn url_with_embedded_password_is_refused() {
    let problems = problems("sources: [{name: a, url: 'https://user:tok@h/o/r'}]\n");
    assert_eq!(problems[0].field, "sources[0].url");
    assert!(problems[0].message.contains("credentials"));
    assert!(!problems[0].to_string().contains("tok@"));
}

#[test]
fn gitea_and_gitlab_need_a_base_url() {
    for kind in ["gitea", "gitlab"] {
        let problems = problems(&format!(
            "sources: [{{name: a, url: 'file:///x'}}]\nforge: {{ kind: {kind}, token: {{ env: FORGE_TOKEN }} }}\n"
        ));
        assert_eq!(problems[0].field, "forge.baseUrl");
        assert!(problems[0].message.contains(kind), "{}", problems[0]);
    }
    let config = parse(
        "sources: [{name: a, url: 'file:///x'}]\nforge: { kind: gitlab, baseUrl: 'https://gitlab.example.com/', token: { env: FORGE_TOKEN } }\n",
    )
    .unwrap();
    let forge = config.forge.unwrap();
    assert_eq!(forge.kind, ForgeKind::Gitlab);
    assert_eq!(forge.base_url, "https://gitlab.example.com");
}

#[test]
fn no_sources_is_an_error() {
    let problems = problems("clusters: []\n");
    assert_eq!(problems[0].field, "sources");
}

#[test]
fn durations() {
    assert_eq!(parse_duration("500ms"), Some(Duration::from_millis(500)));
    assert_eq!(parse_duration("1h30m"), Some(Duration::from_secs(5400)));
    assert_eq!(parse_duration("30"), None);
    assert_eq!(parse_duration("s"), None);
    assert_eq!(parse_duration("10d"), None);
}

#[test]
fn repo_slugs_from_urls() {
    let slug = |url: &str| RepoSlug::from_url(url).map(|slug| slug.to_string());
    assert_eq!(slug("https://h/o/r.git").as_deref(), Some("o/r"));
    assert_eq!(
        slug("http://127.0.0.1:3000/driftless/demo").as_deref(),
        Some("driftless/demo")
    );
    assert_eq!(
        slug("git@github.com:org/repo.git").as_deref(),
        Some("org/repo")
    );
    assert_eq!(slug("ssh://git@h:22/org/repo").as_deref(), Some("org/repo"));
    assert_eq!(slug("https://h/"), None);
}

/// The example configs in the repository stay valid against the schema (their secrets point at
/// files and variables that only exist where they are deployed, so only the schema is checked).
#[test]
fn shipped_examples_match_the_schema() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let example = std::fs::read_to_string(root.join("examples/repo/driftless.yaml")).unwrap();
    let parsed: ConfigFile = serde_saphyr::from_str(&example).unwrap();
    assert_eq!(parsed.sources.len(), 1);

    let manifests = std::fs::read_to_string(root.join("deploy/config.yaml")).unwrap();
    let documents: Vec<serde_json::Value> = serde_saphyr::from_multiple(&manifests).unwrap();
    let embedded = documents
        .iter()
        .find_map(|document| {
            document
                .pointer("/data/driftless.yaml")
                .and_then(|v| v.as_str())
        })
        .unwrap();
    let env = Environment::from_pairs([
        ("GIT_TOKEN", "a"),
        ("FORGE_TOKEN", "b"),
        ("WEBHOOK_SECRET", "c"),
    ]);
    let config = Config::parse(
        embedded,
        Path::new("deploy/config.yaml"),
        Path::new("/"),
        &env,
    )
    .unwrap();
    assert_eq!(config.clusters[0].kubeconfig, None, "in-cluster config");
    assert_eq!(config.server.listen.port(), 8080);
}

#[test]
fn a_prune_budget_is_read_with_its_defaults_and_a_bad_share_is_named() {
    let config = parse(
        "sources:\n  - name: a\n    url: https://example.com/o/r.git\n    prune: { maxObjects: 7 }\n  - name: b\n    url: https://example.com/o/s.git\n",
    )
    .unwrap();
    assert_eq!(config.sources[0].prune.max_objects, 7);
    assert_eq!(config.sources[0].prune.max_percent, 30);
    assert_eq!(
        config.sources[1].prune,
        crate::prune_guard::PruneBudget::default()
    );
    let problems = problems(
        "sources:\n  - name: a\n    url: https://example.com/o/r.git\n    prune: { maxPercent: 0 }\n",
    );
    let by_field: Vec<(&str, u64)> = problems
        .iter()
        .map(|p| (p.field.as_str(), p.line))
        .collect();
    assert_eq!(by_field, vec![("sources[0].prune.maxPercent", 4)]);
}

#[test]
fn source_boundaries_previews_and_service_accounts() {
    let config = parse(
        r#"
sources:
  - name: team-a
    url: https://git.example.com/team-a/apps.git
    boundary:
      namespaces: [team-a, "team-a-*"]
      deniedKinds: [Secret]
    previews: { fromForks: true, authors: [alice] }
    serviceAccount: { namespace: team-a, name: deployer }
  - name: open
    url: https://git.example.com/open/apps.git
"#,
    )
    .unwrap();
    let team_a = &config.sources[0];
    let boundary = &team_a.boundary;
    assert!(boundary.check_namespace("team-a-dev").is_ok());
    assert!(boundary.check_namespace("kube-system").is_err());
    assert!(boundary.check_namespace("driftless-system").is_err());
    assert_eq!(boundary.cluster_scoped_kinds, Some(Vec::new()));
    assert!(
        boundary
            .check_object("v1", "Secret", "db", Some("team-a"))
            .is_err()
    );
    assert_eq!(team_a.previews.admits("alice", true), Ok(()));
    assert_eq!(
        team_a.previews.admits("mallory", false),
        Err(PreviewRefusal::AuthorNotListed("mallory".into()))
    );
    assert_eq!(
        team_a
            .service_account
            .as_ref()
            .map(ServiceAccountRef::user_name),
        Some("system:serviceaccount:team-a:deployer".to_owned())
    );
    // Nothing declared: anywhere but the tracker namespace; no fork previews.
    let open = &config.sources[1];
    assert!(open.boundary.check_namespace("kube-system").is_ok());
    assert!(open.boundary.check_namespace("driftless-system").is_err());
    assert_eq!(open.boundary.cluster_scoped_kinds, None);
    assert_eq!(open.previews.admits("anyone", false), Ok(()));
    assert_eq!(
        open.previews.admits("anyone", true),
        Err(PreviewRefusal::FromFork)
    );
    assert_eq!(open.service_account, None);
}

#[test]
fn bad_boundary_globs_and_service_accounts_name_the_field() {
    let problems = problems(
        r#"
sources:
  - name: team-a
    url: https://git.example.com/team-a/apps.git
    boundary: { namespaces: ["team-[a"] }
    serviceAccount: { namespace: Team_A, name: deployer }
"#,
    );
    let fields: Vec<&str> = problems.iter().map(|p| p.field.as_str()).collect();
    assert_eq!(
        fields,
        [
            "sources[0].boundary.namespaces[0]",
            "sources[0].serviceAccount.namespace"
        ]
    );
}

#[test]
fn short_api_tokens_and_bad_trusted_headers_are_refused() {
    let problems = problems(
        r#"
sources: [{ name: a, url: "https://h/o/r.git" }]
server:
  apiToken: { env: HOOK_SECRET }
  trustedHeader: "bad header"
"#,
    );
    let fields: Vec<&str> = problems.iter().map(|p| p.field.as_str()).collect();
    assert_eq!(fields, ["server.apiToken", "server.trustedHeader"]);
}

#[test]
fn analysis_settings_reach_the_agent_with_the_cluster_registry() {
    let config = parse(
        "sources:\n  - name: a\n    url: file:///srv/git/a\nclusters:\n  - name: prod\n\
         analysis:\n  rules: { missing-probes: error }\n  limits: { steps: 1000, appSeconds: 2 }\n",
    )
    .expect("valid");
    assert_eq!(
        config.analysis.rules.get("missing-probes"),
        Some(&analyzer::RuleLevel::Error)
    );
    assert_eq!(
        config.analysis.limits.map(|limits| limits.steps),
        Some(1000)
    );
    assert_eq!(
        config.analysis.known_clusters,
        Some(vec!["prod".to_owned()])
    );
}

#[test]
fn an_unknown_analysis_rule_is_a_config_problem() {
    let problems = problems(
        "sources:\n  - name: a\n    url: file:///srv/git/a\nanalysis:\n  rules: { no-such-rule: off }\n",
    );
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].field, "analysis");
    assert!(problems[0].message.contains("no-such-rule"), "{problems:?}");
}

#[test]
fn notification_channels_are_checked_and_their_urls_stay_secret() {
    let config = parse(
        "sources: [{ name: platform, url: https://git.example.com/a.git }]
notifications:
  - { name: ops, kind: slack, url: { env: HOOK_SECRET } }
  - { name: pager, kind: webhook, url: { env: GIT_TOKEN }, token: { env: FORGE_TOKEN }, events: [pruneHeld] }
",
    );
    // The env values are not URLs: refused, naming the field, never the value.
    let Err(ConfigError::Invalid {
        problems: found, ..
    }) = config
    else {
        panic!("expected invalid fields, got {config:?}");
    };
    assert_eq!(found.len(), 2, "{found:?}");
    assert_eq!(found[0].field, "notifications[0].url");
    assert_eq!(found[0].message, "must hold an http:// or https:// URL");
    let text = format!("{found:?}");
    assert!(
        !text.contains("hook-secret-789") && !text.contains("git-token-value-123"),
        "{text}"
    );

    let env = Environment::from_pairs([
        ("SLACK_URL", "https://hooks.slack.com/services/T0/B0/secret"),
        ("HOOK_TOKEN", "bearer-value"),
    ]);
    let config = Config::parse(
        "sources: [{ name: platform, url: https://git.example.com/a.git }]
notifications:
  - { name: ops, kind: slack, url: { env: SLACK_URL } }
  - { name: pager, kind: webhook, url: { env: SLACK_URL }, token: { env: HOOK_TOKEN }, events: [pruneHeld] }
",
        Path::new("driftless.yaml"),
        Path::new("/etc/driftless"),
        &env,
    )
    .expect("a valid config");
    assert_eq!(config.notifications.len(), 2);
    assert_eq!(config.notifications[0].kind, NotificationKind::Slack);
    assert_eq!(
        config.notifications[0].events,
        NotificationEvent::ALL.into_iter().collect()
    );
    assert_eq!(
        config.notifications[1].events,
        [NotificationEvent::PruneHeld].into_iter().collect()
    );
    let text = format!("{config:?}");
    assert!(
        !text.contains("services/T0") && !text.contains("bearer-value"),
        "{text}"
    );

    let problems = problems(
        "sources: [{ name: platform, url: https://git.example.com/a.git }]
notifications:
  - { name: ops, kind: teams, url: { env: HOOK_SECRET }, token: { env: GIT_TOKEN }, events: [] }
  - { name: ops, kind: slack, url: { env: MISSING } }
",
    );
    let fields: Vec<&str> = problems
        .iter()
        .map(|problem| problem.field.as_str())
        .collect();
    assert_eq!(
        fields,
        [
            "notifications[0].url",
            "notifications[0].token",
            "notifications[0].events",
            "notifications[1].name",
            "notifications[1].url",
        ],
        "{problems:?}"
    );
}

#[test]
fn sharding_is_checked_with_its_defaults_and_named_fields() {
    let source =
        "sources:\n  - { name: platform, url: https://git.example.com/a.git, branch: main }\n";
    let config = parse(source).expect("valid");
    assert!(config.sharding.is_none());
    let config = parse(&format!(
        "{source}sharding:\n  replicaId: driftless-0\n  namespace: agents\n  leaseDuration: 5s\n  epsilon: 0.1\n"
    ))
    .expect("valid");
    let sharding = config.sharding.expect("sharding on");
    assert_eq!(sharding.replica_id, "driftless-0");
    assert_eq!(sharding.namespace, "agents");
    assert_eq!(sharding.lease_duration, Duration::from_secs(5));
    assert!((sharding.epsilon - 0.1).abs() < f64::EPSILON);
    let defaults = parse(&format!("{source}sharding: {{}}\n")).expect("valid");
    let defaults = defaults.sharding.expect("sharding on");
    assert_eq!(defaults.namespace, "driftless-system");
    assert_eq!(defaults.lease_duration, Duration::from_secs(15));
    let found = problems(&format!(
        "{source}sharding:\n  replicaId: Driftless_0\n  leaseDuration: 100ms\n"
    ));
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].field, "sharding.replicaId");
    assert_eq!(found[0].line, 4);
    let found = problems(&format!("{source}sharding:\n  epsilon: -1\n"));
    assert_eq!(found[0].field, "sharding.epsilon");
}
