package client

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/listwatch/listwatch/internal/testbackends"
)

// The test binary doubles as a client-go exec credential plugin (see
// TestExecPluginAuthenticates): run with one of these variables set, it
// acts as the plugin instead of running the tests.
const (
	// execPluginTokenEnv makes the binary print an ExecCredential with
	// the variable's value as the token.
	execPluginTokenEnv = "LISTWATCH_TEST_EXEC_PLUGIN_TOKEN"
	// execPluginFailEnv makes the binary print the variable's value on
	// stderr and exit with status 1.
	execPluginFailEnv = "LISTWATCH_TEST_EXEC_PLUGIN_FAIL"
)

// execPlugin acts as an exec credential plugin when the environment asks
// for it, and reports whether it did, with the exit status.
func execPlugin() (int, bool) {
	if msg, ok := os.LookupEnv(execPluginFailEnv); ok {
		fmt.Fprintln(os.Stderr, msg)
		return 1, true
	}
	token, ok := os.LookupEnv(execPluginTokenEnv)
	if !ok {
		return 0, false
	}
	// client-go describes the request in KUBERNETES_EXEC_INFO: check that
	// it speaks the version the kubeconfig asked for, non-interactively.
	var info struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Spec       struct {
			Interactive bool `json:"interactive"`
		} `json:"spec"`
	}
	if err := json.Unmarshal([]byte(os.Getenv("KUBERNETES_EXEC_INFO")), &info); err != nil {
		fmt.Fprintln(os.Stderr, "exec plugin: KUBERNETES_EXEC_INFO:", err)
		return 2, true
	}
	if info.APIVersion != "client.authentication.k8s.io/v1" || info.Kind != "ExecCredential" || info.Spec.Interactive {
		fmt.Fprintf(os.Stderr, "exec plugin: unexpected KUBERNETES_EXEC_INFO %+v\n", info)
		return 2, true
	}
	cred := map[string]any{
		"apiVersion": "client.authentication.k8s.io/v1",
		"kind":       "ExecCredential",
		"status":     map[string]any{"token": token},
	}
	if err := json.NewEncoder(os.Stdout).Encode(cred); err != nil {
		fmt.Fprintln(os.Stderr, "exec plugin:", err)
		return 2, true
	}
	return 0, true
}

func TestMain(m *testing.M) {
	if code, ok := execPlugin(); ok {
		os.Exit(code)
	}
	os.Exit(testbackends.Run(m))
}
