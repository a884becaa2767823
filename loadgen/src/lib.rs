//! Generates N realistic KubeVela-style Applications, laid out as a GitOps repository, for the
//! scale benchmarks (`hack/scale.sh`, criterion benches).
//!
//! The apps follow the shape of KubeVela's own load-test templates
//! (`hack/load-test/app-templates/` in the KubeVela repository): a `webservice` component with
//! the `scaler` trait, plus a `k8s-objects` component carrying a ConfigMap. On top of that, as
//! real platform repositories do, some apps are reachable through the `gateway` trait, some carry
//! a `sidecar`, and every app has `labels`. Each app renders to 3-5 objects.
//!
//! Generation is pure and deterministic: app `i` depends only on `i`, the seed and the options,
//! never on N, so app 7 of a 100-app repository is byte-identical to app 7 of a 10,000-app one.
//! That is what lets a benchmark change "one app among 100" and "one app among 10,000" and
//! compare like with like.
//!
//! ```
//! let options = loadgen::Options::default();
//! let files = loadgen::generate(3, &options);
//! assert_eq!(files.len(), 3);
//! assert!(files[0].contents.contains("kind: Application"));
//! ```

use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};

/// How the generated repository looks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Apps are spread round-robin over this many namespaces (`scale-00`, `scale-01`, ...).
    pub namespaces: usize,
    /// Seeds the per-app choices (image tag, ports, which traits).
    pub seed: u64,
    /// Replicas set by the `scaler` trait. KubeVela's load test uses 0: with kwok nodes, every
    /// replica is a Pod object in etcd, which would measure the controller-manager, not us.
    pub replicas: u32,
    /// Bumped to make a new revision of the apps in [`Options::changed`] (their image tag and a
    /// ConfigMap value change), to measure "one changed app among N".
    pub generation: u32,
    /// Indices of the apps that get [`Options::generation`]; every other app stays at 0.
    pub changed: Vec<usize>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            namespaces: 10,
            seed: 1,
            replicas: 0,
            generation: 0,
            changed: Vec::new(),
        }
    }
}

/// One generated file: its path inside the repository and its contents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeneratedFile {
    /// Relative path, e.g. `apps/scale-03/app-00042.yaml`.
    pub path: PathBuf,
    /// The file's text.
    pub contents: String,
}

/// What can go wrong writing a generated repository to disk.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Creating a directory or writing a file failed.
    #[error("writing {path}")]
    WriteFailed {
        /// The file or directory being written.
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// The name of app `index`; stable across N, seeds and generations.
#[must_use]
pub fn app_name(index: usize) -> String {
    format!("app-{index:05}")
}

/// The namespace app `index` lives in.
#[must_use]
pub fn app_namespace(index: usize, options: &Options) -> String {
    format!("scale-{:02}", index % options.namespaces.max(1))
}

/// The namespaces the apps of a repository use, in order.
#[must_use]
pub fn namespaces(n: usize, options: &Options) -> Vec<String> {
    (0..options.namespaces.max(1).min(n))
        .map(|k| format!("scale-{k:02}"))
        .collect()
}

/// The path of app `index` inside the repository.
#[must_use]
pub fn app_path(index: usize, options: &Options) -> PathBuf {
    PathBuf::from(format!(
        "apps/{}/{}.yaml",
        app_namespace(index, options),
        app_name(index)
    ))
}

/// Generates apps `0..n`, in index order.
#[must_use]
pub fn generate(n: usize, options: &Options) -> Vec<GeneratedFile> {
    (0..n).map(|index| app(index, options)).collect()
}

/// Generates app `index` alone (the same file [`generate`] would give it).
#[must_use]
pub fn app(index: usize, options: &Options) -> GeneratedFile {
    let generation = if options.changed.contains(&index) {
        options.generation
    } else {
        0
    };
    let mut rng = SplitMix64::new(options.seed, index as u64);
    let shape = Shape {
        name: app_name(index),
        namespace: app_namespace(index, options),
        team: TEAMS[rng.below(TEAMS.len())],
        image: IMAGES[rng.below(IMAGES.len())],
        minor: rng.below(20),
        port: PORTS[rng.below(PORTS.len())],
        cpu_millis: 50 * (1 + rng.below(8)),
        memory_mib: 64 << rng.below(4),
        // Half the apps are reachable through an Ingress; a third carry a sidecar.
        gateway: rng.below(2) == 0,
        sidecar: rng.below(3) == 0,
        replicas: options.replicas,
        generation,
    };
    GeneratedFile {
        path: app_path(index, options),
        contents: shape.render(),
    }
}

/// Writes the files under `dir` (creating directories as needed).
///
/// # Errors
///
/// When a directory or file cannot be written.
pub fn write_tree(dir: &Path, files: &[GeneratedFile]) -> Result<(), Error> {
    for file in files {
        let path = dir.join(&file.path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|source| Error::WriteFailed {
                path: parent.to_path_buf(),
                source,
            })?;
        }
        std::fs::write(&path, &file.contents)
            .map_err(|source| Error::WriteFailed { path, source })?;
    }
    Ok(())
}

const TEAMS: [&str; 6] = [
    "payments", "search", "catalog", "identity", "growth", "platform",
];
const IMAGES: [&str; 4] = [
    "registry.example.com/web/nginx",
    "registry.example.com/api/httpd",
    "registry.example.com/api/envoy",
    "registry.example.com/jobs/busybox",
];
const PORTS: [u16; 4] = [80, 8000, 8080, 9000];

