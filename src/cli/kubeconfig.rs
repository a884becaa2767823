//! Which cluster `plan`, `apply` and `resume` talk to, found the way kubectl, Flux and Argo CD
//! find it: `--kubeconfig FILE`, else every file of `$KUBECONFIG` (a path list, merged, the
//! first file's values winning), else `~/.kube/config`; `--context` picks the context (the
//! current one otherwise).
//!
//! With none of them, `plan` is an offline plan against an empty cluster and says so; `--offline`
//! forces that. A kubeconfig that is named but cannot be read or parsed is an error, never a
//! quiet offline plan: the user meant a cluster.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use agent::cluster::{Cluster, ClusterOptions};
use anyhow::Context as _;
use kube::config::Kubeconfig;

use super::ClusterArgs;

/// What the loader reads from the process: `$KUBECONFIG` and the home directory.
#[derive(Debug, Clone, Default)]
pub struct KubeconfigEnv {
    pub kubeconfig: Option<OsString>,
    pub home: Option<PathBuf>,
}

impl KubeconfigEnv {
    /// `$KUBECONFIG` and `$HOME` of this process.
    pub fn from_process() -> KubeconfigEnv {
        KubeconfigEnv {
            kubeconfig: std::env::var_os("KUBECONFIG"),
            home: std::env::var_os("HOME").map(PathBuf::from),
        }
    }
}

/// The cluster to talk to, or why there is none.
#[derive(Debug)]
pub enum Target {
    Live(Box<FoundKubeconfig>),
    Offline(OfflineReason),
}

/// A kubeconfig that was found and parsed.
#[derive(Debug)]
pub struct FoundKubeconfig {
    pub kubeconfig: Kubeconfig,
    /// Where it came from, for messages: `--kubeconfig x`, `$KUBECONFIG (a:b)`, `~/.kube/config`.
    pub origin: String,
    /// The file it was read from (the first one of `$KUBECONFIG`).
    pub path: PathBuf,
}

/// Why a plan is offline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OfflineReason {
    /// `--offline`.
    Forced,
    /// No `--kubeconfig`, no `$KUBECONFIG`, no `~/.kube/config`.
    NoneFound,
}

impl OfflineReason {
    /// One line for stderr.
    pub fn explain(self) -> &'static str {
        match self {
            OfflineReason::Forced => "--offline: planning against an empty cluster",
            OfflineReason::NoneFound => {
                "no kubeconfig found (no --kubeconfig, $KUBECONFIG unset, no ~/.kube/config): \
                 planning against an empty cluster; give --kubeconfig to plan against a cluster"
            }
        }
    }
}

/// Finds the kubeconfig by kubectl's order.
///
/// # Errors
///
/// A named kubeconfig (the flag, any `$KUBECONFIG` file, or an existing `~/.kube/config`) that
/// cannot be read or parsed, or a `$KUBECONFIG` none of whose files exists.
pub fn find(flag: Option<&Path>, offline: bool, env: &KubeconfigEnv) -> anyhow::Result<Target> {
    if offline {
        return Ok(Target::Offline(OfflineReason::Forced));
    }
    if let Some(path) = flag {
        let kubeconfig = read(path).with_context(|| format!("--kubeconfig {}", path.display()))?;
        return Ok(found(
            kubeconfig,
            format!("--kubeconfig {}", path.display()),
            path,
        ));
    }
    if let Some(list) = env.kubeconfig.as_ref().filter(|list| !list.is_empty()) {
        let paths: Vec<PathBuf> = std::env::split_paths(list)
            .filter(|path| !path.as_os_str().is_empty())
            .collect();
        let origin = format!("$KUBECONFIG ({})", list.to_string_lossy());
        // As kubectl: files of the list that do not exist are skipped; one that exists and
        // cannot be read is an error.
        let existing: Vec<&PathBuf> = paths.iter().filter(|path| path.exists()).collect();
        let Some(first) = existing.first() else {
            anyhow::bail!(
                "{origin}: none of its files exists; fix or unset KUBECONFIG, or pass --offline \
                 to plan against an empty cluster"
            );
        };
        let mut merged: Option<Kubeconfig> = None;
        for path in &existing {
            let next = read(path).with_context(|| format!("{origin}: {}", path.display()))?;
            merged = Some(match merged {
                None => next,
                Some(merged) => merged
                    .merge(next)
                    .with_context(|| format!("{origin}: merging {}", path.display()))?,
            });
        }
        let path = (*first).clone();
        return Ok(match merged {
            Some(kubeconfig) => found(kubeconfig, origin, &path),
            None => Target::Offline(OfflineReason::NoneFound),
        });
    }
    if let Some(home) = &env.home {
        let path = home.join(".kube").join("config");
        if path.exists() {
            let kubeconfig = read(&path).with_context(|| format!("{}", path.display()))?;
            return Ok(found(kubeconfig, "~/.kube/config".to_owned(), &path));
        }
    }
    Ok(Target::Offline(OfflineReason::NoneFound))
}

fn found(kubeconfig: Kubeconfig, origin: String, path: &Path) -> Target {
    Target::Live(Box::new(FoundKubeconfig {
        kubeconfig,
        origin,
        path: path.to_owned(),
    }))
}

