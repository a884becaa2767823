// cue-bench evaluates the given CUE files N times in one process with Go CUE (the module
// hack/cue-compare.sh builds it in pins the version), so that its time per evaluation carries
// no process start-up: `-validate` checks the value for errors (`Value.Validate()`, non-concrete
// values allowed), otherwise it is exported to JSON as `cue export` does. Prints one JSON line
// on stdout: {"ok", "per_eval_ms", "error"}.
//
//	cue-bench [-validate] -n N FILE.cue...
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"time"

	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/cue/load"
)

func main() {
	n := flag.Int("n", 10, "evaluations")
	validate := flag.Bool("validate", false, "check for errors instead of exporting")
	flag.Parse()
	files := flag.Args()
	out := map[string]any{"ok": true}
	start := time.Now()
	for i := 0; i < *n; i++ {
		// A fresh context each time: nothing is cached between evaluations, as for
		// a `cue export` run.
		ctx := cuecontext.New()
		instances := load.Instances(files, nil)
		if err := instances[0].Err; err != nil {
			out["ok"], out["error"] = false, err.Error()
			break
		}
		value := ctx.BuildInstance(instances[0])
		var err error
		if *validate {
			err = value.Validate()
		} else {
			_, err = value.MarshalJSON()
		}
		if err != nil {
			out["ok"], out["error"] = false, err.Error()
			break
		}
	}
	out["per_eval_ms"] = float64(time.Since(start).Microseconds()) / 1000 / float64(*n)
	encoded, _ := json.Marshal(out)
	fmt.Println(string(encoded))
}
