// vela-render-bench renders many Applications in one process through KubeVela's own dry-run
// package, the renderer behind `vela dry-run --offline`, so that its time per app carries no
// process start-up. It loads the definitions once, as `vela dry-run --offline -d DIR` does
// for one app, then renders every Application file of a directory and reports the wall time.
//
//	vela-render-bench -d DEFS_DIR -apps APPS_DIR [-n N]
//
// Built by `hack/build-vela.sh --bench` in the wrapper module that builds `vela` itself, so
// it runs the same KubeVela (v1.11.0) and CUE (v0.14.1). It reads the definitions as the CLI
// does (references/cli/dryrun.go) without importing the CLI package, which would pull in the
// whole of `vela` (Helm, Docker, Terraform clients) and multiply the build time. No cluster is
// contacted. Prints one JSON line on stdout.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	apicommon "github.com/oam-dev/kubevela/apis/core.oam.dev/common"
	corev1beta1 "github.com/oam-dev/kubevela/apis/core.oam.dev/v1beta1"
	"github.com/oam-dev/kubevela/pkg/appfile/dryrun"
	pkgdef "github.com/oam-dev/kubevela/pkg/definition"
	"github.com/oam-dev/kubevela/pkg/oam"
	oamutil "github.com/oam-dev/kubevela/pkg/oam/util"
	"github.com/oam-dev/kubevela/pkg/utils/common"
)

type result struct {
	Apps         int     `json:"apps"`
	Failed       int     `json:"failed"`
	Objects      int     `json:"objects"`
	LoadMillis   float64 `json:"load_ms"`
	RenderMillis float64 `json:"render_ms"`
	PerAppMillis float64 `json:"per_app_ms"`
}

func main() {
	defs := flag.String("d", "", "directory of definition files (.cue or .yaml)")
	appsDir := flag.String("apps", "", "directory of Application files (.yaml), searched recursively")
	limit := flag.Int("n", 0, "render at most this many apps (0: all)")
	flag.Parse()
	if *defs == "" || *appsDir == "" {
		fail("usage: vela-render-bench -d DEFS_DIR -apps APPS_DIR [-n N]")
	}

	var files []string
	err := filepath.WalkDir(*appsDir, func(path string, entry fs.DirEntry, err error) error {
		if err == nil && !entry.IsDir() && strings.HasSuffix(path, ".yaml") {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		fail("reading %s: %v", *appsDir, err)
	}
	sort.Strings(files)
	if *limit > 0 && len(files) > *limit {
		files = files[:*limit]
	}
	// Reading the files is left out of both sides' timing.
	apps := make([]*corev1beta1.Application, 0, len(files))
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			fail("reading %s: %v", file, err)
		}
		app := &corev1beta1.Application{}
		if err := yaml.Unmarshal(data, app); err != nil {
			fail("parsing %s: %v", file, err)
		}
		apps = append(apps, app)
	}

	// What `vela dry-run --offline -d DEFS` does before rendering (references/cli/dryrun.go):
	// the definitions read once, the built-in deploy step added, all of them in a fake client,
	// one dry-run option for every app.
	loadStart := time.Now()
	objects, err := readDefinitions(*defs)
	if err != nil {
		fail("reading definitions: %v", err)
	}
	deploy, err := oamutil.Object2Unstructured(deployDefinition)
	if err != nil {
		fail("the built-in deploy step: %v", err)
	}
	objects = append(objects, deploy)
	args := common.Args{Schema: common.Scheme}
	client, err := args.GetFakeClient(objects)
	if err != nil {
		fail("fake client: %v", err)
	}
	config, err := args.GetConfig()
	if err != nil {
		fail("rest config: %v", err)
	}
	option := dryrun.NewDryRunOption(client, config, objects, false)
	loadMillis := millis(time.Since(loadStart))

	out := result{Apps: len(apps), LoadMillis: loadMillis}
	start := time.Now()
	for _, app := range apps {
		namespace := app.Namespace
		if namespace == "" {
			namespace = "default"
		}
		ctx := oamutil.SetNamespaceInCtx(context.Background(), namespace)
		var buffer bytes.Buffer
		if err := option.ExecuteDryRunWithPolicies(ctx, app.DeepCopy(), &buffer); err != nil {
			out.Failed++
			fmt.Fprintf(os.Stderr, "%s/%s: %v\n", namespace, app.Name, err)
			continue
		}
		out.Objects += bytes.Count(buffer.Bytes(), []byte("\nkind: "))
	}
	out.RenderMillis = millis(time.Since(start))
	if len(apps) > 0 {
		out.PerAppMillis = out.RenderMillis / float64(len(apps))
	}
	encoded, _ := json.Marshal(out)
	fmt.Println(string(encoded))
	if out.Failed > 0 {
		os.Exit(1)
	}
}

// readDefinitions reads every .cue, .yaml and .yml file under dir as ReadDefinitionsFromFile of
// references/cli does: CUE through pkgdef.Definition, YAML as an unstructured object.
func readDefinitions(dir string) ([]*unstructured.Unstructured, error) {
	var objects []*unstructured.Unstructured
	err := filepath.WalkDir(dir, func(path string, entry fs.DirEntry, err error) error {
		if err != nil || entry.IsDir() {
			return err
		}
		switch filepath.Ext(path) {
		case ".cue":
			data, err := os.ReadFile(filepath.Clean(path))
			if err != nil {
				return err
			}
			def := pkgdef.Definition{Unstructured: unstructured.Unstructured{}}
			if err := def.FromCUEString(string(data), nil); err != nil {
				return fmt.Errorf("%s: failed to parse CUE for definition: %w", path, err)
			}
			objects = append(objects, &unstructured.Unstructured{Object: def.UnstructuredContent()})
		case ".yaml", ".yml":
			obj := &unstructured.Unstructured{}
			if err := common.ReadYamlToObject(path, obj); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			objects = append(objects, obj)
		}
		return nil
	})
	return objects, err
}

// deployDefinition is the deploy workflow step that `vela dry-run --offline` adds to the fake
// client (includeBuiltinWorkflowStepDefinition in references/cli/dryrun.go), copied as it is
// there: without it, an app's default workflow has no definition for its deploy step offline.
var deployDefinition = &corev1beta1.WorkflowStepDefinition{
	TypeMeta: metav1.TypeMeta{
		Kind:       corev1beta1.WorkflowStepDefinitionKind,
		APIVersion: corev1beta1.SchemeGroupVersion.String(),
	},
	ObjectMeta: metav1.ObjectMeta{
		Name:      "deploy",
		Namespace: oam.SystemDefinitionNamespace,
	},
	Spec: corev1beta1.WorkflowStepDefinitionSpec{
		Schematic: &apicommon.Schematic{
			CUE: &apicommon.CUE{
				Template: `
import (
	"vela/op"
)

"deploy": {
	type: "workflow-step"
	annotations: {
		"category": "Application Delivery"
	}
	labels: {
		"scope": "Application"
	}
	description: "A powerful and unified deploy step for components multi-cluster delivery with policies."
}
// Ignore the template field for it's useless in dry-run.
template: {}`,
			},
		},
	},
}

func millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "vela-render-bench: "+format+"\n", args...)
	os.Exit(2)
}
