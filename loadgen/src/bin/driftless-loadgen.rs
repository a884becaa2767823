//! `driftless-loadgen`: writes N generated Applications as a GitOps repository tree
//! (`apps/<namespace>/<app>.yaml`), for `hack/scale.sh` and manual scale runs.
//!
//! ```sh
//! driftless-loadgen --apps 10000 --out /tmp/scale-10k --namespaces 20 --seed 1
//! # one changed app: rewrite only app 42 at generation 1
//! driftless-loadgen --apps 10000 --out /tmp/scale-10k --change 42 --generation 1 --only-changed
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

/// Writes N generated KubeVela-style Applications as a repository tree.
#[derive(Debug, Parser)]
#[command(name = "driftless-loadgen", version)]
struct Args {
    /// How many apps.
    #[arg(long)]
    apps: usize,
    /// The repository directory to write into (created if missing; other files are kept).
    #[arg(long)]
    out: PathBuf,
    /// Apps are spread round-robin over this many namespaces.
    #[arg(long, default_value_t = 10)]
    namespaces: usize,
    /// Seeds the per-app choices.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Replicas set by each app's scaler trait.
    #[arg(long, default_value_t = 0)]
    replicas: u32,
    /// Indices of apps that get `--generation` (a new image tag and ConfigMap value).
    #[arg(long, value_delimiter = ',')]
    change: Vec<usize>,
    /// The generation of the `--change` apps.
    #[arg(long, default_value_t = 1)]
    generation: u32,
    /// Write only the `--change` apps (the rest of the tree is assumed to be there already).
    #[arg(long, requires = "change")]
    only_changed: bool,
    /// Print the namespaces the apps use, one a line, and write nothing.
    #[arg(long)]
    print_namespaces: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let options = loadgen::Options {
        namespaces: args.namespaces,
        seed: args.seed,
        replicas: args.replicas,
        generation: args.generation,
        changed: args.change.clone(),
    };
    if args.print_namespaces {
        for namespace in loadgen::namespaces(args.apps, &options) {
            println!("{namespace}");
        }
        return ExitCode::SUCCESS;
    }
    let files: Vec<loadgen::GeneratedFile> = if args.only_changed {
        args.change
            .iter()
            .filter(|&&index| index < args.apps)
            .map(|&index| loadgen::app(index, &options))
            .collect()
    } else {
        loadgen::generate(args.apps, &options)
    };
    match loadgen::write_tree(&args.out, &files) {
        Ok(()) => {
            eprintln!("wrote {} apps under {}", files.len(), args.out.display());
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("driftless-loadgen: error: {error}: {}", source_of(&error));
            ExitCode::FAILURE
        }
    }
}

fn source_of(error: &loadgen::Error) -> String {
    std::error::Error::source(error).map_or_else(String::new, ToString::to_string)
}
