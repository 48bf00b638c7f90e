//go:build !linux

package inside

import "os"

// takeSecretEnv returns the value of the environment variable name and
// removes it from the environment children inherit (elsewhere than Linux
// nothing more can be done).
func takeSecretEnv(name string, _ bool) (string, error) {
	v, _ := os.LookupEnv(name)
	_ = os.Unsetenv(name)
	return v, nil
}
