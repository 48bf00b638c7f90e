// Package daggerws (Dagger workspace functions) is what the Dagger
// module's Workspace functions do beyond resolving their Dagger arguments:
// it checks the arguments, calls a patina sidecar through its Go client
// (sidecar/client) and turns the answers into the strings `dagger call`
// prints and the errors it reports.
//
// It imports neither Dagger nor Docker code, so it is tested against a real
// `patina serve` started by the test, without an engine. The module's
// main.go only turns the *dagger.Service into a URL and the *dagger.Secret
// into a token, calls Connect, and calls one function here.
//
// What each function prints:
//
//   - Create: "key: value" lines about the new workspace, the name first.
//   - List: a table (NAME, STATUS, BRANCH, REPO, CREATED), oldest
//     first, or the sidecar's JSON array when asked.
//   - Exec: the command's stdout, whole. A non-zero exit (or a timeout) is
//     an *ExitError whose message holds the exit code and the trimmed
//     stderr and stdout, unless the caller allows failure.
//   - Diff: the unified diff text, as `git apply` takes it.
//   - Commit, Merge, Delete: one line saying what happened.
//
// Fetch is the one that prints nothing: it writes a workspace's files into
// a local directory, which the module returns as a Directory. How it gets
// them (today the files API, file by file) is its own business; the module
// only hands it a directory and the limits.
package daggerws
