//go:build race

package sqlite

func init() { raceEnabled = true }
