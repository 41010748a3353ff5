package controllermanager

import "github.com/listwatch/listwatch/client"

// ControllerClient is the client the manager gives controller name with
// Config.ServiceAccountCredentials, for the tests of package
// controllermanager_test.
func ControllerClient(m *Manager, name string) *client.Client { return m.clients[name] }
