package mux

import "context"

// Requests run on worker goroutines that a Conn keeps after they finish,
// up to maxIdleWorkers: handing a request to a parked worker costs one
// wake-up like a go statement, but the worker's stack has already grown
// to what the JSON encoder and the socket write need (a fresh goroutine
// grows and copies its stack on most requests).

// maxIdleWorkers bounds the parked request workers per connection.
const maxIdleWorkers = 2

// rpcJob is one request for a worker.
type rpcJob struct {
	ctx context.Context
	fn  Handler
	m   rpcMsg
	pr  *pendingReq
}

// dispatch runs job on a parked worker, or on a new one when none waits.
func (c *Conn) dispatch(job rpcJob) {
	select {
	case c.jobs <- job:
	default:
		go c.worker(job)
	}
}

// worker runs job, then serves further jobs while it is among the
// maxIdleWorkers parked ones, until the connection ends. Workers are not
// in Conn.wg: like requests before, a handler may outlive the
// connection (it is cancelled, not waited for).
func (c *Conn) worker(job rpcJob) {
	for {
		c.runRequest(job.ctx, job.fn, job.m, job.pr)
		job = rpcJob{} // let the request be collected while parked
		if c.idleWorkers.Add(1) > maxIdleWorkers {
			c.idleWorkers.Add(-1)
			return
		}
		select {
		case job = <-c.jobs:
			c.idleWorkers.Add(-1)
		case <-c.done:
			c.idleWorkers.Add(-1)
			return
		}
	}
}
