package fetchref

import "fmt"

// What fetch_reference tells an agent when it refuses: one sentence each,
// saying what happened, that nothing was fetched or kept, and whether
// anything can change it. A contract, pinned verbatim by tests. Links,
// origins and tokens never appear in them; the log has the detail.

func textUnknown(id string) string {
	return fmt.Sprintf("There's no reference %s here: it was never given, or it was dropped to make room, and ids are never reused, so fetching it again won't work.", id)
}

func textMissingID() string {
	return "fetch_reference needs ref_id, the id in a reference's stub (like ref_1_ab12); nothing was fetched."
}

func textExpired(id string) string {
	return fmt.Sprintf("Reference %s has expired, so this host didn't fetch it, and trying again won't change that.", id)
}

func textExpiryUnreadable(id string) string {
	return fmt.Sprintf("Reference %s is treated as expired, since its expiry time can't be read, so this host didn't fetch it, and trying again won't change that.", id)
}

func textExpiryRejected(id string) string {
	return fmt.Sprintf("Reference %s is treated as expired, since its expiry time isn't in a form this host accepts, so this host didn't fetch it, and trying again won't change that.", id)
}

func textUnbound(id string) string {
	return fmt.Sprintf("Reference %s isn't tied to any server, so there's nowhere to fetch it from; nothing was fetched, and trying again won't change that.", id)
}

func textNoOrigin(id string) string {
	return fmt.Sprintf("Reference %s came from a server this host runs as a local process, which has no address to fetch from; nothing was fetched, and trying again won't change that.", id)
}

func textServerGone(id string) string {
	return fmt.Sprintf("The server that sent reference %s isn't connected now, so nothing was fetched; once it is back, fetching again may work.", id)
}

func textNoCredentials(id string) string {
	return fmt.Sprintf("This host can't read the credentials of the server that sent reference %s, so nothing was fetched; whoever runs this host can set them.", id)
}

func textScheme(id string) string {
	return fmt.Sprintf("Reference %s has a link of a kind this host never fetches, so nothing was fetched, and trying again won't change that.", id)
}

func textPlaintext(id string) string {
	return fmt.Sprintf("Reference %s has an unencrypted link from a server this host reaches securely, so this host didn't fetch it, and trying again won't change that.", id)
}

func textCrossOrigin(id string) string {
	return fmt.Sprintf("Reference %s points somewhere other than the server that sent it, and this host fetches only from a server's own address; nothing was fetched, and trying again won't change that.", id)
}

func textClaimOverCeiling(id, claimed, ceiling string) string {
	return fmt.Sprintf("Reference %s claims %s, more than the %s this fetch may take, so nothing was fetched; a larger max_bytes may allow it.", id, claimed, ceiling)
}

func textBudget(id, budget string) string {
	return fmt.Sprintf("This host has fetched its limit of %s from the server that sent reference %s, so nothing was fetched; that limit resets when this host restarts.", budget, id)
}

func textRedirect(id string) string {
	return fmt.Sprintf("The server answered the fetch of reference %s with a redirect, which this host doesn't follow; nothing was fetched, and trying again won't change that unless the server serves it directly.", id)
}

func textHTTPStatus(id string, status int) string {
	return fmt.Sprintf("The server answered the fetch of reference %s with HTTP status %d, so nothing was saved; trying again later may work.", id, status)
}

func textOverCeiling(id, ceiling string) string {
	return fmt.Sprintf("Reference %s turned out larger than the %s this fetch may take, so the fetch was stopped and nothing was saved; a larger max_bytes may allow it.", id, ceiling)
}

func textOverBudget(id, budget string) string {
	return fmt.Sprintf("The fetch of reference %s went past this host's limit of %s from its server, so it was stopped and nothing was saved; that limit resets when this host restarts.", id, budget)
}

func textDigest(id string) string {
	return fmt.Sprintf("Reference %s's payload doesn't match the digest its server gave, so this host discarded it; fetching it again won't change that unless the server's copy changes.", id)
}

func textFailed(id string) string {
	return fmt.Sprintf("The fetch of reference %s failed before the payload arrived whole, so nothing was saved; trying again later may work.", id)
}

func textNoPlace(id string) string {
	return fmt.Sprintf("This host has no place to save fetched payloads, so reference %s wasn't fetched; whoever runs this host can give it one.", id)
}

func textNotSaved(id string) string {
	return fmt.Sprintf("Reference %s was fetched but this host couldn't save it, so nothing was kept; trying again later may work.", id)
}