fn read(path: &Path) -> anyhow::Result<Kubeconfig> {
    Kubeconfig::read_from(path)
        .map_err(|error| anyhow::anyhow!("cannot read the kubeconfig: {error}"))
}

/// Connects to the cluster of `args` found by [`find`]; `purpose` names the command in the
/// error when there is none (`apply needs a cluster`).
///
/// # Errors
///
/// No kubeconfig found or forced offline, or the kubeconfig or its context cannot be loaded.
pub async fn connect(
    flag: Option<&Path>,
    context: Option<&str>,
    options: &ClusterOptions,
    purpose: &str,
) -> anyhow::Result<Cluster> {
    let target = find(flag, false, &KubeconfigEnv::from_process())?;
    let Target::Live(found) = target else {
        anyhow::bail!(
            "{purpose} needs a cluster, and no kubeconfig was found: pass --kubeconfig FILE, \
             set KUBECONFIG, or create ~/.kube/config"
        );
    };
    let FoundKubeconfig {
        kubeconfig,
        origin,
        path,
    } = *found;
    Cluster::connect_kubeconfig(kubeconfig, &path, context, options)
        .await
        .with_context(|| format!("connecting with {origin}"))
}

/// [`connect`] for the options of `plan` and `apply`.
///
/// # Errors
///
/// See [`connect`].
pub async fn connect_args(cluster_args: &ClusterArgs, purpose: &str) -> anyhow::Result<Cluster> {
    let options = ClusterOptions {
        name: cluster_args.cluster_name.clone(),
        qps: cluster_args.qps,
        burst: cluster_args.burst,
        timeout: Duration::from_secs(cluster_args.timeout_seconds),
    };
    connect(
        cluster_args.kubeconfig.as_deref(),
        cluster_args.context.as_deref(),
        &options,
        purpose,
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    const KUBECONFIG: &str = "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: { server: https://127.0.0.1:6443 }\ncontexts:\n- name: ctx\n  context: { cluster: c, user: u }\ncurrent-context: ctx\nusers:\n- name: u\n  user: {}\n";

    fn origin(target: &Target) -> String {
        match target {
            Target::Live(found) => found.origin.clone(),
            Target::Offline(reason) => format!("{reason:?}"),
        }
    }

    #[test]
    fn the_flag_then_the_variable_then_home() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let file = dir.path().join("config");
        std::fs::write(&file, KUBECONFIG).expect("write");
        std::fs::create_dir_all(dir.path().join(".kube")).expect("mkdir");
        std::fs::write(dir.path().join(".kube/config"), KUBECONFIG).expect("write");
        let missing = dir.path().join("missing");
        let list = std::env::join_paths([missing.clone(), file.clone()]).expect("a path list");
        let env = KubeconfigEnv {
            kubeconfig: Some(list.clone()),
            home: Some(dir.path().to_owned()),
        };
        let target = find(Some(&file), false, &env).expect("the flag");
        assert_eq!(origin(&target), format!("--kubeconfig {}", file.display()));
        let target = find(None, false, &env).expect("the variable");
        assert_eq!(
            origin(&target),
            format!("$KUBECONFIG ({})", list.to_string_lossy())
        );
        let home_only = KubeconfigEnv {
            kubeconfig: None,
            home: Some(dir.path().to_owned()),
        };
        assert_eq!(
            origin(&find(None, false, &home_only).expect("home")),
            "~/.kube/config"
        );
        assert_eq!(origin(&find(None, true, &env).expect("offline")), "Forced");
        let nothing = KubeconfigEnv {
            kubeconfig: None,
            home: Some(missing.clone()),
        };
        assert_eq!(
            origin(&find(None, false, &nothing).expect("none")),
            "NoneFound"
        );
    }

    #[test]
    fn a_named_kubeconfig_that_cannot_be_read_is_an_error() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let broken = dir.path().join("broken");
        std::fs::write(&broken, "clusters: [not, a, kubeconfig").expect("write");
        let env = KubeconfigEnv::default();
        let error = find(Some(&broken), false, &env).expect_err("a broken flag file");
        assert!(
            format!("{error:#}").contains("cannot read the kubeconfig"),
            "{error:#}"
        );
        let error = find(Some(&dir.path().join("absent")), false, &env).expect_err("absent");
        assert!(format!("{error:#}").contains("--kubeconfig"), "{error:#}");
        let env = KubeconfigEnv {
            kubeconfig: Some(broken.clone().into_os_string()),
            home: None,
        };
        assert!(find(None, false, &env).is_err());
        let env = KubeconfigEnv {
            kubeconfig: Some(dir.path().join("absent").into_os_string()),
            home: None,
        };
        let error = find(None, false, &env).expect_err("nothing in the list exists");
        assert!(
            error.to_string().contains("none of its files exists"),
            "{error}"
        );
        // An unreadable ~/.kube/config is an error too.
        std::fs::create_dir_all(dir.path().join(".kube")).expect("mkdir");
        std::fs::write(dir.path().join(".kube/config"), "clusters: [unterminated").expect("write");
        let env = KubeconfigEnv {
            kubeconfig: None,
            home: Some(dir.path().to_owned()),
        };
        assert!(find(None, false, &env).is_err());
    }
}
