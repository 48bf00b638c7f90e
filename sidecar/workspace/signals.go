package workspace

import "strings"

// Signals are the signals Signal sends to a command, by name: those the
// agent knows (the API's list too; tests keep the three equal).
var Signals = []string{"INT", "TERM", "KILL", "HUP", "QUIT", "USR1", "USR2"}

// SignalName returns the name in Signals that sig means ("int", "SIGINT"
// and "Int" all mean "INT"), or false.
func SignalName(sig string) (string, bool) {
	up := strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(sig)), "SIG")
	for _, s := range Signals {
		if up == s {
			return s, true
		}
	}
	return "", false
}
