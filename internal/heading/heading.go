// Package heading is the format of the header line an agent reads before
// each inbox message, such as
//
//	[#general (g) on chat · from alice · addressed to you · message m1]
//
// The agent layer (internal/agent) writes the header; the scripted model
// (internal/model/scripted), which is below the agent layer and must not
// import it, reads it back to tell which messages address the agent. Both
// take the header's marks from here, so the two cannot drift apart.
// docs/texts.md lists the header's words.
//
// Every field after the first starts with a word of the host's ("from",
// "thread", "addressed to you", "message", "at"), and a server's string in
// a field has its "·", "[", "]" and "\" escaped (content.Field): a field a
// server wrote can't pass for another, nor end the header early.
package heading

// AddressedMark stands before "message <id>" in the header of a message that
// addresses the agent (tag chat:addressed), after its author or its thread:
// "[#general (g) on chat · from alice · addressed to you · message m1]". The
// header of any other message has " · message " there instead.
const AddressedMark = " · addressed to you · "

// AuthorMark stands before a message's author, after where it came from:
// "[#general (g) on chat · from alice · message m1]".
const AuthorMark = " · from "

// DirectMark and PrivateMark stand after the author (and the thread) of a
// message sent privately: DirectMark when it is a direct message
// (chat:dm), PrivateMark when it is private otherwise (chat:private):
// "[discord:dm:d77 on discord · from bob · direct message · addressed to
// you · message m200]".
const (
	DirectMark  = " · direct message"
	PrivateMark = " · private"
)
