//! GitHub App installation tokens end to end: the agent's source is a private Gitea repository
//! with `credentials.githubApp`. A local token endpoint stands in for GitHub's
//! `POST /app/installations/{id}/access_tokens`: it verifies the agent's JWT (RS256, signed with
//! the app's private key made by this test) against the app's public key, checks its issuer and
//! expiry, and answers with a real Gitea access token, which the agent then uses as the password
//! of `x-access-token` to fetch the private repository and deploy it, and as the forge's token to
//! post the commit statuses. A second commit is fetched and reported with the cached tokens, so
//! the endpoint is asked once by the source and once by the forge; the log holds neither key nor
//! token.

use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, ensure};
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Api;
use serde_json::{Value, json};

use crate::support::agent::{AgentProcess, WorkTree, free_port, wait_for};
use crate::support::apps::config_map_app;
use crate::support::cluster::{TestCluster, TestNamespace};
use crate::support::gitea::Gitea;

const APP_ID: u64 = 424_242;
const INSTALLATION_ID: u64 = 77;

/// Verifies `jwt` against `public_pem`: RS256 signature, issuer [`APP_ID`], not expired.
fn verified(jwt: &str, public_pem: &[u8]) -> Result<()> {
    let parts: Vec<&str> = jwt.split('.').collect();
    ensure!(parts.len() == 3, "not a JWT");
    let header: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[0])?)?;
    ensure!(header["alg"] == "RS256", "alg {}", header["alg"]);
    let key = openssl::pkey::PKey::public_key_from_pem(public_pem)?;
    let mut verifier = openssl::sign::Verifier::new(openssl::hash::MessageDigest::sha256(), &key)?;
    verifier.update(format!("{}.{}", parts[0], parts[1]).as_bytes())?;
    ensure!(
        verifier.verify(&URL_SAFE_NO_PAD.decode(parts[2])?)?,
        "the signature does not verify"
    );
    let claims: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1])?)?;
    let issuer = claims["iss"]
        .as_str()
        .and_then(|iss| iss.parse::<u64>().ok());
    ensure!(issuer == Some(APP_ID), "iss {}", claims["iss"]);
    let now = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs();
    let exp = claims["exp"].as_u64().context("exp")?;
    ensure!(exp > now && exp <= now + 600, "exp {exp} at {now}");
    Ok(())
}

