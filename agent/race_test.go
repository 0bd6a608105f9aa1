//go:build race

package agent_test

// raceOn: the race detector slows the randomized test about tenfold.
const raceOn = true
