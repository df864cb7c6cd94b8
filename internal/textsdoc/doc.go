// Package textsdoc checks docs/texts.md, the list of every text an agent
// can read, against the code that writes those texts: each row's source
// file and identifier must exist, and each row's words must be that file's
// words. It holds only that test.
package textsdoc
