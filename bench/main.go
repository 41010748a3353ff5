// Command bench runs the same in-process workloads through listwatch and
// through client-go, side by side in one process, and prints a table of the
// results with the ratio between the two.
//
// This module is the only place in the repository that imports client-go's
// informer machinery: it exists to measure listwatch against it.
//
//	go run .            # full size
//	go run . -quick     # every workload at a tenth of its size
//	go run . -json      # also one JSON object per row
//	go run . -run sync  # only workloads whose name matches the regexp
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"sort"
	"text/tabwriter"
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
	// scale divides workload sizes: 1 for a full run, 10 for -quick.
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

func main() {
	quick := flag.Bool("quick", false, "run every workload at a tenth of its size")
	asJSON := flag.Bool("json", false, "also print one JSON object per row")
	filter := flag.String("run", "", "run only workloads whose name matches this regexp")
	flag.Parse()

	re, err := regexp.Compile(*filter)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: bad -run: %v\n", err)
		os.Exit(2)
	}
	cfg := config{scale: 1}
	if *quick {
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
		r, err := w.run(cfg)
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
		os.Exit(1)
	}
}

// printTable prints one line per workload and metric with both
// implementations' values and listwatch/client-go as a ratio.
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
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\tmetric\tunit\tlistwatch\tclient-go\tlistwatch/client-go\t")
	for _, k := range order {
		lw, okL := vals[k][implListwatch]
		cg, okC := vals[k][implClientGo]
		ratio := "-"
		if okL && okC && cg != 0 {
			ratio = fmt.Sprintf("%.2fx", lw/cg)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t\n", k.workload, k.metric, k.unit, fmtVal(lw, okL), fmtVal(cg, okC), ratio)
	}
	tw.Flush()
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
