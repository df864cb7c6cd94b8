package wire

import (
	"bytes"
	"encoding/json"
	"sync"
)

// Answers' results are decoded into the caller's type with a json.Decoder
// kept between calls rather than json.Unmarshal: the same validation and
// the same errors, but the decoder's scanner and state are reused, where
// Unmarshal makes its state and grows its scanner's stack anew for every
// value.

// resultDecoder is a json.Decoder over a reader that is reset to each
// result.
type resultDecoder struct {
	src bytes.Reader
	dec *json.Decoder
	fed int64 // bytes handed to dec, all told
}

var resultDecoders sync.Pool

// maxPooledResult bounds the results whose decoder is kept: its buffer
// grows to the largest value it has read, and a rare large result must
// not keep that memory for good.
const maxPooledResult = 64 << 10

// decodeResult decodes data, one JSON value (the envelope scanner has
// checked it is one), into v.
func decodeResult(data []byte, v any) error {
	d, _ := resultDecoders.Get().(*resultDecoder)
	if d == nil {
		d = &resultDecoder{}
		d.dec = json.NewDecoder(&d.src)
	}
	d.src.Reset(data)
	d.fed += int64(len(data))
	err := d.dec.Decode(v)
	// A decoder is kept only when it read the value and stopped at its
	// end, so that nothing of it is left for the next: not after an error
	// (a syntax error stays with a json.Decoder), nor after a value
	// followed by space.
	if err == nil && d.src.Len() == 0 && d.dec.InputOffset() == d.fed && len(data) <= maxPooledResult {
		resultDecoders.Put(d)
	}
	return err
}