/// The token endpoint; returns its base URL and how many tokens it handed out.
async fn token_endpoint(public_pem: Vec<u8>, token: String) -> Result<(String, Arc<Mutex<u32>>)> {
    let issued = Arc::new(Mutex::new(0u32));
    let counter = issued.clone();
    let path = format!("/app/installations/{INSTALLATION_ID}/access_tokens");
    let app = axum::Router::new().route(
        &path,
        axum::routing::post(move |headers: HeaderMap| {
            let (public_pem, token, counter) = (public_pem.clone(), token.clone(), counter.clone());
            async move {
                let jwt = headers
                    .get("authorization")
                    .and_then(|value| value.to_str().ok())
                    .and_then(|value| value.strip_prefix("Bearer "))
                    .unwrap_or_default();
                if let Err(error) = verified(jwt, &public_pem) {
                    return (StatusCode::UNAUTHORIZED, error.to_string()).into_response();
                }
                *counter.lock().expect("the counter's lock") += 1;
                let expires = Timestamp::now()
                    .checked_add(SignedDuration::from_hours(1))
                    .expect("an hour from now");
                let body = json!({"token": token, "expires_at": expires.to_string()});
                (StatusCode::CREATED, axum::Json(body)).into_response()
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok((format!("http://{address}"), issued))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_github_app_installation_token_fetches_a_private_repository() -> Result<()> {
    let cluster = TestCluster::shared().await?;
    let gitea = Gitea::shared()?;
    let namespace = TestNamespace::new(&cluster, "ghapp").await?;
    let ns = namespace.name.as_str();

    let nanos = SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos();
    let repo = format!("ghapp-{}-{nanos:x}", std::process::id());
    gitea
        .api(
            reqwest::Method::POST,
            "/user/repos",
            Some(json!({"name": repo, "default_branch": "main", "private": true})),
        )
        .await?;
    let tree = WorkTree::new(gitea.push_url(&repo))?;
    tree.write("apps/app.yaml", &config_map_app("app", ns, "blue"))?;
    tree.commit_and_push("one app", "main")?;
    // Private: without credentials the repository is not there.
    let anonymous = reqwest::get(format!(
        "{}/info/refs?service=git-upload-pack",
        gitea.clone_url(&repo)
    ))
    .await?;
    ensure!(
        !anonymous.status().is_success(),
        "the repository is readable without credentials"
    );

    let key = openssl::pkey::PKey::from_rsa(openssl::rsa::Rsa::generate(2048)?)?;
    let private_pem = String::from_utf8(key.private_key_to_pem_pkcs8()?)?;
    let (api_url, issued) = token_endpoint(key.public_key_to_pem()?, gitea.token.clone()).await?;

    let work = tempfile::tempdir()?;
    let key_file = work.path().join("app-key.pem");
    std::fs::write(&key_file, &private_pem)?;
    let port = free_port()?;
    let config = work.path().join("driftless.yaml");
    std::fs::write(
        &config,
        format!(
            "sources:
  - name: ghapp-{short:x}
    url: {url}
    branch: main
    pollInterval: 1s
    credentials:
      githubApp:
        appId: {APP_ID}
        installationId: {INSTALLATION_ID}
        privateKey: {{ file: {key} }}
        apiUrl: {api_url}
clusters:
  - name: local
    kubeconfig: {kubeconfig}
forge:
  kind: gitea
  baseUrl: {gitea_url}
  githubApp:
    appId: {APP_ID}
    installationId: {INSTALLATION_ID}
    privateKey: {{ file: {key} }}
    apiUrl: {api_url}
server: {{ listen: '127.0.0.1:{port}' }}
cacheDir: {cache}
",
            short = nanos & 0xffff_ffff,
            url = gitea.clone_url(&repo),
            key = key_file.display(),
            kubeconfig = cluster.kubeconfig.display(),
            gitea_url = gitea.url,
            cache = work.path().join("cache").display(),
        ),
    )?;
    let agent = AgentProcess::start(&config, &[], port)?;

    let maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), ns);
    let color = |expected: &'static str| {
        let maps = maps.clone();
        async move {
            let map = maps.get_opt("app-settings").await?;
            let color = map
                .and_then(|map| map.data)
                .and_then(|data| data.get("color").cloned());
            Ok::<_, anyhow::Error>((color.as_deref() == Some(expected)).then_some(()))
        }
    };
    wait_for("the private repository's app to be deployed", || {
        color("blue")
    })
    .await
    .with_context(|| format!("agent log:\n{}", agent.log_text().unwrap_or_default()))?;
    tree.write("apps/app.yaml", &config_map_app("app", ns, "green"))?;
    let second = tree.commit_and_push("green", "main")?;
    wait_for("the second commit to be deployed", || color("green")).await?;
    // The forge authenticated with its installation token: the commit has our statuses.
    wait_for("the second commit's summary status", || async {
        let statuses = gitea.latest_statuses(&repo, &second).await?;
        Ok(statuses
            .get("driftless")
            .filter(|(state, _)| state == "success")
            .map(drop))
    })
    .await?;
    let issued = *issued.lock().expect("the counter's lock");
    ensure!(
        issued == 2,
        "installation tokens were exchanged {issued} times, not once for the source and once for the forge"
    );
    let key_line = private_pem
        .lines()
        .nth(1)
        .context("the PEM has a body")?
        .to_owned();
    agent.stop_checked(&[&gitea.token, &key_line])?;
    Ok(())
}
