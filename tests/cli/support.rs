//! Running the built binary and making temporary repositories.

use std::path::{Path, PathBuf};
use std::process::Command;

/// What one run of the binary produced.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit code {}\n--- stdout\n{}\n--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// The workspace root; commands run from here so paths look like a user's.
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs `driftless ARGS` in `cwd`, with colours off and logging at its default.
pub fn driftless_in(cwd: &Path, args: &[&str]) -> Run {
    let output = Command::new(env!("CARGO_BIN_EXE_driftless"))
        .args(args)
        .current_dir(cwd)
        .env_remove("RUST_LOG")
        .env("NO_COLOR", "1")
        // Independent of the runner's cluster: no $KUBECONFIG, and a home with no ~/.kube.
        .env_remove("KUBECONFIG")
        .env("HOME", cwd.join("no-such-home"))
        .output()
        .expect("the driftless binary runs");
    Run {
        code: output
            .status
            .code()
            .expect("driftless exits normally, not by a signal"),
        stdout: String::from_utf8(output.stdout).expect("stdout is UTF-8"),
        stderr: String::from_utf8(output.stderr).expect("stderr is UTF-8"),
    }
}

/// Runs `driftless ARGS` from the workspace root.
pub fn driftless(args: &[&str]) -> Run {
    driftless_in(&workspace_root(), args)
}

/// A temporary repository; deleted when dropped.
pub struct TempRepo {
    pub dir: tempfile::TempDir,
}

impl TempRepo {
    pub fn new() -> TempRepo {
        TempRepo {
            dir: tempfile::tempdir().expect("a temporary directory"),
        }
    }

    /// A copy of `examples/repo`.
    pub fn copy_of_examples() -> TempRepo {
        let repo = TempRepo::new();
        copy_dir(&workspace_root().join("examples/repo"), repo.path());
        repo
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn write(&self, path: &str, contents: &str) -> &TempRepo {
        let path = self.path().join(path);
        std::fs::create_dir_all(path.parent().expect("a file path has a parent"))
            .expect("create parent directories");
        std::fs::write(path, contents).expect("write a repository file");
        self
    }

    /// Runs `driftless ARGS` with the repository as the working directory.
    pub fn driftless(&self, args: &[&str]) -> Run {
        driftless_in(self.path(), args)
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create directory");
    for entry in std::fs::read_dir(from).expect("read directory") {
        let entry = entry.expect("directory entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).expect("copy file");
        }
    }
}

/// A minimal valid Application.
pub fn application(namespace: &str, name: &str, component_type: &str) -> String {
    format!(
        "apiVersion: core.oam.dev/v1beta1\nkind: Application\nmetadata:\n  name: {name}\n  namespace: {namespace}\nspec:\n  components:\n    - name: {name}\n      type: {component_type}\n      properties:\n        image: nginx:1.27\n"
    )
}
