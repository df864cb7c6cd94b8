package store_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/mcpl-go/mcpl/store"
	"github.com/mcpl-go/mcpl/store/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestMemory(t *testing.T) {
	storetest.Run(t, func(*testing.T) store.Store { return store.NewMemory() })
}
