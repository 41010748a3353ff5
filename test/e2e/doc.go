// Package e2e holds whole-path tests of listwatch: the listwatch binary and
// in-process API servers over real etcd members on 127.0.0.1, driven over
// HTTP by listwatch's own client. They pin down what the issue calls
// durability (acknowledged writes survive process restarts and the loss of
// an etcd member; two API servers over one etcd serve the same data and a
// watch fails over between them) and fan-out (many watchers, one stalled).
//
// The package has no code of its own; everything is in its tests. The
// fan-out test runs a reduced size by default; set LISTWATCH_E2E_FANOUT=full
// (1,000 watchers, 10,000 updates) or LISTWATCH_E2E_FANOUT=<watchers>x<updates>
// for another size.
package e2e
