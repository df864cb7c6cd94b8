// Package layers checks the module's import graph against the layer table
// in docs/architecture.md: every package is placed on a line, imports point
// down the table only (a package's own imports; its tests may import
// anything), and no production package imports test support. The table
// says how it is read, right under it. The package holds only that test.
package layers
