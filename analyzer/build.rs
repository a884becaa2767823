//! Embeds the built-in definitions (`../definitions/**/*.cue`) at build time: generates
//! `$OUT_DIR/builtin_definitions.rs` with one `include_str!` per file, so adding a definition
//! file needs no code change.

use std::path::{Path, PathBuf};

fn main() {
    let manifest_dir =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let root = manifest_dir.join("..").join("definitions");
    println!("cargo::rerun-if-changed={}", root.display());
    let mut files = Vec::new();
    collect(&root, &mut files);
    files.sort();
    let mut out = String::from(
        "/// Built-in definition files: (path relative to `definitions/`, source text).\n\
         pub(crate) const BUILTIN_DEFINITIONS: &[(&str, &str)] = &[\n",
    );
    for file in &files {
        println!("cargo::rerun-if-changed={}", file.display());
        let relative = file
            .strip_prefix(&root)
            .expect("collected files live under the definitions directory")
            .to_string_lossy()
            .replace('\\', "/");
        out.push_str(&format!(
            "    ({relative:?}, include_str!({:?})),\n",
            file.display().to_string()
        ));
    }
    out.push_str("];\n");
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    std::fs::write(out_dir.join("builtin_definitions.rs"), out).expect("OUT_DIR is writable");
}

fn collect(dir: &Path, files: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            // Directories are watched too, so a new file triggers a rebuild.
            println!("cargo::rerun-if-changed={}", path.display());
            collect(&path, files);
        } else if path.extension().is_some_and(|extension| extension == "cue") {
            files.push(path);
        }
    }
}