/// The per-app choices, decided once from the seed.
struct Shape {
    name: String,
    namespace: String,
    team: &'static str,
    image: &'static str,
    minor: usize,
    port: u16,
    cpu_millis: usize,
    memory_mib: usize,
    gateway: bool,
    sidecar: bool,
    replicas: u32,
    generation: u32,
}

impl Shape {
    fn render(&self) -> String {
        let Shape {
            name,
            namespace,
            team,
            image,
            minor,
            port,
            cpu_millis,
            memory_mib,
            replicas,
            generation,
            ..
        } = self;
        // Writing into a String cannot fail; `let _ =` keeps the generator panic-free.
        let mut out = String::with_capacity(2048);
        let _ = write!(
            out,
            "# Generated by driftless-loadgen: a {team} service, modelled on KubeVela's load-test apps.
apiVersion: core.oam.dev/v1beta1
kind: Application
metadata:
  name: {name}
  namespace: {namespace}
  labels:
    team: {team}
spec:
  components:
    - name: {name}
      type: webservice
      properties:
        image: {image}:1.{minor}.{generation}
        ports:
          - port: {port}
            expose: {expose}
        env:
          - name: APP_NAME
            value: {name}
          - name: LOG_LEVEL
            value: info
        cpu: {cpu_millis}m
        memory: {memory_mib}Mi
      traits:
        - type: scaler
          properties:
            replicas: {replicas}
        - type: labels
          properties:
            team: {team}
            tier: {tier}
",
            // With a gateway, the gateway trait makes the Service (as KubeVela's does); a
            // second one from the webservice would collide on the name.
            expose = !self.gateway,
            tier = if self.gateway { "frontend" } else { "backend" },
        );
        if self.gateway {
            let _ = write!(
                out,
                "        - type: gateway
          properties:
            domain: {name}.{namespace}.apps.example.com
            http:
              /: {port}
"
            );
        }
        if self.sidecar {
            let _ = write!(
                out,
                "        - type: sidecar
          properties:
            name: log-shipper
            image: registry.example.com/infra/fluent-bit:3.1
            args: [\"--input=/var/log/app\", \"--tag={name}\"]
"
            );
        }
        let _ = write!(
            out,
            "    - name: {name}-config
      type: k8s-objects
      properties:
        objects:
          - apiVersion: v1
            kind: ConfigMap
            metadata:
              name: {name}-config
            data:
              team: {team}
              revision: \"{generation}\"
"
        );
        out
    }
}

/// SplitMix64 (Steele, Lea and Flood 2014): tiny, good enough for picking shapes, and keyed by
/// (seed, app index) so each app is independent of the others.
struct SplitMix64(u64);

impl SplitMix64 {
    fn new(seed: u64, index: u64) -> SplitMix64 {
        SplitMix64(seed ^ index.wrapping_mul(0xD1B5_4A32_D192_ED03))
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (n > 0); the modulo bias is irrelevant for n this small.
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn app_does_not_depend_on_n() {
        let options = Options::default();
        let small = generate(100, &options);
        let large = generate(1000, &options);
        assert_eq!(small[..], large[..100]);
        assert_eq!(app(57, &options), large[57]);
    }

    #[test]
    fn seed_changes_the_apps() {
        let a = generate(50, &Options::default());
        let b = generate(
            50,
            &Options {
                seed: 2,
                ..Options::default()
            },
        );
        assert_ne!(a, b);
        assert_eq!(a, generate(50, &Options::default()));
    }

    #[test]
    fn only_changed_apps_differ_between_generations() {
        let before = generate(200, &Options::default());
        let after = generate(
            200,
            &Options {
                generation: 3,
                changed: vec![42],
                ..Options::default()
            },
        );
        let differing: Vec<usize> = (0..200).filter(|&i| before[i] != after[i]).collect();
        assert_eq!(differing, vec![42]);
        assert!(after[42].contents.contains("revision: \"3\""));
    }

    #[test]
    fn apps_spread_over_namespaces_and_trait_mix() {
        let options = Options {
            namespaces: 4,
            ..Options::default()
        };
        let files = generate(400, &options);
        assert_eq!(files[5].path, PathBuf::from("apps/scale-01/app-00005.yaml"));
        let gateways = files
            .iter()
            .filter(|f| f.contents.contains("type: gateway"))
            .count();
        let sidecars = files
            .iter()
            .filter(|f| f.contents.contains("type: sidecar"))
            .count();
        // Roughly half and a third: the mix is random but must not degenerate.
        assert!((150..250).contains(&gateways), "gateways: {gateways}");
        assert!((90..180).contains(&sidecars), "sidecars: {sidecars}");
        assert_eq!(namespaces(400, &options).len(), 4);
        assert_eq!(namespaces(2, &options).len(), 2);
    }

    #[test]
    fn write_tree_lays_out_the_repository() {
        let dir = std::env::temp_dir().join(format!("loadgen-test-{}", std::process::id()));
        let files = generate(3, &Options::default());
        write_tree(&dir, &files).unwrap();
        let written = std::fs::read_to_string(dir.join("apps/scale-02/app-00002.yaml")).unwrap();
        assert_eq!(written, files[2].contents);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
