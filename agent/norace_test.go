//go:build !race

package agent_test

const raceOn = false
