//! The analyzer against the real kube-apiserver: every object of the generated corpus
//! (`support/corpus.rs`) is sent as Driftless applies it, a forced server-side apply, with
//! `dryRun=All` and `fieldValidation=Strict` in the test's namespace, and the API server's
//! verdict is compared with the analyzer's, offline, on the same object given to a
//! `k8s-objects` component. An object without a name is sent to its collection (which the API
//! server refuses: nothing can be applied without a name).
//!
//! Must hold: no false error (the analyzer never rejects what the API server accepts), and at
//! least 90 % of the API server's rejections caught. CI runs a sample (every 8th case); the
//! whole corpus runs with `DRIFTLESS_APISERVER_DIFF=full` (`hack/apiserver-diff.sh`), which
//! also writes the report of misses to `DRIFTLESS_APISERVER_DIFF_REPORT` when set.

use std::collections::HashMap;
use std::fmt::Write as _;

use anyhow::{Context as _, Result, bail};
use futures::{StreamExt as _, stream};
use kube::Client;
use kube::api::PostParams;
use kube::discovery::{Discovery, Scope};
use serde_json::Value;

use analyzer::{AnalysisOptions, Definitions, Severity, Snapshot, SourceFile};

use crate::support::cluster::{TestCluster, TestNamespace};
use crate::support::corpus::{Case, corpus};

/// The API server's verdict on one object.
enum Verdict {
    Accepted,
    Rejected(String),
}

#[tokio::test]
async fn the_analyzer_rejects_what_the_apiserver_rejects_and_nothing_else() -> Result<()> {
    let cluster = TestCluster::shared().await?;
    let ns = TestNamespace::new(&cluster, "apiserver-diff").await?;
    let full = std::env::var("DRIFTLESS_APISERVER_DIFF").is_ok_and(|value| value == "full");
    let cases: Vec<Case> = corpus(&ns.name)
        .into_iter()
        .enumerate()
        .filter(|(index, _)| full || index % 8 == 0)
        .map(|(_, case)| case)
        .collect();
    let resources = resources(&cluster.client).await?;
    let verdicts: Vec<Verdict> = stream::iter(&cases)
        .map(|case| dry_run(&cluster.client, &resources, &ns.name, case))
        .buffered(8)
        .collect::<Vec<Result<Verdict>>>()
        .await
        .into_iter()
        .collect::<Result<_>>()?;
    let findings = analyze(&cases, &ns.name);

    let mut report = String::new();
    let (mut rejected, mut caught, mut false_errors) = (0, 0, 0);
    let mut misses = String::new();
    let mut false_list = String::new();
    for ((case, verdict), errors) in cases.iter().zip(&verdicts).zip(&findings) {
        match (verdict, errors.is_empty()) {
            (Verdict::Rejected(_), false) => {
                rejected += 1;
                caught += 1;
            }
            (Verdict::Rejected(message), true) => {
                rejected += 1;
                writeln!(misses, "- {}: {message}", case.description)?;
            }
            (Verdict::Accepted, false) => {
                false_errors += 1;
                writeln!(false_list, "- {}: {}", case.description, errors.join("; "))?;
            }
            (Verdict::Accepted, true) => {}
        }
    }
    let rate = if rejected == 0 {
        100.0
    } else {
        100.0 * f64::from(caught) / f64::from(rejected)
    };
    writeln!(
        report,
        "# The analyzer against kube-apiserver 1.34 (dryRun=All, fieldValidation=Strict)\n\n\
         {} objects; the API server rejected {rejected}; the analyzer caught {caught} of them \
         offline ({rate:.1} %); false errors: {false_errors}.\n",
        cases.len()
    )?;
    writeln!(
        report,
        "## False errors (the analyzer rejects, the API server accepts)\n\n{false_list}"
    )?;
    writeln!(
        report,
        "## Misses (the API server rejects, the analyzer does not)\n\n{misses}"
    )?;
    println!("{report}");
    if let Ok(path) = std::env::var("DRIFTLESS_APISERVER_DIFF_REPORT") {
        std::fs::write(&path, &report).with_context(|| format!("writing {path}"))?;
    }
    if false_errors > 0 {
        bail!("{false_errors} false errors (see the report above)");
    }
    if rate < 90.0 {
        bail!("only {rate:.1} % of the API server's rejections caught (see the report above)");
    }
    Ok(())
}

