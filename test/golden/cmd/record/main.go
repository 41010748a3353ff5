// Command record runs the golden case files against a real kube-apiserver
// and writes its masked answers as the goldens the test replays.
// hack/record-goldens.sh builds and starts kube-apiserver and runs it:
//
//	go run ./test/golden/cmd/record -server https://127.0.0.1:PORT -ca ca.crt -token TOKEN
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/listwatch/listwatch/test/golden"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "record:", err)
		os.Exit(1)
	}
}

type options struct {
	server, ca, token string
	cases, out        string
	only              []string
	timeout           time.Duration
}

func parse(args []string) (options, error) {
	var o options
	var only string
	fs := flag.NewFlagSet("record", flag.ContinueOnError)
	fs.StringVar(&o.server, "server", "", "kube-apiserver base URL, e.g. https://127.0.0.1:6443 (required)")
	fs.StringVar(&o.ca, "ca", "", "PEM file of the CA that signed the server's certificate (default: the system pool)")
	fs.StringVar(&o.token, "token", "", "bearer token of a user in system:masters")
	fs.StringVar(&o.cases, "cases", "test/golden/cases", "directory of the case files")
	fs.StringVar(&o.out, "out", "test/golden/testdata", "directory the goldens are written to")
	fs.StringVar(&only, "only", "", "comma-separated case names (file names without .yaml) to record; default all")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "time allowed to wait for the server's /readyz")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.server == "" {
		return o, errors.New("-server is required")
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	for name := range strings.SplitSeq(only, ",") {
		if name = strings.TrimSpace(strings.TrimSuffix(name, ".yaml")); name != "" {
			o.only = append(o.only, name)
		}
	}
	return o, nil
}

func run(ctx context.Context, args []string) error {
	o, err := parse(args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	cases, err := golden.LoadCases(o.cases)
	if err != nil {
		return err
	}
	if len(o.only) > 0 {
		var picked []*golden.Case
		for _, c := range cases {
			if slices.Contains(o.only, c.Name) {
				picked = append(picked, c)
			}
		}
		if len(picked) != len(o.only) {
			return fmt.Errorf("-only %q: some names are not case files of %s", o.only, o.cases)
		}
		cases = picked
	}
	hc, err := httpClient(o.ca)
	if err != nil {
		return err
	}
	defer hc.CloseIdleConnections()
	target := golden.Target{URL: o.server, Client: hc, Token: o.token}
	if err := waitReady(ctx, target, o.timeout); err != nil {
		return err
	}
	server, err := serverVersion(ctx, target)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return fmt.Errorf("output directory: %w", err)
	}
	start := time.Now()
	steps := 0
	for _, c := range cases {
		began := time.Now()
		rec, err := golden.Run(ctx, target, c)
		if err != nil {
			return err
		}
		rec.Server = server
		for i, s := range c.Steps {
			if got := rec.Steps[i].Response.Code; s.Expect != 0 && got != s.Expect {
				fmt.Fprintf(os.Stderr, "record: note: %s: expected %d, kube answered %s\n", golden.ID(c.Name, s.Name), s.Expect, golden.Summary(rec.Steps[i].Response))
			}
		}
		if err := golden.WriteRecord(filepath.Join(o.out, c.Name+".json"), rec); err != nil {
			return err
		}
		steps += len(rec.Steps)
		fmt.Fprintf(os.Stderr, "record: %s: %d steps in %v\n", c.Name, len(rec.Steps), time.Since(began).Round(time.Millisecond))
	}
	fmt.Fprintf(os.Stderr, "record: %d case files, %d steps from %s in %v\n", len(cases), steps, server, time.Since(start).Round(time.Millisecond))
	return nil
}

func httpClient(caFile string) (*http.Client, error) {
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca: no certificate in %s", caFile)
		}
		tlsCfg.RootCAs = pool
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tlsCfg
	return &http.Client{Transport: tr, Timeout: time.Minute}, nil
}

// waitReady polls /readyz until the server answers 200 or timeout passes.
func waitReady(ctx context.Context, t golden.Target, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last string
	for {
		code, body, err := get(ctx, t, "/readyz")
		switch {
		case err != nil:
			last = err.Error()
		case code == http.StatusOK:
			return nil
		default:
			last = fmt.Sprintf("%d %s", code, body)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready within %v: %s", t.URL, timeout, last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// serverVersion names the server by /version: "kube-apiserver v1.37.2".
func serverVersion(ctx context.Context, t golden.Target) (string, error) {
	code, body, err := get(ctx, t, "/version")
	if err != nil {
		return "", err
	}
	if code != http.StatusOK {
		return "", fmt.Errorf("/version: %d %s", code, body)
	}
	var v struct {
		GitVersion string `json:"gitVersion"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return "", fmt.Errorf("/version: %w", err)
	}
	return "kube-apiserver " + v.GitVersion, nil
}

func get(ctx context.Context, t golden.Target, path string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(t.URL, "/")+path, nil)
	if err != nil {
		return 0, nil, fmt.Errorf("%s: %w", path, err)
	}
	if t.Token != "" {
		req.Header.Set("Authorization", "Bearer "+t.Token)
	}
	resp, err := t.Client.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return resp.StatusCode, body, fmt.Errorf("%s: %w", path, err)
	}
	return resp.StatusCode, body, nil
}
