#!/usr/bin/env bash
# Regenerate the reference outputs of the KubeVela render conformance harness
# (analyzer/tests/conformance.rs, documented in CONFORMANCE.md).
#
#   hack/regen-conformance.sh                # every example Application under $KUBEVELA
#   hack/regen-conformance.sh FILTER         # only examples whose source path contains FILTER
#                                            # (the manifest keeps the other entries as they are)
#
# For every document of kind `Application` (apiVersion core.oam.dev/*) found under the KubeVela
# folder, it runs the real `vela dry-run --offline` (built by hack/build-vela.sh) with KubeVela's
# built-in definitions (vela-templates/definitions/internal/) plus the definitions the example
# brings alongside it:
#   - definition documents of the same file,
#   - definition files in the example's directory and in its `definitions/` subdirectory,
#   - definition files in sibling directories named `definition`, `definitions` or `def`
#     (KubeVela's e2e layout: testdata/{app,definition}/).
# An example's own definition wins over a built-in of the same kind and name, as a repository's
# definition does in Driftless. Standalone Policy and Workflow documents of the same file are
# passed to vela too (`-f`), so an app can reference them.
#
# Output (checked in; the harness needs no Go build):
#   analyzer/tests/conformance/manifest.json        every example and vela's outcome
#   analyzer/tests/conformance/references/<source>.<document>.json
#                                                   vela's objects per printed render, canonical
#                                                   JSON (sorted keys)
# Progress goes to stderr. Needs python3 with PyYAML (YAML 1.1, like vela's go-yaml v2).
# Environment: KUBEVELA (default ../shared/kubevela next to the repository), VELA (a vela binary;
# default: hack/build-vela.sh builds or finds v1.11.0), JOBS (parallel vela runs, default 2).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
KUBEVELA=${KUBEVELA:-$REPO/../../shared/kubevela}
[[ -d $KUBEVELA/vela-templates/definitions/internal ]] || KUBEVELA=/work/shared/kubevela
[[ -d $KUBEVELA/vela-templates/definitions/internal ]] ||
  { echo "regen-conformance: KubeVela folder not found (set KUBEVELA)" >&2; exit 1; }
VELA=${VELA:-$("$REPO/hack/build-vela.sh")}
OUT=$REPO/analyzer/tests/conformance
FILTER=${1:-}
JOBS=${JOBS:-2}

command -v python3 >/dev/null || { echo "regen-conformance: python3 is required" >&2; exit 1; }
python3 -c 'import yaml' 2>/dev/null || { echo "regen-conformance: python3 needs PyYAML" >&2; exit 1; }

export KUBEVELA VELA OUT FILTER JOBS
exec python3 - <<'PYTHON'
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

KUBEVELA = os.path.realpath(os.environ["KUBEVELA"])
VELA = os.environ["VELA"]
OUT = os.environ["OUT"]
FILTER = os.environ["FILTER"]
JOBS = int(os.environ["JOBS"])
INTERNAL = os.path.join(KUBEVELA, "vela-templates/definitions/internal")
DEFINITION_KINDS = {
    "ComponentDefinition", "TraitDefinition", "PolicyDefinition",
    "WorkflowStepDefinition", "WorkloadDefinition",
}
# The Helm chart's definitions carry a template expression for their namespace; KubeVela's
# own tests substitute vela-system, and so do this script and the harness.
HELM_NAMESPACE = '{{ include "systemDefinitionNamespace" . }}'
# Points at a closed port on purpose: nothing is contacted successfully.
KUBECONFIG = """apiVersion: v1
kind: Config
clusters:
- cluster: {server: "https://127.0.0.1:1"}
  name: offline
contexts:
- context: {cluster: offline, user: offline, namespace: default}
  name: offline
current-context: offline
users:
- name: offline
  user: {token: offline}
"""
SEPARATOR = re.compile(r"^---[ \t]*(#.*)?$")


def say(message):
    print(f"==> {message}", file=sys.stderr, flush=True)


