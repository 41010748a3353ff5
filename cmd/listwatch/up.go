package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/listwatch/listwatch/apiserver/filters"
	"github.com/listwatch/listwatch/internal/ctxtime"
	"github.com/listwatch/listwatch/internal/kubeconfig"
	"github.com/listwatch/listwatch/internal/pki"
)

func init() {
	register("up", "start a local cluster: embedded etcd, API server on 127.0.0.1 and a kubeconfig", runUp)
}

// component is a part of the control plane that `up` runs in-process next
// to the API server, as a client of it like any other: it gets the
// kubeconfig `up` writes and returns when ctx ends. A component that fails
// stops `up`.
type component struct {
	name string
	// flags, when set, adds the component's flags to those of `up`.
	flags func(fs *flag.FlagSet)
	run   func(ctx context.Context, env componentEnv) error
}

// componentEnv is what a component needs to reach the server.
type componentEnv struct {
	// Kubeconfig is the path of the kubeconfig `up` wrote and Context the
	// context in it to use.
	Kubeconfig, Context string
	Logger              *slog.Logger
}

// components run under `up`; the controller-manager appends itself here
// from its file's init(), e.g.
//
//	func init() { components = append(components, component{name: "controller-manager", run: runControllers}) }
var components []component

// upConfig is the configuration of `up`.
type upConfig struct {
	// Dir holds everything: etcd data, certificates, token and kubeconfig.
	Dir string
	// Port is tried first; a free port is used when it is taken.
	Port           int
	StorageBackend string
	// CustomResourcesFile is a file or directory of CustomResourceDefinitions
	// (and other objects) applied at start-up; empty: none.
	CustomResourcesFile string
	CompactionInterval  time.Duration
	// ServiceClusterIPRange and ServiceNodePortRange: see serverConfig.
	ServiceClusterIPRange, ServiceNodePortRange string
	// DisableWatchList turns streaming lists off (--feature-gates=WatchList=false).
	DisableWatchList bool
	// DisableShardedListAndWatch makes the server ignore shardSelector
	// (--feature-gates=ShardedListAndWatch=false).
	DisableShardedListAndWatch bool
	// Output is how `up` says it is ready: "text" for people, "json" for
	// scripts (one line: url, kubeconfig, pid).
	Output string
}

// Names of what `up` keeps in its directory.
const (
	upTokenFile      = "token"
	upKubeconfigFile = "kubeconfig"
	upUser           = "listwatch-admin"
)

func runUp(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("up", flag.ContinueOnError)
	var cfg upConfig
	fs.StringVar(&cfg.Dir, "dir", "./.listwatch", "directory of the cluster's state: etcd data, certificates, token, kubeconfig")
	fs.IntVar(&cfg.Port, "port", 6443, "HTTPS port on 127.0.0.1; a free port is used if it is taken")
	fs.StringVar(&cfg.StorageBackend, "storage-backend", backendEtcd, "storage backend: etcd (embedded, in --dir) or memory")
	fs.StringVar(&cfg.CustomResourcesFile, "custom-resources", "", "YAML or JSON file, or directory of them, of CustomResourceDefinitions and other objects applied at start-up (as envtest's CRD paths)")
	fs.DurationVar(&cfg.CompactionInterval, "compaction-interval", 5*time.Minute, "interval of storage compaction (0: never)")
	serviceRangeFlags(fs, &cfg.ServiceClusterIPRange, &cfg.ServiceNodePortRange)
	featureGatesFlag(fs, &cfg.DisableWatchList, &cfg.DisableShardedListAndWatch)
	fs.StringVar(&cfg.Output, "output", "text", `how to say the cluster is ready on stdout: "text", or "json" (one line {"url","kubeconfig","pid"}, for scripts)`)
	exitWithParent := fs.Bool("exit-with-parent", false, "stop, as on Ctrl-C, when the process that started this one exits (for test scripts that may die without stopping it)")
	for _, c := range components {
		if c.flags != nil {
			c.flags(fs)
		}
	}
	log, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if cfg.Output != "text" && cfg.Output != "json" {
		return fmt.Errorf("--output %q: want text or json", cfg.Output)
	}
	if *exitWithParent {
		var stop context.CancelFunc
		ctx, stop = context.WithCancel(ctx)
		defer stop()
		go untilOrphaned(ctx, os.Getppid, time.Second, stop)
	}
	return up(ctx, cfg, os.Stdout, log)
}

// untilOrphaned calls orphaned once getppid no longer gives the parent it
// gave first (the parent exited and the process was handed to another),
// checking every period until ctx ends.
func untilOrphaned(ctx context.Context, getppid func() int, period time.Duration, orphaned func()) {
	parent := getppid()
	ctxtime.Every(ctx, period, func() bool {
		if getppid() == parent {
			return true
		}
		orphaned()
		return false
	})
}

