package ordered

import (
	"encoding/json"
	"testing"
)

func TestObjectKeepsOrder(t *testing.T) {
	o := &Object{}
	o.Set("z", 1)
	o.Set("a", &Object{})
	o.Set("m", []string{"x"})
	o.Set("z", true) // replaced where it stands
	inner := o.Get("a").(*Object)
	inner.Set("q", "v")
	b, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), `{"z":true,"a":{"q":"v"},"m":["x"]}`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	if o.Get("missing") != nil {
		t.Error("Get of a missing key is not nil")
	}
	if b, _ := json.Marshal(&Object{}); string(b) != "{}" {
		t.Errorf("empty object = %s", b)
	}
}