/// Each served `(apiVersion, kind)`: its plural and whether it is namespaced.
async fn resources(client: &Client) -> Result<HashMap<(String, String), (String, bool)>> {
    let discovery = Discovery::new(client.clone())
        .run()
        .await
        .context("discovering the API server's resources")?;
    let mut out = HashMap::new();
    for group in discovery.groups() {
        for (resource, capabilities) in group.recommended_resources() {
            out.insert(
                (resource.api_version.clone(), resource.kind.clone()),
                (
                    resource.plural.clone(),
                    matches!(capabilities.scope, Scope::Namespaced),
                ),
            );
        }
        for version in group.versions() {
            for (resource, capabilities) in group.versioned_resources(version) {
                out.entry((resource.api_version.clone(), resource.kind.clone()))
                    .or_insert((
                        resource.plural.clone(),
                        matches!(capabilities.scope, Scope::Namespaced),
                    ));
            }
        }
    }
    Ok(out)
}

/// Applies `case` with `dryRun=All`: at the URL of its own `apiVersion` and `kind` when served,
/// else of the base kind's resource under the object's `apiVersion` (a 404 for an unserved one).
async fn dry_run(
    client: &Client,
    resources: &HashMap<(String, String), (String, bool)>,
    namespace: &str,
    case: &Case,
) -> Result<Verdict> {
    let text = |pointer: &str| case.object.pointer(pointer).and_then(Value::as_str);
    let api_version = text("/apiVersion")
        .filter(|version| !version.is_empty())
        .unwrap_or(&case.base_type.0);
    let kind = text("/kind").unwrap_or_default();
    let (plural, namespaced) = resources
        .get(&(api_version.to_owned(), kind.to_owned()))
        .or_else(|| resources.get(&case.base_type))
        .context("the base kind is served")?;
    let prefix = if api_version.contains('/') {
        format!("/apis/{api_version}")
    } else {
        format!("/api/{api_version}")
    };
    let mut path = if *namespaced {
        format!("{prefix}/namespaces/{namespace}/{plural}")
    } else {
        format!("{prefix}/{plural}")
    };
    if let Some(name) = text("/metadata/name").filter(|name| !name.is_empty()) {
        path = format!("{path}/{name}");
    }
    let mut request = kube::core::Request::new(&path)
        .create(&PostParams::default(), serde_json::to_vec(&case.object)?)
        .context("building the dry-run request")?;
    let uri = format!(
        "{}dryRun=All&force=true&fieldManager=driftless-e2e&fieldValidation=Strict",
        request.uri()
    );
    *request.uri_mut() = uri.parse().context("the request URI")?;
    *request.method_mut() = "PATCH".parse().context("the method")?;
    request.headers_mut().insert(
        "content-type",
        "application/apply-patch+yaml"
            .parse()
            .context("the content type")?,
    );
    match client.request_text(request).await {
        Ok(_) => Ok(Verdict::Accepted),
        Err(kube::Error::Api(status)) => Ok(Verdict::Rejected(status.message.replace('\n', " "))),
        Err(error) => Err(error).with_context(|| format!("dry-run of {}", case.description)),
    }
}

/// The analyzer's errors for each case: every case is one app with one `k8s-objects`
/// component listing the object, all analysed in one snapshot.
fn analyze(cases: &[Case], namespace: &str) -> Vec<Vec<String>> {
    let files = cases
        .iter()
        .enumerate()
        .map(|(index, case)| SourceFile {
            path: format!("apps/case-{index}.yaml"),
            contents: format!(
                "apiVersion: core.oam.dev/v1beta1\nkind: Application\nmetadata:\n  name: case-{index}\n  namespace: {namespace}\nspec:\n  components:\n    - name: object\n      type: k8s-objects\n      properties:\n        objects:\n          - {}\n",
                case.object
            ),
        })
        .collect();
    let snapshot = Snapshot {
        commit: None,
        files,
    };
    let (output, sources) = analyzer::analyze_snapshot(
        &snapshot,
        &Definitions::builtin(),
        &AnalysisOptions::default(),
    );
    let mut errors: Vec<Vec<String>> = vec![Vec::new(); cases.len()];
    let mut add = |index: Option<usize>, diagnostic: &analyzer::Diagnostic| {
        if diagnostic.severity != Severity::Error {
            return;
        }
        if let Some(list) = index.and_then(|index| errors.get_mut(index)) {
            list.push(format!("[{}] {}", diagnostic.rule, diagnostic.message));
        }
    };
    for app in &output.apps {
        let index = app
            .app
            .name
            .strip_prefix("case-")
            .and_then(|index| index.parse().ok());
        for diagnostic in &app.diagnostics {
            add(index, diagnostic);
        }
    }
    // Not tied to an app (a file that does not load): by the file's name.
    for diagnostic in &output.diagnostics {
        let index = diagnostic.span.and_then(|span| {
            sources
                .path(span.file)
                .strip_prefix("apps/case-")?
                .strip_suffix(".yaml")?
                .parse()
                .ok()
        });
        add(index, diagnostic);
    }
    errors
}