def split_raw(text):
    """Splits at `---` lines, keeping every piece (vela's headers are comment-only pieces)."""
    documents, current = [], []
    for line in text.split("\n"):
        if SEPARATOR.match(line):
            documents.append("\n".join(current))
            current = []
        else:
            current.append(line)
    documents.append("\n".join(current))
    return documents


def split_documents(text):
    """Splits YAML text at `---` lines. The harness (analyzer/tests/conformance.rs) splits the
    same way, so document indexes agree: documents without a non-blank, non-comment line are
    dropped before numbering."""
    documents, current = [], []
    for line in text.split("\n"):
        if SEPARATOR.match(line):
            documents.append("\n".join(current))
            current = []
        else:
            current.append(line)
    documents.append("\n".join(current))
    def has_content(document):
        return any(l.strip() and not l.lstrip().startswith("#") for l in document.split("\n"))
    return [d for d in documents if has_content(d)]


def header(document):
    """(apiVersion, kind, name) read textually from top-level keys, so a document that is not
    valid YAML is still classified (vela then reports the YAML error)."""
    values = {}
    for key in ("apiVersion", "kind"):
        m = re.search(rf"^{key}:[ \t]*['\"]?([^'\"\s#]+)", document, re.M)
        values[key] = m.group(1) if m else ""
    m = re.search(r"^metadata:[ \t]*\n(?:[ \t]+.*\n|[ \t]*\n)*?[ \t]+name:[ \t]*['\"]?([^'\"\s#]+)", document, re.M)
    values["name"] = m.group(1) if m else ""
    return values["apiVersion"], values["kind"], values["name"]


def read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read().replace(HELM_NAMESPACE, "vela-system")


def yaml_files(directory):
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return []
    return [os.path.join(directory, n) for n in names
            if n.endswith((".yaml", ".yml")) and os.path.isfile(os.path.join(directory, n))]


def definitions_in(path):
    """[(document index, kind, name)] of the definition documents of a YAML file."""
    found = []
    for index, document in enumerate(split_documents(read(path))):
        api_version, kind, name = header(document)
        if kind in DEFINITION_KINDS and api_version.startswith("core.oam.dev/"):
            found.append((index, kind, name))
    return found


def internal_definitions():
    """(kind, name, path) of the built-in .cue definitions (`<name>: { type: "<class>" ...`)."""
    kinds = {"component": "ComponentDefinition", "trait": "TraitDefinition",
             "policy": "PolicyDefinition", "workflow-step": "WorkflowStepDefinition",
             "workflowstep": "WorkflowStepDefinition"}
    found = []
    for root, _, names in os.walk(INTERNAL):
        for name in sorted(names):
            if not name.endswith(".cue"):
                continue
            path = os.path.join(root, name)
            text = read(path)
            # The definition's name is its top-level label; its class is the `type` one tab in.
            label = re.search(r'^"?([A-Za-z0-9._-]+)"?:\s*\{\s*$', text, re.M)
            kind = re.search(r'^\ttype:\s*"([a-z-]+)"', text, re.M)
            if label and kind and kind.group(1) in kinds:
                found.append((kinds[kind.group(1)], label.group(1), path))
    return sorted(found, key=lambda d: d[2])


def companion_definition_files(source):
    directory = os.path.dirname(source)
    files = [f for f in yaml_files(directory) if f != source]
    files += yaml_files(os.path.join(directory, "definitions"))
    parent = os.path.dirname(directory)
    for sibling in ("definition", "definitions", "def"):
        candidate = os.path.join(parent, sibling)
        if candidate != directory and os.path.isdir(candidate):
            files += yaml_files(candidate)
    return files


