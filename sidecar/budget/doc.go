// Package budget is the sidecar's one memory budget: a count of bytes that
// everything holding a workspace's data in the sidecar's memory (exec
// answers, tunnel windows) draws on, so that the sum stays bounded whatever
// the number of workspaces, commands and connections.
//
// A Budget is a weighted semaphore of bytes. Acquire waits (with its
// context's deadline) until the bytes are free; TryAcquire takes them only
// if they are free now, TryAcquireSpare only if half of the budget stays
// free (a window that would like to grow, and may then be held as long as
// its reader does not read: it never starves what waits); Release gives
// them back. Waiters are served in order, so a large request is not
// starved by small ones.
package budget
