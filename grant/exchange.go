package grant

// PolicyOutcome is how a connection's policy exchange ended (SPEC §5.3, §6.7):
// the server's answer to the host's featureSets/update Request.
type PolicyOutcome string

// Policy exchange outcomes.
const (
	// OutcomeAccepted: {accepted: true}, nothing degraded.
	OutcomeAccepted PolicyOutcome = "accepted"
	// OutcomeDegraded: {accepted: true} with unavailable feature sets.
	OutcomeDegraded PolicyOutcome = "degraded"
	// OutcomeRefused: {accepted: false} with a fallback; MCPL stays off
	// (fallback "mcp-only") or the connection closes ("close").
	OutcomeRefused PolicyOutcome = "refused"
	// OutcomeNotification: a 0.4 server answered the Request with
	// method-not-found, and the host sent the policy again as a
	// Notification, which 0.4 servers take (the 0.4 path).
	OutcomeNotification PolicyOutcome = "notification"
	// OutcomeUnanswered: no answer within the deadline, an error, or an
	// answer that is not a receipt; MCPL's privileged surface stays off.
	OutcomeUnanswered PolicyOutcome = "unanswered"
)

// Established reports whether the outcome establishes the computed grant.
// Otherwise the grant is withheld (Grant.Withheld): MCP's tools still
// work, MCPL's privileged surface is off.
func (o PolicyOutcome) Established() bool {
	return o == OutcomeAccepted || o == OutcomeDegraded || o == OutcomeNotification
}