def discover():
    """Every Application document under the KubeVela folder, with what vela needs for it."""
    examples = []
    for root, dirs, names in os.walk(KUBEVELA):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        if os.path.realpath(root).startswith(os.path.join(KUBEVELA, "charts")):
            continue
        for name in sorted(names):
            if not name.endswith((".yaml", ".yml")):
                continue
            source = os.path.join(root, name)
            relative = os.path.relpath(source, KUBEVELA)
            if FILTER and FILTER not in relative:
                continue
            documents = split_documents(read(source))
            headers = [header(d) for d in documents]
            for index, (api_version, kind, _) in enumerate(headers):
                if kind != "Application" or not api_version.startswith("core.oam.dev/"):
                    continue
                companions = [i for i, (a, k, _) in enumerate(headers)
                              if k in ("Policy", "Workflow") and a.startswith("core.oam.dev/")]
                definitions, seen = [], set()
                for i, (a, k, n) in enumerate(headers):
                    if k in DEFINITION_KINDS and a.startswith("core.oam.dev/") and (k, n) not in seen:
                        seen.add((k, n))
                        definitions.append({"path": relative, "document": i})
                for path in companion_definition_files(source):
                    for i, k, n in definitions_in(path):
                        if (k, n) not in seen:
                            seen.add((k, n))
                            definitions.append({"path": os.path.relpath(path, KUBEVELA), "document": i})
                examples.append({
                    "id": f"{relative}#{index}",
                    "source": relative,
                    "document": index,
                    "companions": companions,
                    "definitions": definitions,
                    "overrides": sorted(seen),
                })
    return examples


class Loader(yaml.SafeLoader):
    """YAML 1.1 like go-yaml v2, minus timestamps: vela prints every string that would resolve
    to another type quoted, and go-yaml decodes unquoted dates as strings into JSON."""


Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
# Go prints large and small floats as 1e+21 / 1e-06 (no dot), which YAML 1.1 reads as strings.
Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?[0-9]+(\.[0-9]*)?[eE][-+]?[0-9]+$"), list("-+0123456789"))


