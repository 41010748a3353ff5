// Command bench runs the same in-process workloads through listwatch and
// through client-go, side by side in one process, and prints a table of the
// results with the ratio between the two.
//
// This module is the only place in the repository that imports client-go's
// informer machinery: it exists to measure listwatch against it.
//
//	go run .            # full size
//	go run . -quick     # every workload at a tenth of its size
//	go run . -scale 100 # every workload at a hundredth: a smoke run
//	go run . -json      # also one JSON object per row
//	go run . -run sync  # only workloads whose name matches the regexp
//	go run . -run 'controlplane-deployment-1k$' -rounds 7
//	                    # a control-plane row's medians over 7 rounds of both sides
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"runtime/pprof"
	"slices"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/listwatch/listwatch/internal/kubelog"
)

// Row is one measured figure.
type Row struct {
	Workload string  `json:"workload"`
	Impl     string  `json:"impl"`
	Metric   string  `json:"metric"`
	Value    float64 `json:"value"`
	Unit     string  `json:"unit"`
}

// Implementation names used in rows.
const (
	implListwatch = "listwatch"
	implClientGo  = "client-go"
)

// config is what every workload is told.
type config struct {
	// scale divides workload sizes: 1 for a full run, 10 for -quick,
	// or -scale's.
	scale int
}

// size scales n down for quick runs, keeping it at least 1.
func (c config) size(n int) int {
	if c.scale > 1 {
		n /= c.scale
	}
	return max(n, 1)
}

type workload struct {
	name string
	run  func(cfg config) ([]Row, error)
}

// workloads is filled by init functions in the workload files, so that each
// file adds its own without touching this one.
var workloads []workload

func register(name string, run func(cfg config) ([]Row, error)) {
	workloads = append(workloads, workload{name: name, run: run})
}

// exitCode is the status main exits with, after its deferred calls (the
// profiles) ran.
var exitCode int

// profiledImpl and profileOut are -cpuprofile-impl and -cpuprofile's file.
var (
	profiledImpl string
	profileOut   *os.File
)

// profileWindow starts the CPU profile for a timed window of impl when
// -cpuprofile-impl names it, and returns what ends the window. Only the
// first such window of a run is profiled: a file holds one profile.
func profileWindow(impl string) (end func()) {
	if profileOut == nil || impl != profiledImpl {
		return func() {}
	}
	profiledImpl = "" // this window only
	if err := pprof.StartCPUProfile(profileOut); err != nil {
		fmt.Fprintf(os.Stderr, "bench: cpu profile: %v\n", err)
		return func() {}
	}
	return pprof.StopCPUProfile
}

func main() {
	// Kubernetes' packages (the API server's admission plugins, client-go)
	// log their info through klog; only their errors show beside the rows.
	kubelog.ToStderr()
	if spec := os.Getenv(replicaEnv); spec != "" {
		os.Exit(runReplica(spec))
	}
	run()
	os.Exit(exitCode)
}

func run() {
	quick := flag.Bool("quick", false, "run every workload at a tenth of its size")
	scale := flag.Int("scale", 0, "run every workload at 1/N of its size (-quick is -scale 10)")
	asJSON := flag.Bool("json", false, "also print one JSON object per row")
	timings := flag.Bool("timings", false, "print how long each workload ran, on standard error")
	filter := flag.String("run", "", "run only workloads whose name matches this regexp")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the run to this file")
	flag.StringVar(&profiledImpl, "cpuprofile-impl", "", "with -cpuprofile, profile only the timed windows of this implementation (listwatch, client-go, or floor) where a workload marks them, not the setup")
	memProfile := flag.String("memprofile", "", "write an allocation profile of the run to this file")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			profileOut = f
			if profiledImpl == "" {
				err = pprof.StartCPUProfile(f)
			}
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: cpu profile: %v\n", err)
			os.Exit(2)
		}
		defer func() {
			pprof.StopCPUProfile()
			_ = f.Close()
		}()
	}
	if *memProfile != "" {
		runtime.MemProfileRate = 64 << 10
		defer func() {
			f, err := os.Create(*memProfile)
			if err == nil {
				err = pprof.Lookup("allocs").WriteTo(f, 0)
				_ = f.Close()
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "bench: memory profile: %v\n", err)
			}
		}()
	}

	re, err := regexp.Compile(*filter)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: bad -run: %v\n", err)
		exitCode = 2
		return
	}
	cfg := config{scale: 1}
	switch {
	case *scale > 0:
		cfg.scale = *scale
	case *quick:
		cfg.scale = 10
	}
	sort.Slice(workloads, func(i, j int) bool { return workloads[i].name < workloads[j].name })

	var rows []Row
	failed := false
	for _, w := range workloads {
		if !re.MatchString(w.name) {
			continue
		}
		runtime.GC()
		start := time.Now()
		r, err := w.run(cfg)
		if *timings {
			fmt.Fprintf(os.Stderr, "bench: %s ran %v\n", w.name, time.Since(start).Round(time.Millisecond))
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: %s: %v\n", w.name, err)
			failed = true
			continue
		}
		rows = append(rows, r...)
	}
	printTable(os.Stdout, rows)
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		for _, r := range rows {
			_ = enc.Encode(r)
		}
	}
	if failed {
		exitCode = 1
	}
}

// printTable prints one line per workload and metric with listwatch's
// value, its baseline's and listwatch/baseline as a ratio. The baseline is
// client-go for most workloads; workloads measured against a floor (the
// least work the same result takes, see controlplane.go) go in a table of
// their own, whose header says so.
func printTable(out *os.File, rows []Row) {
	type key struct{ workload, metric, unit string }
	var order []key
	vals := map[key]map[string]float64{}
	for _, r := range rows {
		k := key{r.Workload, r.Metric, r.Unit}
		if vals[k] == nil {
			vals[k] = map[string]float64{}
			order = append(order, k)
		}
		vals[k][r.Impl] = r.Value
	}
	// A workload with floor (or kube-controller-manager) rows goes in
	// that baseline's table; any other in client-go's.
	bases := []string{implClientGo, implFloor, implKubeControllerManager}
	baselineOf := map[string]int{}
	for _, r := range rows {
		if i := slices.Index(bases, r.Impl); i > 0 {
			baselineOf[r.Workload] = i
		}
	}
	byBaseline := make([][]key, len(bases))
	for _, k := range order {
		byBaseline[baselineOf[k.workload]] = append(byBaseline[baselineOf[k.workload]], k)
	}
	printed := false
	for i, base := range bases {
		keys := byBaseline[i]
		if len(keys) == 0 && (i > 0 || len(order) > 0) {
			continue
		}
		if printed {
			fmt.Fprintln(out)
		}
		printed = true
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "workload\tmetric\tunit\tlistwatch\t%s\tlistwatch/%s\t\n", base, base)
		for _, k := range keys {
			lw, okL := vals[k][implListwatch]
			b, okB := vals[k][base]
			ratio := "-"
			if okL && okB && b != 0 {
				ratio = fmt.Sprintf("%.2fx", lw/b)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t\n", k.workload, k.metric, k.unit, fmtVal(lw, okL), fmtVal(b, okB), ratio)
		}
		tw.Flush()
	}
}

func fmtVal(v float64, ok bool) string {
	switch {
	case !ok:
		return "-"
	case v >= 1000:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.3f", v)
	}
}
