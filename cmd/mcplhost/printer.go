package main

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/mcpl-go/mcpl/internal/term"
)

// printer is the one way mcplhost's output reaches stdout or stderr (the
// logger aside: slog's text handler quotes what it writes). Much of what
// it prints comes from the server, which is not trusted, so nothing it
// writes carries a raw control character, bidirectional control or line
// break the program did not put there itself: text is escaped with
// term.Line, JSON with term.JSON. printer_test.go checks that no other
// file prints.
//
// Each line is one Write, so lines printed from different goroutines (an
// event as it arrives, a call's result) do not mix within a line.
type printer struct{ w io.Writer }

// linef prints one line: format (a program constant, with no newline or
// other control character of its own) filled with args, then escaped
// whole by term.Line. Whatever an argument carries, a server's string, an
// error quoting one, raw JSON, stays within this one line, with its
// control characters shown as escapes.
func (p printer) linef(format string, args ...any) {
	line := term.Line(fmt.Sprintf(format, args...))
	io.WriteString(p.w, line+"\n")
}

// styled prints one line as linef does, in an ANSI style (a colour, like
// "\x1b[32m") when style is not "": the style is the program's, put
// around the escaped line, so nothing in args can change it.
func (p printer) styled(style, format string, args ...any) {
	line := term.Line(fmt.Sprintf(format, args...))
	if style != "" {
		line = style + line + "\x1b[0m"
	}
	io.WriteString(p.w, line+"\n")
}

// block prints a text that may span lines, such as a tool's result, line
// by line (term.Lines), each after indent. As fmt.Println did, a text
// ending in a newline prints an empty line after it.
func (p printer) block(text, indent string) {
	var b strings.Builder
	for _, l := range term.Lines(text) {
		b.WriteString(indent)
		b.WriteString(l)
		b.WriteByte('\n')
	}
	io.WriteString(p.w, b.String())
}

// text prints a program constant of whole lines, such as a usage text,
// each line escaped as block escapes it (a constant has nothing to
// escape).
func (p printer) text(s string) {
	p.block(strings.TrimSuffix(s, "\n"), "")
}

// json prints v as indented JSON on its own lines, HTML left unescaped,
// then passed through term.JSON: the same JSON value, with no raw control
// or bidirectional character left in its strings.
func (p printer) json(v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := p.w.Write(term.JSON(b.Bytes()))
	return err
}

// usageError prints a usage error: the line format and args make, an
// empty line, then the command's usage text.
func (p printer) usageError(usage, format string, args ...any) {
	p.linef(format, args...)
	p.linef("")
	p.text(usage)
}

// logOptions are the logger's, at level. slog's text handler quotes a
// message, key or value with a control or bidirectional character in it
// (strconv.Quote escapes them), except DEL, which it writes raw: that is
// escaped here, as term.Line writes it.
func logOptions(level slog.Level) *slog.HandlerOptions {
	return &slog.HandlerOptions{Level: level, ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		a.Key = strings.ReplaceAll(a.Key, "\x7f", `\x7f`)
		var s string
		switch v := a.Value; v.Kind() {
		case slog.KindString:
			s = v.String()
		case slog.KindAny:
			switch x := v.Any().(type) {
			case error:
				s = x.Error()
			case encoding.TextMarshaler:
				b, err := x.MarshalText()
				if err != nil {
					return a
				}
				s = string(b)
			case []byte:
				s = string(x)
			default:
				s = fmt.Sprintf("%+v", x)
			}
		default:
			return a
		}
		if !strings.Contains(s, "\x7f") {
			return a
		}
		return slog.String(a.Key, strings.ReplaceAll(s, "\x7f", `\x7f`))
	}}
}