def stringify_keys(value):
    if isinstance(value, dict):
        return {str(k).lower() if isinstance(k, bool) else str(k): stringify_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [stringify_keys(v) for v in value]
    return value


APP_HEADER = re.compile(r"^# Application\((.*)\) -- (Component|Policy)\((.*)\)\s*$")
TRAIT_HEADER = re.compile(r"^## From the (?:trait (.*?)|auxiliary workload)\s*$")


def parse_dry_run(stdout):
    """vela's printed renders: [{label, objects: [{component, trait, object}]}]. Blocks with
    the same label (one per component) are joined; a new label starts a new render."""
    renders = []
    label, component, kind = None, None, None
    for document in split_raw(stdout):
        lines = document.split("\n")
        trait = None
        body = []
        for line in lines:
            m = APP_HEADER.match(line)
            if m:
                label, kind, component = m.group(1), m.group(2), m.group(3)
                if not renders or renders[-1]["label"] != label:
                    renders.append({"label": label, "objects": []})
                continue
            m = TRAIT_HEADER.match(line)
            if m and not body:
                trait = m.group(1) if m.group(1) is not None else "AuxiliaryWorkload"
                continue
            body.append(line)
        text = "\n".join(body)
        if not text.strip() or all(not l.strip() or l.lstrip().startswith("#") for l in body):
            continue
        if label is None:
            raise ValueError("object before any '# Application(...)' header")
        obj = stringify_keys(yaml.load(text, Loader=Loader))
        renders[-1]["objects"].append({
            "component": component if kind == "Component" else None,
            "policy": component if kind == "Policy" else None,
            "trait": trait,
            "object": obj,
        })
    return renders


def first_error_line(stderr, stdout):
    text = (stderr.strip() or stdout.strip())
    lines = [l for l in text.split("\n") if l.strip()]
    for line in lines:
        if line.startswith("Error:"):
            return line.strip()[:400]
    for line in lines:
        if re.search(r"error|Error|failed|cannot", line):
            return line.strip()[:400]
    return (lines[-1].strip()[:400] if lines else "vela exited with an error and no message")


def run(example, internal):
    with tempfile.TemporaryDirectory(prefix="conformance-") as work:
        home = os.path.join(work, "home")
        defs = os.path.join(work, "defs")
        os.makedirs(home)
        os.makedirs(defs)
        # vela v1.11 needs a kubeconfig even offline (it reads the REST config and tries to list
        # CUE packages, which fails fast and is ignored); without one it exits 1 silently.
        kubeconfig = os.path.join(work, "kubeconfig")
        with open(kubeconfig, "w") as f:
            f.write(KUBECONFIG)
        overridden = {tuple(o) for o in example["overrides"]}
        for kind, name, path in internal:
            if (kind, name) not in overridden:
                shutil.copy(path, os.path.join(defs, f"internal-{os.path.basename(path)}"))
        for n, definition in enumerate(example["definitions"]):
            document = split_documents(read(os.path.join(KUBEVELA, definition["path"])))[definition["document"]]
            with open(os.path.join(defs, f"example-{n:02}.yaml"), "w") as f:
                f.write(document + "\n")
        documents = split_documents(read(os.path.join(KUBEVELA, example["source"])))
        files = []
        for n, index in enumerate([example["document"]] + example["companions"]):
            path = os.path.join(work, f"input-{n}.yaml")
            with open(path, "w") as f:
                f.write(documents[index] + "\n")
            files += ["-f", path]
        command = [VELA, "dry-run", "--offline", *files, "-d", defs]
        try:
            done = subprocess.run(command, cwd=work, env={**os.environ, "HOME": home, "KUBECONFIG": kubeconfig},
                                  capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            return {"outcome": "vela-error", "reason": "vela dry-run timed out after 300 s"}
        if done.returncode != 0:
            # The temporary directory's name would make the manifest differ on every run.
            reason = first_error_line(done.stderr, done.stdout).replace(work, "<tmp>")
            return {"outcome": "vela-error", "reason": reason}
        try:
            renders = parse_dry_run(done.stdout)
        except (yaml.YAMLError, ValueError) as error:
            return {"outcome": "vela-error", "reason": f"cannot read vela's output: {error}"[:400]}
        return {"outcome": "rendered", "renders": renders}


def reference_path(example):
    return os.path.join("references", f"{example['source']}.{example['document']}.json")


def main():
    internal = internal_definitions()
    say(f"vela: {VELA}")
    say(f"kubevela: {KUBEVELA} ({len(internal)} built-in definitions)")
    examples = discover()
    say(f"{len(examples)} example Applications{' matching ' + FILTER if FILTER else ''}")
    os.makedirs(OUT, exist_ok=True)
    manifest_path = os.path.join(OUT, "manifest.json")
    previous = []
    if FILTER and os.path.exists(manifest_path):
        with open(manifest_path) as f:
            previous = [e for e in json.load(f)["examples"] if FILTER not in e["source"]]
    if not FILTER:
        # A full run owns the whole references tree: drop files of examples that are gone.
        shutil.rmtree(os.path.join(OUT, "references"), ignore_errors=True)
    entries = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=JOBS) as pool:
        results = pool.map(lambda e: (e, run(e, internal)), examples)
        for n, (example, result) in enumerate(results, 1):
            entry = {k: example[k] for k in ("id", "source", "document", "companions", "definitions")}
            entry["outcome"] = result["outcome"]
            if result["outcome"] == "rendered":
                entry["reference"] = reference_path(example)
                path = os.path.join(OUT, entry["reference"])
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w") as f:
                    json.dump({"id": example["id"], "renders": result["renders"]}, f,
                              indent=1, sort_keys=True, ensure_ascii=False)
                    f.write("\n")
                objects = sum(len(r["objects"]) for r in result["renders"])
                say(f"[{n}/{len(examples)}] {example['id']}: rendered, {objects} objects")
            else:
                entry["reason"] = result["reason"]
                say(f"[{n}/{len(examples)}] {example['id']}: vela error: {result['reason']}")
            entries.append(entry)
    entries = sorted(previous + entries, key=lambda e: (e["source"], e["document"]))
    with open(manifest_path, "w") as f:
        json.dump({
            "generator": "hack/regen-conformance.sh",
            "vela": subprocess.run([VELA, "version"], capture_output=True, text=True,
                                   env={**os.environ, "HOME": tempfile.gettempdir()}).stdout.split("\n")[0].strip()
                    if os.path.exists(VELA) else "",
            "examples": entries,
        }, f, indent=1, ensure_ascii=False)
        f.write("\n")
    rendered = sum(1 for e in entries if e["outcome"] == "rendered")
    say(f"manifest: {len(entries)} examples, {rendered} rendered by vela, {len(entries) - rendered} vela errors")


main()
PYTHON
