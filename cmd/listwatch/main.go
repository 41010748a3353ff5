// Command listwatch is the one binary of the project: the API server
// (`listwatch apiserver`), a one-command local cluster (`listwatch up`) and a
// small kubectl-like client (`listwatch get`).
//
// Each command lives in its own file and registers itself from init() with
// register, so main stays a dispatcher that knows no command by name.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

// command is one subcommand of the binary.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string) error
}

// commands holds the registered subcommands by name; it is filled by init
// functions before main runs and only read afterwards.
var commands = map[string]command{}

// register adds a subcommand; run receives the arguments after the command
// name and a context cancelled on SIGINT or SIGTERM. Registering a name twice
// is a programming error caught at start-up.
func register(name, summary string, run func(ctx context.Context, args []string) error) {
	if _, dup := commands[name]; dup {
		panic(fmt.Sprintf("listwatch: command %q registered twice", name))
	}
	commands[name] = command{name: name, summary: summary, run: run}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	// After the first signal starts a graceful shutdown, a second one
	// kills the process the default way, for when shutdown hangs.
	context.AfterFunc(ctx, stop)
	code := dispatch(ctx, os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}

// dispatch runs the command named by args[0] and returns the process exit
// code: 0 on success (or help), 2 on a usage error, 1 when the command fails.
func dispatch(ctx context.Context, args []string, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		usage(stderr)
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "listwatch: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	err := cmd.run(ctx, args[1:])
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	default:
		fmt.Fprintf(stderr, "listwatch %s: %v\n", cmd.name, err)
		return 1
	}
}

// usage lists the registered commands.
func usage(w io.Writer) {
	names := make([]string, 0, len(commands))
	for name := range commands {
		names = append(names, name)
	}
	sort.Strings(names)
	fmt.Fprintln(w, "Usage: listwatch <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	for _, name := range names {
		fmt.Fprintf(w, "  %-12s %s\n", name, commands[name].summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'listwatch <command> -h' for the flags of a command.")
}
