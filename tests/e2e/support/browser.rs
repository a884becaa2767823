//! A real browser for the web UI's tests: Debian's Chromium, headless, driven through
//! chromedriver (WebDriver) with fantoccini. Each [`Browser`] has its own chromedriver process
//! and a fresh profile directory; both go when it is dropped.
//!
//! `hack/install-prereqs.sh` installs `chromium` and `chromium-driver`; `CHROMEDRIVER` and
//! `CHROMIUM` override their paths.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::json;

use super::agent::free_port;

/// Flags that keep Chromium quiet and quick on a machine without a network.
const CHROMIUM_FLAGS: &[&str] = &[
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1280,900",
];

/// A headless Chromium session.
pub struct Browser {
    pub client: Client,
    driver: Child,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts chromedriver and a browser session.
    pub async fn start() -> Result<Browser> {
        let driver_path =
            std::env::var("CHROMEDRIVER").unwrap_or_else(|_| "/usr/bin/chromedriver".into());
        let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
        for path in [&driver_path, &chromium] {
            ensure!(
                std::path::Path::new(path).exists(),
                "{path} is missing: run hack/install-prereqs.sh (apt-get install chromium chromium-driver)"
            );
        }
        let port = free_port()?;
        let driver = Command::new(&driver_path)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("starting {driver_path}"))?;
        let profile = tempfile::tempdir()?;
        let mut args: Vec<String> = CHROMIUM_FLAGS
            .iter()
            .map(|flag| (*flag).to_owned())
            .collect();
        args.push(format!("--user-data-dir={}", profile.path().display()));
        let mut capabilities = serde_json::Map::new();
        capabilities.insert(
            "goog:chromeOptions".into(),
            json!({ "binary": chromium, "args": args }),
        );
        let url = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(30);
        let client = loop {
            let connector = hyper_util::client::legacy::connect::HttpConnector::new();
            match ClientBuilder::new(connector)
                .capabilities(capabilities.clone())
                .connect(&url)
                .await
            {
                Ok(client) => break client,
                // chromedriver takes a moment to listen.
                Err(_) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(error) => bail!("no WebDriver session from {driver_path} within 30s: {error}"),
            }
        };
        Ok(Browser {
            client,
            driver,
            _profile: profile,
        })
    }

    /// Opens `url` and signs in at `/ui/login` with `token`, landing on `next`.
    pub async fn sign_in(&self, base: &str, token: &str, next: &str) -> Result<()> {
        self.client
            .goto(&format!("{base}/ui/login?next={next}"))
            .await?;
        let field = self.client.find(Locator::Id("token")).await?;
        field.send_keys(token).await?;
        self.client
            .find(Locator::Css("main form button[type=submit]"))
            .await?
            .click()
            .await?;
        self.wait_for_css("main#main #live").await?;
        let landed = self.client.current_url().await?;
        ensure!(
            landed.path() == next.split('?').next().unwrap_or(next),
            "signed in, but landed on {landed} instead of {next}"
        );
        Ok(())
    }

    /// Signs out with the header's button and waits for the sign-in page it leads to, so a
    /// later navigation cannot race the sign-out's own redirect.
    pub async fn sign_out(&self) -> Result<()> {
        self.client
            .find(Locator::Css("header form[action='/ui/logout'] button"))
            .await?
            .click()
            .await?;
        self.wait_for_css("main#main.login").await?;
        Ok(())
    }

    /// Waits (bounded) for an element matching `css`.
    pub async fn wait_for_css(&self, css: &str) -> Result<fantoccini::elements::Element> {
        self.client
            .wait()
            .at_most(Duration::from_secs(20))
            .for_element(Locator::Css(css))
            .await
            .with_context(|| format!("waiting for {css}"))
    }

    /// The attribute `name` of the first element matching `css`, if there is one.
    pub async fn attribute(&self, css: &str, name: &str) -> Result<Option<String>> {
        match self.client.find(Locator::Css(css)).await {
            Ok(element) => Ok(element.attr(name).await?),
            Err(_) => Ok(None),
        }
    }

    /// Saves a screenshot as `docs/screenshots/<name>.png`.
    pub async fn screenshot(&self, name: &str) -> Result<()> {
        let png = self.client.screenshot().await?;
        // The README's copies change only when asked: every run's pages differ (namespace
        // names), and a test run should leave the work tree clean.
        let dir = if std::env::var_os("DRIFTLESS_UPDATE_SCREENSHOTS").is_some() {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs/screenshots")
        } else {
            PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("screenshots")
        };
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join(format!("{name}.png")), png)?;
        Ok(())
    }

    /// Ends the session (the browser quits) and stops chromedriver.
    pub async fn close(mut self) -> Result<()> {
        let closed = self.client.clone().close().await;
        let _ = self.driver.kill();
        let _ = self.driver.wait();
        closed.context("closing the browser session")
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
