package wire

import (
	"log/slog"

	"github.com/mcpl-go/mcpl/internal/lograte"
)

// The warnings a peer can repeat once per message the other side sends:
// each is logged in full once, then counted and summarised every 10
// seconds (package lograte), so a flood makes a few lines, not one a
// message.
var (
	logQueueFullNotification = lograte.Kind{
		Msg:     "inbound queue full; notification dropped",
		Summary: "dropped %s notifications%s in %s: the inbound queue was full",
	}
	logQueueFullRequest = lograte.Kind{
		Msg:     "inbound queue full; request refused",
		Summary: "refused %s requests%s in %s: the inbound queue was full",
	}
	logRefusalDropped = lograte.Kind{
		Msg:     "refusal not sent; the request is left unanswered",
		Summary: "left %s refused requests%s unanswered in %s",
	}
	logInvalidRequest = lograte.Kind{
		Msg:     "request without a valid method refused (-32600)",
		Summary: "refused %s requests without a valid method%s in %s",
	}
	logAnswerNotWritten = lograte.Kind{
		Msg:     "answer not written",
		Summary: "could not write %s answers%s in %s",
	}
	logHandlerFailed = lograte.Kind{
		Msg:     "handler failed",
		Summary: "answered %s requests%s with an internal error in %s",
		Level:   slog.LevelError,
	}
	logNotificationFailed = lograte.Kind{
		Msg:     "notification handler failed",
		Summary: "%s notifications%s failed in their handler in %s",
	}
	logLateAnswer = lograte.Kind{
		Msg:     "late answer to an abandoned request dropped",
		Summary: "dropped %s late answers to abandoned requests%s in %s",
		Level:   slog.LevelDebug,
	}
	logCancelNotSent = lograte.Kind{
		Msg:     "cancellation not sent; the other side may still work on the request",
		Summary: "could not send %s cancellations%s in %s",
		Level:   slog.LevelInfo,
	}
	logStrayAnswer = lograte.Kind{
		Msg:     "answer to no request of ours dropped",
		Summary: "dropped %s answers to no request of ours%s in %s",
		Level:   slog.LevelDebug,
	}
)