// up runs a local cluster until ctx ends: it starts the API server, waits
// until it is ready, writes the kubeconfig, tells out where it is, and
// runs the components.
func up(ctx context.Context, cfg upConfig, out io.Writer, log *slog.Logger) error {
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	token, err := loadOrCreateToken(filepath.Join(dir, upTokenFile))
	if err != nil {
		return err
	}
	var tokens filters.TokenFile
	if err := tokens.Add(token, filters.User{Name: upUser, UID: upUser, Groups: []string{"system:masters"}}); err != nil {
		return err
	}
	srv, err := startServer(ctx, serverConfig{
		BindAddress:        "127.0.0.1",
		SecurePort:         cfg.Port,
		FallbackToFreePort: true,
		Storage: storageConfig{
			Backend:            cfg.StorageBackend,
			DataDir:            filepath.Join(dir, "etcd"),
			CompactionInterval: cfg.CompactionInterval,
		},
		Tokens:                      &tokens,
		CertDir:                     filepath.Join(dir, "pki"),
		ClientCAFile:                filepath.Join(dir, "pki", pki.CACertFile), // as a kubeadm cluster's
		CustomResourcesFile:         cfg.CustomResourcesFile,
		ServiceClusterIPRange:       cfg.ServiceClusterIPRange,
		ServiceNodePortRange:        cfg.ServiceNodePortRange,
		MaxRequestsInFlight:         filters.DefaultMaxRequestsInFlight,
		MaxMutatingRequestsInFlight: filters.DefaultMaxMutatingRequestsInFlight,
		PriorityAndFairness:         true,
		MaxRequestBodyBytes:         filters.DefaultMaxRequestBodyBytes,
		DisableWatchList:            cfg.DisableWatchList,
		DisableShardedListAndWatch:  cfg.DisableShardedListAndWatch,
	}, log)
	if err != nil {
		return err
	}
	if err := srv.waitReady(ctx); err != nil {
		if ctx.Err() != nil {
			// Interrupted while starting: a normal stop.
			return srv.shutdown()
		}
		return errors.Join(err, srv.shutdown())
	}
	// The kubeconfig authenticates with a client certificate the cluster
	// CA signs for the admin in system:masters, as kubeadm's admin.conf;
	// the token stays valid for kubeconfigs written before.
	certPEM, keyPEM, err := adminCertificate(filepath.Join(dir, "pki"))
	if err != nil {
		return errors.Join(err, srv.shutdown())
	}
	kcPath := filepath.Join(dir, upKubeconfigFile)
	if err := kubeconfig.Write(kcPath, kubeconfig.Config{Server: srv.URL, CAData: srv.CAPEM, ClientCertData: certPEM, ClientKeyData: keyPEM}); err != nil {
		return errors.Join(err, srv.shutdown())
	}
	printUp(out, srv.URL, kcPath, cfg)

	// The components and the server end together: ctx ending stops both,
	// a failing component stops the server.
	cctx, stopComponents := context.WithCancelCause(ctx)
	defer stopComponents(nil)
	var wg sync.WaitGroup
	env := componentEnv{Kubeconfig: kcPath, Context: kubeconfig.DefaultContext, Logger: log}
	for _, c := range components {
		wg.Go(func() {
			clog := log.With("component", c.name)
			if err := c.run(cctx, env); err != nil && cctx.Err() == nil {
				clog.Error("component failed", "err", err)
				stopComponents(fmt.Errorf("component %s: %w", c.name, err))
			}
		})
	}
	// The server outlives the components, so that they can finish their
	// work and say goodbye (the controller-manager releases its Lease)
	// while it still answers.
	srvCtx, stopServer := context.WithCancel(context.WithoutCancel(ctx))
	go func() {
		<-cctx.Done()
		wg.Wait()
		stopServer()
	}()
	err = srv.wait(srvCtx)
	stopComponents(nil)
	wg.Wait()
	stopServer()
	if cause := context.Cause(cctx); ctx.Err() == nil && cause != nil && !errors.Is(cause, context.Canceled) {
		err = errors.Join(cause, err)
	}
	return err
}

// printUp tells the user where the cluster is and how to use it.
func printUp(out io.Writer, url, kcPath string, cfg upConfig) {
	if cfg.Output == "json" {
		// One line, nothing else on stdout: a script reads it and goes.
		_ = json.NewEncoder(out).Encode(struct {
			URL        string `json:"url"`
			Kubeconfig string `json:"kubeconfig"`
			PID        int    `json:"pid"`
		}{url, kcPath, os.Getpid()})
		return
	}
	if cfg.Port != 0 && !strings.HasSuffix(url, fmt.Sprintf(":%d", cfg.Port)) {
		fmt.Fprintf(out, "port %d is busy; serving on another port\n", cfg.Port)
	}
	fmt.Fprintf(out, "listwatch API server ready at %s\n", url)
	fmt.Fprintf(out, "kubeconfig: %s\n", kcPath)
	fmt.Fprintf(out, "\n  export KUBECONFIG=%s\n  kubectl get namespaces\n\n", kcPath)
	fmt.Fprintln(out, "Press Ctrl-C to stop.")
}

// adminCertificate returns the PEM client certificate and key of the
// cluster's admin (upUser in system:masters), issued by the CA in dir.
func adminCertificate(dir string) (certPEM, keyPEM []byte, err error) {
	c, err := pki.EnsureClient(dir, "admin", upUser, []string{"system:masters"})
	if err != nil {
		return nil, nil, err
	}
	if certPEM, err = os.ReadFile(c.CertFile); err != nil {
		return nil, nil, err
	}
	if keyPEM, err = os.ReadFile(c.KeyFile); err != nil {
		return nil, nil, err
	}
	return certPEM, keyPEM, nil
}

// loadOrCreateToken returns the token stored at path, creating a random one
// on first use so that kubeconfigs handed out earlier keep working.
func loadOrCreateToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		if token := strings.TrimSpace(string(b)); token != "" {
			return token, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("token: %w", err)
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", fmt.Errorf("token: %w", err)
	}
	token := hex.EncodeToString(raw)
	if err := pki.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("token: %w", err)
	}
	return token, nil
}
