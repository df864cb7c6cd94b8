package session

import (
	"log/slog"

	"github.com/mcpl-go/mcpl/internal/lograte"
)

// The lines a session can repeat once per message a server sends: each is
// logged in full once, then counted and summarised every 10 seconds
// (package lograte).
var (
	logHeldFullNotification = lograte.Kind{
		Msg:     "too many messages held for the policy exchange; notification dropped",
		Summary: "dropped %s notifications%s in %s: too many messages were held for the policy exchange",
	}
	logHeldFullRequest = lograte.Kind{
		Msg:     "too many messages held for the policy exchange; request refused",
		Summary: "refused %s requests%s in %s: too many messages were held for the policy exchange",
	}
	logDeniedNotification = lograte.Kind{
		Msg:     "privileged notification discarded",
		Summary: "discarded %s privileged notifications%s in %s",
		Level:   slog.LevelInfo,
		KeyAttr: "method",
	}
	logDeniedRequest = lograte.Kind{
		Msg:     "privileged request refused",
		Summary: "refused %s privileged requests%s in %s",
		Level:   slog.LevelInfo,
		KeyAttr: "method",
	}
	logEventRetried = lograte.Kind{
		Msg:     "push/event retried; answered as before",
		Summary: "answered %s retried push events as before%s in %s",
		Level:   slog.LevelDebug,
	}
	logPushRejected = lograte.Kind{
		Msg:     "push/event rejected",
		Summary: "rejected %s push events%s in %s",
		Level:   slog.LevelInfo,
	}
)
