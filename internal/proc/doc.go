// Package proc is the one owner of muxd's child processes.
//
// Every child muxd starts goes through [Start]: it runs in its own process
// group (or its own session, for terminals), with default signal
// dispositions and the environment built by [Env]. Each child is waited for
// through its pidfd on Go's netpoller, so no thread is parked per child and
// no other waiter can steal its exit status. When muxd is PID 1 or a child
// subreaper ([BecomeSubreaper]), orphans reparented to it are reaped by pid,
// never with wait(-1), so the statuses of owned children are never lost.
//
// [KillTree] ends a whole tree: it stops every member first (SIGSTOP), so
// that no script runs its next command mid-kill, collects descendants
// until the set is stable, then signals them all and escalates to SIGKILL
// after a grace period.
package proc
